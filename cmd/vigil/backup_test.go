package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigildb/vigil"
)

// TestBackupCommands runs vigil backup create, list, verify and restore on
// a temporary directory, then damages one byte of a backed-up table:
// verify and restore must exit non-zero naming the file.
func TestBackupCommands(t *testing.T) {
	tmp := t.TempDir()
	dbDir, bdir := filepath.Join(tmp, "db"), filepath.Join(tmp, "backups")
	put := func(from, to int) {
		db, err := vigil.Open(dbDir, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := from; i < to; i++ {
			if err := db.Put([]byte(fmt.Sprintf("key%04d", i)), []byte(fmt.Sprintf("value %d", i)), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	put(0, 200)
	out, err := run(t, "backup", "create", "--db", dbDir, "--backup-dir", bdir)
	if err != nil || !strings.HasPrefix(out, "backup 1: ") {
		t.Fatalf("create: %q, %v", out, err)
	}
	put(200, 300)
	out, err = run(t, "backup", "create", "--db", dbDir, "--backup-dir", bdir)
	if err != nil || !strings.HasPrefix(out, "backup 2: ") || !strings.Contains(out, "reused") {
		t.Fatalf("create: %q, %v", out, err)
	}
	out, err = run(t, "backup", "list", "--backup-dir", bdir)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Fields(lines[1])[0] != "1" || strings.Fields(lines[2])[0] != "2" {
		t.Fatalf("list:\n%s", out)
	}
	if out, err = run(t, "backup", "verify", "--backup-dir", bdir); err != nil || out != "backup 1: OK\nbackup 2: OK\n" {
		t.Fatalf("verify: %q, %v", out, err)
	}

	// Restore the newest, and backup 1 by id.
	for _, c := range []struct {
		args []string
		keys int
	}{{nil, 300}, {[]string{"--id", "1"}, 200}} {
		target := filepath.Join(tmp, fmt.Sprintf("restored%d", c.keys))
		args := append([]string{"backup", "restore", "--backup-dir", bdir, "--target", target}, c.args...)
		if out, err := run(t, args...); err != nil {
			t.Fatalf("restore %v: %q, %v", c.args, out, err)
		}
		db, err := vigil.Open(target, &vigil.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 300; i++ {
			v, err := db.Get([]byte(fmt.Sprintf("key%04d", i)))
			if i < c.keys && (err != nil || string(v) != fmt.Sprintf("value %d", i)) || i >= c.keys && err == nil {
				t.Fatalf("restored %v: key %d = %q, %v", c.args, i, v, err)
			}
		}
		db.Close()
	}
	if _, err := run(t, "backup", "restore", "--backup-dir", bdir, "--target", filepath.Join(tmp, "restored300")); exitCode(err) == 0 {
		t.Fatal("restore over an existing directory succeeded")
	}

	// One damaged byte in a table that both backups hold.
	tables, err := filepath.Glob(filepath.Join(bdir, "shared", "*.sst"))
	if err != nil || len(tables) == 0 {
		t.Fatalf("no tables in shared/: %v", err)
	}
	name := tables[0]
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/3] ^= 0x01
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "backup", "verify", "--backup-dir", bdir)
	if exitCode(err) != 1 || !strings.Contains(err.Error(), name) || !strings.Contains(out, "DAMAGED") {
		t.Fatalf("verify of a damaged backup: exit %d, %q, %v", exitCode(err), out, err)
	}
	t.Logf("verify: %v", err)
	target := filepath.Join(tmp, "damaged")
	_, err = run(t, "backup", "restore", "--backup-dir", bdir, "--target", target)
	if exitCode(err) != 1 || !strings.Contains(err.Error(), name) {
		t.Fatalf("restore of a damaged backup: exit %d, %v", exitCode(err), err)
	}
	if _, serr := os.Stat(target); serr == nil {
		t.Fatal("restore of a damaged backup left a target")
	}

	// Usage errors exit 2.
	for _, args := range [][]string{
		{"backup", "list"},
		{"backup", "create", "--backup-dir", bdir},
		{"backup", "verify", "--backup-dir", bdir, "x"},
		{"backup", "restore", "--backup-dir", bdir},
	} {
		if _, err := run(t, args...); exitCode(err) != 2 {
			t.Errorf("%v: exit %d (%v), want 2", args, exitCode(err), err)
		}
	}
	// Delete and gc.
	if out, err := run(t, "backup", "delete", "--backup-dir", bdir, "1"); err != nil {
		t.Fatalf("delete: %q, %v", out, err)
	}
	if out, err := run(t, "backup", "gc", "--backup-dir", bdir); err != nil || !strings.HasPrefix(out, "removed ") {
		t.Fatalf("gc: %q, %v", out, err)
	}
}

// TestDBHealCommand: a table damaged after a backup comes back from it
// through vigil db heal; without --from-backup the command is a usage
// error; a table the backup lacks leaves exit status 1.
func TestDBHealCommand(t *testing.T) {
	tmp := t.TempDir()
	dbDir, bdir := filepath.Join(tmp, "db"), filepath.Join(tmp, "backups")
	db, err := vigil.Open(dbDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if err := db.Put(fmt.Appendf(nil, "key%04d", i), fmt.Appendf(nil, "value %d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "backup", "create", "--db", dbDir, "--backup-dir", bdir); err != nil {
		t.Fatal(err)
	}
	ssts, _ := filepath.Glob(filepath.Join(dbDir, "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no table")
	}
	b, _ := os.ReadFile(ssts[0])
	b[100] ^= 0x20
	if err := os.WriteFile(ssts[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "db", "scrub", "--db", dbDir); exitCode(err) != 1 {
		t.Fatalf("scrub of the damaged DB: %v", err)
	}
	if _, err := run(t, "db", "heal", "--db", dbDir); exitCode(err) != 2 {
		t.Fatalf("heal without --from-backup: %v, want a usage error", err)
	}
	out, err := run(t, "db", "heal", "--db", dbDir, "--from-backup", bdir)
	if err != nil || !strings.Contains(out, "replaced damaged tables: [") || !strings.Contains(out, "OK") {
		t.Fatalf("heal: %q, %v", out, err)
	}
	if out, err := run(t, "db", "scrub", "--db", dbDir); err != nil || !strings.Contains(out, "OK") {
		t.Fatalf("scrub after healing: %q, %v", out, err)
	}
}
