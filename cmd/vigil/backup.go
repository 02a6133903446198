package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/backup"
)

// newBackupCmd is vigil backup: incremental, verifiable backups of a DB
// (package backup).
func newBackupCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Create, list, verify, restore, delete incremental backups (--backup-dir DIR)",
		Long: `vigil backup keeps incremental backups of a database in a backup directory:
tables are copied once into shared/ and shared by every backup that holds them;
each backup's other files are in private/<id>/, and meta/<id> lists every file
with its size and whole-file checksum. A damaged byte anywhere in a backup makes
verify and restore fail, naming the file (exit status 1).`,
	}
	cmd.PersistentFlags().StringVar(&dir, "backup-dir", "", "backup directory (required)")
	// withEngine opens the backup directory (which must exist unless
	// create is true) for fn.
	withEngine := func(create bool, fn func(cmd *cobra.Command, e *backup.Engine, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				return usageError("--backup-dir DIR is required")
			}
			if !create {
				if _, err := os.Stat(dir); err != nil {
					return fmt.Errorf("no backup directory %s: %w", dir, err)
				}
			}
			e, err := backup.Open(dir, nil)
			if err != nil {
				return err
			}
			err = fn(cmd, e, args)
			if cerr := e.Close(); err == nil {
				err = cerr
			}
			return err
		}
	}

	cmd.AddCommand(backupCreateListCmds(withEngine)...)
	cmd.AddCommand(backupCheckCmds(withEngine)...)
	return cmd
}

// withEngineFunc wraps a subcommand body with the opening and closing of
// the backup engine.
type withEngineFunc func(create bool, fn func(cmd *cobra.Command, e *backup.Engine, args []string) error) func(*cobra.Command, []string) error

// backupCreateListCmds are create and list.
func backupCreateListCmds(withEngine withEngineFunc) []*cobra.Command {
	var dbDir string
	create := &cobra.Command{
		Use: "create", Short: "Back up the database --db DIR (it may be in use by no other process)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dbDir == "" {
				return usageError("--db DIR is required")
			}
			if _, err := os.Stat(dbDir); err != nil {
				return fmt.Errorf("no database %s: %w", dbDir, err)
			}
			return withEngine(true, func(cmd *cobra.Command, e *backup.Engine, _ []string) error {
				db, err := vigil.Open(dbDir, nil)
				if err != nil {
					return err
				}
				info, st, err := e.Create(db)
				if cerr := db.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "backup %d: seq %d, %d keys, digest %#016x; %d files, %d bytes; tables: %d copied (%d bytes), %d reused (%d bytes); private files: %d (%d bytes)\n",
					info.ID, info.Seq, info.Digest.Keys, info.Digest.CRC64, len(info.Files), info.Size(),
					st.SharedCopied, st.SharedBytesCopied, st.SharedReused, st.SharedBytesReused, st.PrivateFiles, st.PrivateBytes)
				return nil
			})(cmd, args)
		},
	}
	create.Flags().StringVar(&dbDir, "db", "", "database directory (required)")

	list := &cobra.Command{
		Use: "list", Short: "List the backups (exit status 1 if a meta file is damaged)", Args: cobra.NoArgs,
		RunE: withEngine(false, func(cmd *cobra.Command, e *backup.Engine, _ []string) error {
			infos, err := e.List()
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "id\tcreated\tseq\tkeys\tfiles\tbytes\tdigest\t")
			for _, in := range infos {
				fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%016x\t\n", in.ID, in.Created.Local().Format(time.DateTime), in.Seq, in.Digest.Keys, len(in.Files), in.Size(), in.Digest.CRC64)
			}
			if ferr := tw.Flush(); err == nil {
				err = ferr
			}
			return err
		}),
	}

	return []*cobra.Command{create, list}
}

// backupCheckCmds are verify, restore, delete and gc.
func backupCheckCmds(withEngine withEngineFunc) []*cobra.Command {
	verify := &cobra.Command{
		Use: "verify [ID...]", Short: "Re-read every file of the backups (default: all) against their checksums; exit status 1 on damage",
		RunE: withEngine(false, func(cmd *cobra.Command, e *backup.Engine, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			var errs []error
			if len(ids) == 0 {
				infos, err := e.List()
				if err != nil {
					errs = append(errs, err) // damaged meta files; verify the rest
				}
				for _, in := range infos {
					ids = append(ids, in.ID)
				}
			}
			for _, id := range ids {
				if err := e.Verify(id); err != nil {
					errs = append(errs, err)
					fmt.Fprintf(cmd.OutOrStdout(), "backup %d: DAMAGED\n", id)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "backup %d: OK\n", id)
			}
			return errors.Join(errs...)
		}),
	}

	var target string
	var restoreID uint64
	restore := &cobra.Command{
		Use: "restore", Short: "Restore backup --id (default: the newest) into --target DIR, which must not exist", Args: cobra.NoArgs,
		RunE: withEngine(false, func(cmd *cobra.Command, e *backup.Engine, _ []string) error {
			if target == "" {
				return usageError("--target DIR is required")
			}
			id := restoreID
			if id == 0 {
				infos, err := e.List()
				if len(infos) == 0 {
					if err == nil {
						err = fmt.Errorf("%w: no backups in %s", vigil.ErrNotFound, e.Dir())
					}
					return err
				}
				id = infos[len(infos)-1].ID
			}
			if err := e.Restore(id, target); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored backup %d into %s\n", id, target)
			return nil
		}),
	}
	restore.Flags().StringVar(&target, "target", "", "directory to restore into (required; must not exist)")
	restore.Flags().Uint64Var(&restoreID, "id", 0, "backup to restore (0 = the newest)")

	del := &cobra.Command{
		Use: "delete ID...", Short: "Delete backups and the tables no other backup holds", Args: cobra.MinimumNArgs(1),
		RunE: withEngine(false, func(cmd *cobra.Command, e *backup.Engine, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			for _, id := range ids {
				if err := e.Delete(id); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted backup %d\n", id)
			}
			return nil
		}),
	}

	gc := &cobra.Command{
		Use: "gc", Short: "Remove tables no backup holds and what interrupted operations left", Args: cobra.NoArgs,
		RunE: withEngine(false, func(cmd *cobra.Command, e *backup.Engine, _ []string) error {
			st, err := e.GC()
			fmt.Fprintf(cmd.OutOrStdout(), "removed %d files, %d bytes\n", st.Files, st.Bytes)
			return err
		}),
	}
	return []*cobra.Command{verify, restore, del, gc}
}

// parseIDs parses backup ids given as arguments.
func parseIDs(args []string) ([]uint64, error) {
	ids := make([]uint64, 0, len(args))
	for _, a := range args {
		id, err := strconv.ParseUint(a, 10, 64)
		if err != nil || id == 0 {
			return nil, usageError("%q is not a backup id", a)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
