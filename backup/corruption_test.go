package backup

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/checksum"
)

// sweepCounts tallies a bit-flip sweep.
type sweepCounts struct{ tried, detected, noEffect, missed int }

func (c *sweepCounts) add(o sweepCounts) {
	c.tried += o.tried
	c.detected += o.detected
	c.noEffect += o.noEffect
	c.missed += o.missed
}

func (c sweepCounts) String() string {
	return fmt.Sprintf("%d flips tried, %d detected, %d no effect, %d missed", c.tried, c.detected, c.noEffect, c.missed)
}

// positions returns the byte offsets a sweep flips in a file of n bytes:
// every byte of small files; of larger ones, every stride-th byte plus the
// whole last tail bytes (footers and trailers live there).
func positions(n, stride, tail int) []int {
	var out []int
	for i := 0; i < n; i++ {
		if n <= 1024 || i%stride == 0 || i >= n-tail {
			out = append(out, i)
		}
	}
	return out
}

// sweepSetup makes a DB with three tables, a range deletion and a WAL tail,
// and one backup of it.
func sweepSetup(t *testing.T) (vfs.FS, *Engine, Info, model) {
	fs := vfs.NewMem()
	db := openDB(t, fs, "/db")
	w := newWriter(t, db, 11)
	for range 3 {
		w.puts(100, 300)
		w.flush()
	}
	w.deletes(10, 300)
	w.puts(30, 300)
	want := w.m.clone()
	e, err := Open("/backups", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	info, _, err := e.Create(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return fs, e, info, want
}

// TestBitFlipSweep flips one bit in bytes of every file of a backup, the
// meta file included: Verify and Restore must report corruption naming the
// file, and Restore must leave no target.
func TestBitFlipSweep(t *testing.T) {
	fs, e, info, want := sweepSetup(t)
	names := []string{e.metaPath(info.ID)}
	for _, f := range info.Files {
		names = append(names, e.filePath(info.ID, f))
	}
	stride := 1 // every byte
	if raceEnabled || testing.Short() {
		stride = 9
	}
	var total sweepCounts
	for _, name := range names {
		orig := readFile(t, fs, name)
		var c sweepCounts
		for _, pos := range positions(len(orig), stride, 128) {
			b := append([]byte(nil), orig...)
			b[pos] ^= 1 << (pos % 8)
			writeFile(t, fs, name, b)
			c.tried++
			verr := e.Verify(info.ID)
			rerr := e.Restore(info.ID, "/r")
			left := exists(fs, "/r") || exists(fs, "/r.tmp")
			ok := errors.Is(verr, vigil.ErrCorruption) && strings.Contains(verr.Error(), name) &&
				errors.Is(rerr, vigil.ErrCorruption) && strings.Contains(rerr.Error(), name) && !left
			switch {
			case ok:
				c.detected++
			case rerr == nil && diffModels(restoredContents(t, fs, "/r"), want) == "":
				c.noEffect++
			default:
				c.missed++
				if c.missed <= 3 {
					t.Errorf("%s: bit %d of byte %d: verify: %v; restore: %v; target left: %v", name, pos%8, pos, verr, rerr, left)
				}
			}
			if err := fs.RemoveAll("/r"); err != nil {
				t.Fatal(err)
			}
		}
		writeFile(t, fs, name, orig)
		t.Logf("%-72s %6d bytes: %s", name, len(orig), c)
		total.add(c)
	}
	t.Logf("total: %s", total)
	if err := e.Verify(info.ID); err != nil {
		t.Fatal(err)
	}
	if total.missed > 0 || total.noEffect > 0 {
		t.Fatalf("sweep: %s", total)
	}
}

// TestBitFlipSweepForgedMeta flips bits in the files of a backup and
// re-signs the meta file to match, as if the bits had flipped before
// Create checksummed the file (in memory, say). Verify then passes, so this
// tests the last line: Restore opens the restored DB and compares its
// digest and sequence number with the recorded ones. Every flip must give
// an error and no target, or a DB equal to the one backed up.
func TestBitFlipSweepForgedMeta(t *testing.T) {
	fs, e, info, want := sweepSetup(t)
	stride := 37
	if raceEnabled || testing.Short() {
		stride = 151
	}
	var total sweepCounts
	refused := 0
	for i, f := range info.Files {
		name := e.filePath(info.ID, f)
		orig := readFile(t, fs, name)
		var c sweepCounts
		for _, pos := range positions(len(orig), stride, 60) {
			if len(orig) <= 1024 && pos%3 != 0 && pos < len(orig)-60 {
				continue // small files: every third byte and the tail
			}
			b := append([]byte(nil), orig...)
			b[pos] ^= 1 << (pos % 8)
			writeFile(t, fs, name, b)
			forged := info
			forged.Files = append([]File(nil), info.Files...)
			forged.Files[i].Checksum = checksum.Sum64(fileChecksumType, b)
			if err := e.writeMeta(&forged); err != nil {
				t.Fatal(err)
			}
			c.tried++
			rerr := e.Restore(info.ID, "/r")
			switch {
			case rerr != nil && !exists(fs, "/r") && !exists(fs, "/r.tmp"):
				c.detected++
				if !errors.Is(rerr, vigil.ErrCorruption) {
					refused++
					t.Logf("%s: byte %d: refused, not as corruption: %v", name, pos, rerr)
				}
			case rerr == nil && diffModels(restoredContents(t, fs, "/r"), want) == "":
				c.noEffect++
			default:
				c.missed++
				if c.missed <= 3 {
					t.Errorf("%s: bit %d of byte %d: restore: %v; target exists: %v", name, pos%8, pos, rerr, exists(fs, "/r"))
				}
			}
			if err := fs.RemoveAll("/r"); err != nil {
				t.Fatal(err)
			}
		}
		writeFile(t, fs, name, orig)
		t.Logf("%-72s %6d bytes: %s", name, len(orig), c)
		total.add(c)
	}
	if err := e.writeMeta(&info); err != nil {
		t.Fatal(err)
	}
	t.Logf("total: %s (%d of the detected refused with an error other than corruption)", total, refused)
	if err := e.Verify(info.ID); err != nil {
		t.Fatal(err)
	}
	if total.missed > 0 {
		t.Fatalf("sweep: %s", total)
	}
}

// TestRestoreChecksWhileCopying damages a table after Restore's
// verification and before its copy: the copy's checksum catches it.
func TestRestoreChecksWhileCopying(t *testing.T) {
	fs, e, info, want := sweepSetup(t)
	var name string
	for _, f := range info.Files {
		if f.Shared {
			name = e.filePath(info.ID, f)
		}
	}
	orig := readFile(t, fs, name)
	e.afterVerify = func() {
		b := append([]byte(nil), orig...)
		b[len(b)/2] ^= 0x10
		writeFile(t, fs, name, b)
	}
	err := e.Restore(info.ID, "/r")
	if !errors.Is(err, vigil.ErrCorruption) || !strings.Contains(err.Error(), name) || exists(fs, "/r") || exists(fs, "/r.tmp") {
		t.Fatalf("restore: %v", err)
	}
	t.Log(err)
	e.afterVerify = nil
	writeFile(t, fs, name, orig)
	if err := e.Restore(info.ID, "/r"); err != nil {
		t.Fatal(err)
	}
	if d := diffModels(restoredContents(t, fs, "/r"), want); d != "" {
		t.Fatal(d)
	}
}

// TestRestoreChecksDigest: a meta file whose digest or sequence number
// does not match the files (a bug, or damage before the meta was signed)
// makes Restore fail with no target.
func TestRestoreChecksDigest(t *testing.T) {
	fs, e, info, _ := sweepSetup(t)
	for _, mod := range []func(*Info){
		func(in *Info) { in.Digest.CRC64 ^= 1 },
		func(in *Info) { in.Digest.Keys++ },
		func(in *Info) { in.Seq-- },
	} {
		forged := info
		mod(&forged)
		if err := e.writeMeta(&forged); err != nil {
			t.Fatal(err)
		}
		if err := e.Verify(info.ID); err != nil {
			t.Fatal(err)
		}
		err := e.Restore(info.ID, "/r")
		if !errors.Is(err, vigil.ErrCorruption) || !strings.Contains(err.Error(), "digest") || exists(fs, "/r") || exists(fs, "/r.tmp") {
			t.Fatalf("restore: %v", err)
		}
	}
	t.Log(e.Restore(info.ID, "/r"))
}

// TestMissingAndExtraFiles: a missing file is corruption naming it; List
// reports an unreadable meta file and still lists the others; GC keeps
// shared tables while a meta file is unreadable.
func TestMissingAndExtraFiles(t *testing.T) {
	fs := vfs.NewMem()
	db := openDB(t, fs, "/db")
	defer db.Close()
	w := newWriter(t, db, 5)
	e, err := Open("/backups", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	w.puts(100, 200)
	w.flush()
	info1, _, err := e.Create(db)
	if err != nil {
		t.Fatal(err)
	}
	w.puts(100, 200)
	w.flush()
	info2, _, err := e.Create(db)
	if err != nil {
		t.Fatal(err)
	}

	// A missing private file of backup 2.
	var cur string
	for _, f := range info2.Files {
		if f.Name == "CURRENT" {
			cur = e.filePath(2, f)
		}
	}
	data := readFile(t, fs, cur)
	if err := fs.Remove(cur); err != nil {
		t.Fatal(err)
	}
	if err := e.Verify(2); !errors.Is(err, vigil.ErrCorruption) || !strings.Contains(err.Error(), cur) {
		t.Fatalf("verify with %s missing: %v", cur, err)
	}
	writeFile(t, fs, cur, data)

	// An unreadable meta 1: listed as an error, backup 2 still listed; GC
	// keeps backup 1's tables.
	m1 := e.metaPath(1)
	meta1 := readFile(t, fs, m1)
	bad := append([]byte(nil), meta1...)
	bad[len(bad)/2] ^= 1
	writeFile(t, fs, m1, bad)
	list, err := e.List()
	if !errors.Is(err, vigil.ErrCorruption) || !strings.Contains(err.Error(), m1) || len(list) != 1 || list[0].ID != 2 {
		t.Fatalf("List with a bad meta 1: %+v, %v", list, err)
	}
	before := sharedNames(t, e)
	if err := fs.Remove(e.metaPath(2)); err != nil { // backup 2 gone: its own tables are unreferenced
		t.Fatal(err)
	}
	if _, err := e.GC(); !errors.Is(err, vigil.ErrCorruption) {
		t.Fatalf("GC with a bad meta: %v", err)
	}
	if got := sharedNames(t, e); strings.Join(got, " ") != strings.Join(before, " ") {
		t.Fatalf("GC with a bad meta removed tables: %v -> %v", before, got)
	}
	if exists(fs, e.path(privateDir, "2")) {
		t.Fatal("GC kept the private files of a backup without meta")
	}
	// A Create still works, and does not reuse id 1 or 2's files blindly.
	info3, _, err := e.Create(db)
	if err != nil {
		t.Fatal(err)
	}
	if info3.ID != 2 {
		t.Fatalf("backup id %d, want 2 (1 is taken by the unreadable meta)", info3.ID)
	}
	if err := e.Verify(info3.ID); err != nil {
		t.Fatal(err)
	}
	// Repair meta 1: both verify, and GC removes nothing they need.
	writeFile(t, fs, m1, meta1)
	if _, err := e.GC(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{info1.ID, info3.ID} {
		if err := e.Verify(id); err != nil {
			t.Fatal(err)
		}
	}
	list, err = e.List()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sharedNames(t, e), referenced(list); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("shared/ = %v, the backups list %v", got, want)
	}
}
