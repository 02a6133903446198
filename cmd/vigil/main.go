// Command vigil is Vigil's command-line tool: kvbench (a db_bench-compatible
// benchmark), stress (a crash/fault/corruption stress runner), and tools to
// inspect SST files, WALs and databases.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// exitError carries an exit status through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks bad flags or arguments: exit status 2, like db_bench.
func usageError(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "vigil",
		Short: "Vigil: an embedded ordered key-value store with no silent corruption",
		Long: `vigil is the command-line tool of Vigil, an embedded LSM key-value store for Go
whose every byte, in memory and on disk, is guarded by a checksum you choose.

  vigil kvbench   db_bench-compatible benchmarks (run with no flags for a short default suite)
  vigil stress    crash, fault and corruption stress runner
  vigil sst       dump or verify an SST file
  vigil wal       dump a WAL or MANIFEST
  vigil db        get/put/delete/scan/verify/metrics/checkpoint/checksum on a database
  vigil backup    incremental backups: create, list, verify, restore, delete, gc
  vigil version   print the version`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: 2, err: fmt.Errorf("%w\nRun '%s --help' for usage", err, c.CommandPath())}
	})
	root.AddCommand(newVersionCmd(), newKVBenchCmd(), newSSTCmd(), newWALCmd(), newDBCmd(), newStressCmd(), newBackupCmd())
	return root
}

// normalizeArgs accepts gflags-style single-dash long flags ("-num=10",
// "-benchmarks fillseq"), as db_bench users type them, by turning them into
// "--num=10". Single-letter flags ("-h") are left alone.
func normalizeArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		if a == "--" {
			out = append(out, args[len(out):]...)
			break
		}
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") {
			name := a[1:]
			if i := strings.IndexByte(name, '='); i >= 0 {
				name = name[:i]
			}
			if len(name) > 1 {
				a = "-" + a
			}
		}
		out = append(out, a)
	}
	return out
}

func main() {
	root := newRootCmd()
	root.SetArgs(normalizeArgs(os.Args[1:]))
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "vigil:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}
