package tests

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/backup"
)

// healFixture is a DB in "db" on fs with tables a backup in "bk" holds,
// and the DB's range digest.
func healFixture(t *testing.T) (vfs.FS, uint64) {
	t.Helper()
	fs := vfs.NewMem()
	db, err := vigil.Open("db", &vigil.Options{FS: fs, DisableAutomaticCompactions: true})
	if err != nil {
		t.Fatal(err)
	}
	for table := range 3 {
		for i := range 400 {
			if err := db.Put(fmt.Appendf(nil, "t%d-%04d", table, i), fmt.Appendf(nil, "value %d %d", table, i), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	e, err := backup.Open("bk", &backup.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Create(db); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	sum, err := db.Checksum(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return fs, sum
}

func tablesOf(t *testing.T, fs vfs.FS) []string {
	t.Helper()
	names, _ := fs.List("db")
	var out []string
	for _, n := range names {
		if filepath.Ext(n) == ".sst" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func flipAt(t *testing.T, fs vfs.FS, name string, off int64) {
	t.Helper()
	f, err := fs.OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestHealFromBackup: one table damaged, another deleted; HealFromBackup
// restores both from the backup's identical copies, and the DB's digest is
// the one before the damage: nothing lost.
func TestHealFromBackup(t *testing.T) {
	fs, want := healFixture(t)
	tables := tablesOf(t, fs)
	if len(tables) != 3 {
		t.Fatalf("%d tables, want 3", len(tables))
	}
	flipAt(t, fs, fs.PathJoin("db", tables[0]), 200)
	if err := fs.Remove(fs.PathJoin("db", tables[2])); err != nil {
		t.Fatal(err)
	}
	if _, err := vigil.Open("db", &vigil.Options{FS: fs}); err == nil {
		t.Fatal("Open with a table missing succeeded")
	}
	rep, err := vigil.HealFromBackup("db", "bk", &vigil.Options{FS: fs})
	if err != nil || rep.Failed != nil || len(rep.Missing) != 1 || len(rep.Damaged) != 1 {
		t.Fatalf("HealFromBackup: %+v, %v", rep, err)
	}
	db, err := vigil.Open("db", &vigil.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Checksum(nil, nil); err != nil || got != want {
		t.Fatalf("digest after healing %#x, %v; before the damage %#x", got, err, want)
	}
}

// TestScrubberHeals: with Options.HealFrom, the background scrubber
// replaces a table damaged while the DB is open; a table the backup does
// not hold stays damaged and is reported.
func TestScrubberHeals(t *testing.T) {
	fs, want := healFixture(t)
	db, err := vigil.Open("db", &vigil.Options{FS: fs, HealFrom: "bk", ScrubInterval: 5 * time.Millisecond,
		ScrubBytesPerSec: -1, DisableAutomaticCompactions: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tables := tablesOf(t, fs)
	flipAt(t, fs, fs.PathJoin("db", tables[1]), 150)
	deadline := time.Now().Add(10 * time.Second)
	for db.Metrics().Scrub.Healed < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("not healed: %+v", db.Metrics().Scrub)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got, err := db.Checksum(nil, nil); err != nil || got != want {
		t.Fatalf("digest after healing %#x, %v; before %#x", got, err, want)
	}
	if err := db.Scrub(); err != nil {
		t.Fatalf("a pass after healing: %v", err)
	}
	// A table written after the backup has no copy there.
	if err := db.Put([]byte("zz"), []byte("new"), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	newest := tablesOf(t, fs)
	flipAt(t, fs, fs.PathJoin("db", newest[len(newest)-1]), 40)
	if err := db.Scrub(); !errors.Is(err, vigil.ErrCorruption) || !errors.Is(err, vigil.ErrNoBackupCopy) {
		t.Fatalf("damage without a backup copy: %v", err)
	}
}
