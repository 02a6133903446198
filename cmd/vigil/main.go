// Command vigil is Vigil's command-line tool: kvbench (a db_bench-compatible
// benchmark), stress (a crash/fault/corruption stress runner), and tools to
// inspect SST files, WALs and databases.
package main

import (
	"errors"
	"fmt"
	"io"
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
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: 2, err: err}
	})
	root.AddCommand(newVersionCmd(), newKVBenchCmd(), newSSTCmd(), newWALCmd(), newDBCmd(), newStressCmd(), newBackupCmd())
	failLoudly(root)
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

// execute runs the CLI on args, writing to stdout and stderr, and returns
// the exit status: 0 on success, 2 for a usage error (unknown command, bad
// or missing argument or flag), 1 when the command ran and failed. An error
// is printed as one message with one prefix.
func execute(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(normalizeArgs(args))
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	if !errors.Is(err, errHelpShown) {
		fmt.Fprintln(stderr, errorMessage(cmd, err))
	}
	return exitStatus(err)
}

// exitStatus is the exit status for err: an exitError's code, else 1.
func exitStatus(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

// errorMessage is err as printed, with one prefix: a usage error names the
// command it is about ("vigil db get: missing argument KEY"), other errors
// begin "vigil: ". Library errors already begin "vigil: " (the text of
// vigil.ErrInvalidArgument, ErrCorruption, ...), so that is not repeated.
func errorMessage(cmd *cobra.Command, err error) string {
	prefix := "vigil"
	if exitStatus(err) == 2 {
		prefix = cmd.CommandPath()
	}
	return prefix + ": " + withoutPrefix(err.Error())
}

// withoutPrefix returns msg without the "vigil: " that library error texts
// begin with, for a message that puts its own prefix or context first.
func withoutPrefix(msg string) string {
	for strings.HasPrefix(msg, "vigil: ") {
		msg = strings.TrimPrefix(msg, "vigil: ")
	}
	return msg
}

func main() {
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}
