package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/vigildb/vigil"
)

// newDBCmd is for people poking at a database: get, put, delete, scan,
// verify, metrics.
func newDBCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "db",
		Short: "Read, write, scan, verify a database (--db DIR)",
	}
	cmd.PersistentFlags().StringVar(&dir, "db", "", "database directory (required)")
	open := func(readOnly bool) (*vigil.DB, error) {
		if dir == "" {
			return nil, usageError("--db DIR is required")
		}
		// A scrub by hand reads at full speed (no scrubber runs: no interval).
		return vigil.Open(dir, &vigil.Options{ReadOnly: readOnly, ScrubBytesPerSec: -1})
	}
	withDB := func(readOnly bool, fn func(cmd *cobra.Command, db *vigil.DB, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			db, err := open(readOnly)
			if err != nil {
				return err
			}
			err = fn(cmd, db, args)
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			return err
		}
	}
	cmd.AddCommand(dbDataCmds(withDB)...)
	cmd.AddCommand(dbAdminCmds(withDB)...)
	cmd.AddCommand(healCmd(&dir), repairCmd(&dir))
	return cmd
}

// repairCmd is `vigil db repair --db DIR [--from-backup BACKUPDIR]
// [--json]`: the DB must not be open; see vigil.Repair. It prints what was
// lost (or the report as JSON) and exits 0 when the DB opens and verifies
// afterwards, even if data was lost: the report says what.
func repairCmd(dir *string) *cobra.Command {
	var from string
	var asJSON bool
	repair := &cobra.Command{
		Use:   "repair",
		Short: "Salvage a damaged DB: rebuild its MANIFEST, copy what verifies of damaged tables, keep what verifies of WALs; print what may be lost",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if *dir == "" {
				return usageError("--db DIR is required")
			}
			rep, err := vigil.Repair(*dir, &vigil.Options{HealFrom: from, ScrubBytesPerSec: -1})
			out := cmd.OutOrStdout()
			if rep != nil {
				if asJSON {
					enc := json.NewEncoder(out)
					enc.SetIndent("", "  ")
					if jerr := enc.Encode(rep); jerr != nil && err == nil {
						err = jerr
					}
				} else {
					printRepairReport(out, rep)
				}
			}
			return err
		},
	}
	repair.Flags().StringVar(&from, "from-backup", "", "backup directory (vigil backup): damaged or missing tables it holds are replaced by its verified copies first")
	repair.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return repair
}

// printRepairReport renders a repair report for people.
func printRepairReport(w io.Writer, rep *vigil.RepairReport) {
	if rep.Clean() {
		fmt.Fprintln(w, "nothing to repair: the MANIFEST, every table and every WAL verify")
		return
	}
	if rep.ManifestRebuilt {
		fmt.Fprintf(w, "MANIFEST rebuilt from the tables (%d records dropped): %s\n", rep.ManifestRecordsDropped, rep.ManifestDamage)
	}
	for _, t := range rep.Tables {
		switch {
		case t.Healed:
			fmt.Fprintf(w, "table %06d (L%d): healed from the backup (%s)\n", t.FileNum, t.Level, t.Problem)
		case t.Missing:
			fmt.Fprintf(w, "table %06d (L%d): %s, %d entries\n", t.FileNum, t.Level, t.Problem, t.EntriesBefore)
		default:
			fmt.Fprintf(w, "table %06d (L%d): %d of %d data blocks lost, %d entries saved into table %06d (range tombstones lost: %v): %s\n",
				t.FileNum, t.Level, t.LostBlocks, t.DataBlocks, t.EntriesSaved, t.NewFileNum, t.RangeDelsLost, t.Problem)
		}
	}
	for _, l := range rep.WALs {
		fmt.Fprintf(w, "WAL %06d: %d records (%d bytes) dropped: %s\n", l.LogNum, l.DroppedRecords, l.DroppedBytes, l.Damage)
	}
	if rep.WALRecordsSkipped > 0 {
		fmt.Fprintf(w, "WAL replay stepped over %d gaps or undecodable batches\n", rep.WALRecordsSkipped)
	}
	for _, r := range rep.Lost {
		fmt.Fprintf(w, "may be lost: %s\n", r)
	}
	for _, m := range rep.MovedToLost {
		fmt.Fprintf(w, "set aside: %s\n", m)
	}
	fmt.Fprintf(w, "entries saved %d, lost %d; compacted: %v\nOK: the DB opens and verifies\n", rep.EntriesSaved, rep.EntriesLost, rep.Compacted)
}

