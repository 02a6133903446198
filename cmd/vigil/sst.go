package main

import (
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/spf13/cobra"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/sst"
)

func newSSTCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sst",
		Short: "Inspect SST files: dump properties, layout and entries; verify checksums",
	}
	var showEntries bool
	var limit int
	dump := &cobra.Command{
		Use:   "dump FILE",
		Short: "Print a table's properties, block layout and index (and with --entries, every key/value)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := openSST(args[0])
			if err != nil {
				return err
			}
			defer r.Close()
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "file: %s\nchecksum type: %s\n\nproperties:\n%s\n", args[0], r.ChecksumType(), r.Properties())
			fmt.Fprintf(out, "layout:\n")
			for _, b := range r.Layout() {
				fmt.Fprintf(out, "  %-10s offset %10d size %8d", b.Kind, b.Offset, b.Size)
				if b.Kind == sst.BlockKindData {
					fmt.Fprintf(out, "  index key %s", b.IndexKey)
				}
				fmt.Fprintln(out)
			}
			if tombs := r.RangeDels(); len(tombs) > 0 {
				fmt.Fprintf(out, "\nrange tombstones:\n")
				for _, t := range tombs {
					fmt.Fprintf(out, "  [%s, %s) #%d\n", base.HexKey(t.Start), base.HexKey(t.End), t.Seq)
				}
			}
			if showEntries {
				fmt.Fprintf(out, "\nentries:\n")
				return dumpEntries(out, r.NewIter(nil, nil), limit)
			}
			return nil
		},
	}
	dump.Flags().BoolVar(&showEntries, "entries", false, "print every key/value")
	dump.Flags().IntVar(&limit, "limit", 0, "with --entries, stop after this many (0 = all)")
	verify := &cobra.Command{
		Use:   "verify FILE",
		Short: "Check every block, footer and whole-file checksum; exit status 1 on corruption",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := openSST(args[0])
			if err != nil {
				return err
			}
			defer r.Close()
			if err := r.Verify(); err != nil {
				return err
			}
			p := r.Properties()
			fmt.Fprintf(cmd.OutOrStdout(), "%s: OK (%s checksums; %d entries, %d range tombstones, %d data blocks)\n",
				args[0], r.ChecksumType(), p.NumEntries, p.NumRangeDels, p.NumDataBlocks)
			return nil
		},
	}
	cmd.AddCommand(dump, verify)
	return cmd
}

func openSST(path string) (*sst.Reader, error) {
	f, err := vfs.Default.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	r, err := sst.Open(f, path, st.Size(), sst.ReaderOptions{}) // closes f on failure
	if err != nil {
		return nil, err
	}
	return r, nil
}

// dumpEntries prints internal entries as "key#seq,KIND => value" in hex.
func dumpEntries(out io.Writer, it base.InternalIterator, limit int) error {
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		fmt.Fprintf(out, "  %s => %s\n", k, base.HexKey(it.Value()))
		n++
		if limit > 0 && n >= limit {
			break
		}
	}
	err := it.Error()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return err
}
