package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/spf13/cobra"
	"github.com/vigildb/vigil/wal"
)

func newWALCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "wal",
		Short: "Inspect WAL and MANIFEST record logs",
	}
	var mode int
	dump := &cobra.Command{
		Use:   "dump FILE",
		Short: "Print a record log's header and every record's size (exit status 1 on corruption)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := wal.RecoveryModeFromRocksDB(mode)
			if err != nil {
				return usageError("--wal_recovery_mode: %s", withoutPrefix(err.Error()))
			}
			f, err := vfs.Default.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			r, err := wal.NewReader(f, args[0], m)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "file: %s\nlog number: %d\nchecksum type: %s\nrecovery mode: %s\n", args[0], r.LogNumber(), r.ChecksumType(), m)
			for i := 0; ; i++ {
				rec, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "record %d: %d bytes, ends at offset %d\n", i, len(rec), r.Offset())
			}
			st := r.Stats()
			fmt.Fprintf(out, "%d records, %d bytes; dropped %d records, %d bytes; %d unwritten bytes (zero reserve) after the end\n",
				st.Records, st.Bytes, st.DroppedRecords, st.DroppedBytes, st.UnwrittenBytes)
			if err := r.Stopped(); err != nil {
				return fmt.Errorf("%w; the log ends there", err)
			}
			return nil
		},
	}
	dump.Flags().IntVar(&mode, "wal_recovery_mode", int(wal.AbsoluteConsistency), "0 tolerate corrupted tail, 1 absolute consistency, 2 point in time, 3 skip corrupted")
	cmd.AddCommand(dump)
	return cmd
}