// healCmd is `vigil db heal --db DIR --from-backup BACKUPDIR`: the DB must
// not be open; see vigil.HealFromBackup.
func healCmd(dir *string) *cobra.Command {
	var from string
	heal := &cobra.Command{
		Use:   "heal",
		Short: "Replace every missing or damaged table by the identical copy a backup holds (the DB must not be open; exit status 1 if any is left)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if *dir == "" || from == "" {
				return usageError("--db DIR and --from-backup BACKUPDIR are required")
			}
			rep, err := vigil.HealFromBackup(*dir, from, nil)
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "restored missing tables: %v\nreplaced damaged tables: %v\n", rep.Missing, rep.Damaged)
			if err != nil {
				return err
			}
			if rep.Failed != nil {
				return rep.Failed
			}
			fmt.Fprintln(out, "OK")
			return nil
		},
	}
	heal.Flags().StringVar(&from, "from-backup", "", "backup directory (vigil backup) holding the tables")
	return heal
}

// withDBFunc wraps a subcommand body with the opening and closing of the DB.
type withDBFunc func(readOnly bool, fn func(cmd *cobra.Command, db *vigil.DB, args []string) error) func(*cobra.Command, []string) error

// dbDataCmds are the subcommands that read and write keys: get, put, del, scan.
func dbDataCmds(withDB withDBFunc) []*cobra.Command {
	get := &cobra.Command{
		Use: "get KEY", Short: "Print the value of KEY (exit status 1 if absent)", Args: cobra.ExactArgs(1),
		RunE: withDB(true, func(cmd *cobra.Command, db *vigil.DB, args []string) error {
			v, err := db.Get([]byte(args[0]))
			if errors.Is(err, vigil.ErrNotFound) {
				return fmt.Errorf("%q: not found", args[0])
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", v)
			return nil
		}),
	}
	var sync bool
	put := &cobra.Command{
		Use: "put KEY VALUE", Short: "Set KEY to VALUE", Args: cobra.ExactArgs(2),
		RunE: withDB(false, func(cmd *cobra.Command, db *vigil.DB, args []string) error {
			return db.Put([]byte(args[0]), []byte(args[1]), &vigil.WriteOptions{Sync: sync})
		}),
	}
	put.Flags().BoolVar(&sync, "sync", true, "fsync the WAL before returning")
	del := &cobra.Command{
		Use: "delete KEY [END]", Short: "Delete KEY, or every key in [KEY, END)", Args: cobra.RangeArgs(1, 2),
		RunE: withDB(false, func(cmd *cobra.Command, db *vigil.DB, args []string) error {
			if len(args) == 2 {
				return db.DeleteRange([]byte(args[0]), []byte(args[1]), vigil.Sync)
			}
			return db.Delete([]byte(args[0]), vigil.Sync)
		}),
	}
	var start, end string
	var limit int
	var reverse bool
	scan := &cobra.Command{
		Use: "scan", Short: "Print keys and values in [--start, --end)", Args: cobra.NoArgs,
		RunE: withDB(true, func(cmd *cobra.Command, db *vigil.DB, _ []string) error {
			o := &vigil.IterOptions{}
			if start != "" {
				o.LowerBound = []byte(start)
			}
			if end != "" {
				o.UpperBound = []byte(end)
			}
			it, err := db.NewIter(o)
			if err != nil {
				return err
			}
			n := 0
			ok := it.First()
			if reverse {
				ok = it.Last()
			}
			for ; ok && (limit <= 0 || n < limit); n++ {
				fmt.Fprintf(cmd.OutOrStdout(), "%s => %s\n", it.Key(), it.Value())
				if reverse {
					ok = it.Prev()
				} else {
					ok = it.Next()
				}
			}
			return it.Close()
		}),
	}
	scan.Flags().StringVar(&start, "start", "", "inclusive lower bound")
	scan.Flags().StringVar(&end, "end", "", "exclusive upper bound")
	scan.Flags().IntVar(&limit, "limit", 0, "stop after this many keys (0 = all)")
	scan.Flags().BoolVar(&reverse, "reverse", false, "scan from the end")
	return []*cobra.Command{get, put, del, scan}
}

// dbAdminCmds are the subcommands on the whole DB: verify, metrics,
// checkpoint, checksum.
func dbAdminCmds(withDB withDBFunc) []*cobra.Command {
	verify := &cobra.Command{
		Use: "verify", Short: "Check every checksum of every live file (exit status 1 on corruption)", Args: cobra.NoArgs,
		RunE: withDB(true, func(cmd *cobra.Command, db *vigil.DB, _ []string) error {
			if err := db.Verify(); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "OK")
			return nil
		}),
	}
	scrub := &cobra.Command{
		Use: "scrub", Short: "Re-read every live table from disk, as the background scrubber does, at full speed (exit status 1 on damage)", Args: cobra.NoArgs,
		RunE: withDB(true, func(cmd *cobra.Command, db *vigil.DB, _ []string) error {
			if err := db.Scrub(); err != nil {
				return err
			}
			m := db.Metrics()
			fmt.Fprintf(cmd.OutOrStdout(), "OK: %d tables, %d bytes\n", m.Scrub.Files, m.Scrub.Bytes)
			return nil
		}),
	}
	metrics := &cobra.Command{
		Use: "metrics", Short: "Print the LSM shape and counters", Args: cobra.NoArgs,
		RunE: withDB(true, func(cmd *cobra.Command, db *vigil.DB, _ []string) error {
			fmt.Fprint(cmd.OutOrStdout(), db.Metrics().String())
			return nil
		}),
	}
	var to string
	checkpoint := &cobra.Command{
		Use: "checkpoint", Short: "Write a consistent copy of the DB to --to DIR (tables hard-linked where possible)", Args: cobra.NoArgs,
		RunE: withDB(false, func(cmd *cobra.Command, db *vigil.DB, _ []string) error {
			if to == "" {
				return usageError("--to DIR is required")
			}
			if err := db.Checkpoint(to); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "checkpoint written to %s\n", to)
			return nil
		}),
	}
	checkpoint.Flags().StringVar(&to, "to", "", "directory of the checkpoint (must not exist)")
	var cstart, cend string
	checksumCmd := &cobra.Command{
		Use: "checksum", Short: "Print the range digest (CRC-64 of the live pairs, shape-independent) of [--start, --end)", Args: cobra.NoArgs,
		RunE: withDB(true, func(cmd *cobra.Command, db *vigil.DB, _ []string) error {
			var s, e []byte
			if cstart != "" {
				s = []byte(cstart)
			}
			if cend != "" {
				e = []byte(cend)
			}
			g, err := db.Digest(s, e)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "crc64=%016x keys=%d bytes=%d\n", g.CRC64, g.Keys, g.Bytes)
			return nil
		}),
	}
	checksumCmd.Flags().StringVar(&cstart, "start", "", "inclusive lower bound")
	checksumCmd.Flags().StringVar(&cend, "end", "", "exclusive upper bound")
	return []*cobra.Command{verify, scrub, metrics, checkpoint, checksumCmd}
}
