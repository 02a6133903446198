package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// runExit executes the CLI in-process as main does and returns the exit
// status, stdout and stderr.
func runExit(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := execute(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestFailLoudly: an unknown command, a missing or unexpected argument and a
// bad flag exit 2 with one line on stderr naming it; a command that ran and
// failed exits 1 with one line carrying exactly one "vigil: " prefix.
func TestFailLoudly(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nodb")
	for _, c := range []struct {
		args []string
		code int
		line string // the whole of stderr but its newline, or its start if it ends in "..."
	}{
		{[]string{"nosuch"}, 2, `vigil: unknown command "nosuch"`},
		{[]string{"db", "nosuch"}, 2, `vigil db: unknown command "nosuch"`},
		{[]string{"db", "--db", missing, "nosuch"}, 2, `vigil db: unknown command "nosuch"`},
		{[]string{"db", "gte"}, 2, `vigil db: unknown command "gte" (did you mean "get"?)`},
		{[]string{"backup", "nosuch"}, 2, `vigil backup: unknown command "nosuch"`},
		{[]string{"sst", "nosuch"}, 2, `vigil sst: unknown command "nosuch"`},
		{[]string{"wal", "nosuch"}, 2, `vigil wal: unknown command "nosuch"`},
		{[]string{"completion", "nosuch"}, 2, `vigil completion: unknown command "nosuch"`},
		{[]string{"help", "nosuch"}, 2, `vigil help: unknown help topic "nosuch"`},
		{[]string{"help", "db", "nosuch"}, 2, `vigil help: unknown help topic "db nosuch"`},
		{[]string{"db", "get"}, 2, `vigil db get: missing argument KEY; usage: vigil db get KEY [flags]`},
		{[]string{"db", "put", "--db", missing, "k"}, 2, `vigil db put: missing argument VALUE; usage: vigil db put KEY VALUE [flags]`},
		{[]string{"sst", "dump"}, 2, `vigil sst dump: missing argument FILE; usage: vigil sst dump FILE [flags]`},
		{[]string{"backup", "delete", "--backup-dir", missing}, 2, `vigil backup delete: missing argument ID; usage: vigil backup delete ID... [flags]`},
		{[]string{"version", "extra"}, 2, `vigil version: unexpected argument "extra"; usage: vigil version [flags]`},
		{[]string{"db", "delete", "--db", missing, "a", "b", "c"}, 2, `vigil db delete: unexpected argument "c"; usage: vigil db delete KEY [END] [flags]`},
		{[]string{"wal", "dump", "--wal_recovery_mode=9", missing}, 2, `vigil wal dump: --wal_recovery_mode: invalid argument: unknown WAL recovery mode 9...`},
		{[]string{"db", "checkpoint"}, 2, `vigil db checkpoint: --db DIR is required`},
		{[]string{"db", "get", "--bogus", "k"}, 2, `vigil db get: unknown flag: --bogus`},
		{[]string{"db", "get", "--db"}, 2, `vigil db get: flag needs an argument: --db`},
		{[]string{"--bogus"}, 2, `vigil: unknown flag: --bogus`},
		{[]string{"kvbench", "--bogus"}, 2, `vigil kvbench: unknown flag --bogus...`},
		{[]string{"kvbench", "--prefix_size=17"}, 2, `vigil kvbench: --prefix_size=17 is larger than the key size (16 bytes)`},
		{[]string{"kvbench", "--benchmarks=mergerandom"}, 1, `vigil: kvbench: mergerandom: --merge_operator must be specified (uint64add or put), as db_bench requires`},
		{[]string{"db", "get", "--db", missing, "k"}, 1, `vigil: invalid argument: DB ` + missing + ` does not exist...`},
		{[]string{"sst", "verify", missing}, 1, `vigil: open ` + missing + `: no such file or directory`},
	} {
		code, out, errOut := runExit(t, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d; stderr:\n%s", c.args, code, c.code, errOut)
		}
		if out != "" {
			t.Errorf("%v: stdout %q, want nothing", c.args, out)
		}
		if strings.Count(errOut, "\n") != 1 || !strings.HasSuffix(errOut, "\n") {
			t.Errorf("%v: stderr is not one line:\n%s", c.args, errOut)
		}
		if got, want := strings.TrimSuffix(errOut, "\n"), c.line; got != want &&
			!(strings.HasSuffix(want, "...") && strings.HasPrefix(got, strings.TrimSuffix(want, "..."))) {
			t.Errorf("%v: stderr %q, want %q", c.args, got, want)
		}
		if _, rest, _ := strings.Cut(errOut, ": "); strings.Contains(rest, "vigil: ") {
			t.Errorf("%v: a second \"vigil: \" prefix: %q", c.args, errOut)
		}
	}
}

// TestBareGroupPrintsHelpToStderr: a command group run without a
// subcommand, the root included, prints its help to stderr and exits 2 (as
// the go command does), while --help prints the same help to stdout and
// exits 0.
func TestBareGroupPrintsHelpToStderr(t *testing.T) {
	for _, group := range []string{"", "db", "backup", "sst", "wal", "completion"} {
		args := strings.Fields(group)
		code, out, errOut := runExit(t, args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "Available Commands:") {
			t.Errorf("vigil %s: exit %d, stdout %q, stderr:\n%s", group, code, out, errOut)
		}
		hcode, help, herr := runExit(t, append(args, "--help")...)
		if hcode != 0 || herr != "" || help != errOut {
			t.Errorf("vigil %s --help: exit %d, stderr %q; stdout differs from the bare group's stderr:\n%s\n---\n%s", group, hcode, herr, help, errOut)
		}
		if path := strings.Join(append([]string{"vigil"}, args...), " "); strings.Contains(help, path+" [flags]") {
			t.Errorf("vigil %s --help offers running the group without a command:\n%s", group, help)
		}
	}
	for _, args := range [][]string{{"help"}, {"help", "db"}, {"db", "get", "--help"}, {"version"}} {
		if code, out, errOut := runExit(t, args...); code != 0 || out == "" || errOut != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}
