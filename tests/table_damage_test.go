package tests

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/sst"
)

// The tests here check the SST rows of the README's table "What corruption
// leads to" as written: a flipped bit in any block of a table, and a table
// replaced (by another DB's, another number's, an older state's, of the
// same size), truncated or missing.

// damageOptions: one table with data, filter, range-del, index,
// properties, metaindex blocks and a footer; nothing compacts behind the
// test's back; no compression, so that tables of equal shapes have equal
// sizes.
func damageOptions(fs vfs.FS) *vigil.Options {
	return &vigil.Options{FS: fs, DisableAutomaticCompactions: true, BlockSize: 1024, BloomBitsPerKey: 10,
		Compression: vigil.NoCompression, BlockCacheSize: -1}
}

// writeDamageTable writes keys k0000..k0499 (values of one length, tagged
// with tag) and a range deletion over k0400..k0410 in dir, flushed into one
// table, and closes the DB. It returns that table's path.
func writeDamageTable(t *testing.T, fs vfs.FS, dir, tag string) string {
	t.Helper()
	db, err := vigil.Open(dir, damageOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	before := tablesIn(t, fs, dir)
	fillDamage(t, db, tag)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	after := tablesIn(t, fs, dir)
	var added []string
	for _, n := range after {
		if !strings.Contains(strings.Join(before, " "), n) {
			added = append(added, n)
		}
	}
	if len(added) != 1 {
		t.Fatalf("%s: the flush made tables %v, want one", dir, added)
	}
	return fs.PathJoin(dir, added[0])
}

func fillDamage(t *testing.T, db *vigil.DB, tag string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if err := db.Put([]byte(fmt.Sprintf("k%04d", i)), []byte(fmt.Sprintf("%-40s", tag)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.DeleteRange([]byte("k0400"), []byte("k0410"), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
}

func tablesIn(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	var out []string
	for _, n := range mustList(t, fs, dir) {
		if strings.HasSuffix(n, ".sst") {
			out = append(out, n)
		}
	}
	return out
}

// readsFail opens dir and checks that a Get of key, a full scan and a
// compaction each fail with ErrCorruption whose text holds every string of
// want, and that Verify reports it.
func readsFail(t *testing.T, fs vfs.FS, dir, key string, want ...string) {
	t.Helper()
	db, err := vigil.Open(dir, damageOptions(fs))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, vigil.ErrCorruption) {
			t.Fatalf("%s = %v, want ErrCorruption", what, err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s = %v, which does not name %q", what, err, w)
			}
		}
	}
	_, err = db.Get([]byte(key))
	check("Get "+key, err)
	it, err := db.NewIter(nil)
	if err == nil {
		for ok := it.First(); ok; ok = it.Next() {
		}
		err = it.Close()
	}
	check("a scan", err)
	check("Verify", db.Verify())
	check("Compact", db.Compact(nil, nil))
}

// A flipped bit in any block of a table (or its footer): every read that
// needs the block fails with ErrCorruption, and so do Verify and a
// compaction; a data block's damage leaves the other blocks readable.
func TestTableBitFlipRows(t *testing.T) {
	kinds := []sst.BlockKind{sst.BlockKindData, sst.BlockKindFilter, sst.BlockKindRangeDel, sst.BlockKindProperties,
		sst.BlockKindIndex, sst.BlockKindMetaIndex, sst.BlockKindFooter}
	for _, kind := range kinds {
		t.Run(kind.String(), func(t *testing.T) {
			fs := vfs.NewMem()
			table := writeDamageTable(t, fs, "db", "v")
			flipInTable(t, fs, table, kind, 0)
			readsFail(t, fs, "db", "k0000", fs.PathBase(table))
			if kind != sst.BlockKindData {
				return
			}
			db, err := vigil.Open("db", damageOptions(fs))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if v, err := db.Get([]byte("k0499")); err != nil || strings.TrimSpace(string(v)) != "v" {
				t.Fatalf("Get of a key in an intact block = %q, %v", v, err)
			}
		})
	}
}

// A table replaced by another of the same size, truncated, or missing.
func TestTableReplacedRows(t *testing.T) {
	// Each case builds a table and the one to put in its place; their
	// sizes can differ by a byte (the whole-file checksum is stored as a
	// varint), so a case is built again until they match.
	sameSize := func(t *testing.T, build func(fs vfs.FS) (src, dst string)) vfs.FS {
		t.Helper()
		for try := 0; try < 50; try++ {
			fs := vfs.NewMem()
			src, dst := build(fs)
			if a, b := readAll(t, fs, src), readAll(t, fs, dst); len(a) == len(b) {
				writeAll(t, fs, dst, a)
				return fs
			}
		}
		t.Fatal("no two tables of one size in 50 tries")
		return nil
	}
	t.Run("another DB's", func(t *testing.T) {
		fs := sameSize(t, func(fs vfs.FS) (string, string) {
			a := writeDamageTable(t, fs, "a", "a")
			c := writeDamageTable(t, fs, "c", "c")
			if fs.PathBase(a) != fs.PathBase(c) {
				t.Fatalf("tables %s and %s: want one number", a, c)
			}
			return c, a
		})
		readsFail(t, fs, "a", "k0000", "is not the table the MANIFEST names", "of DB", "session")
	})
	t.Run("another number's", func(t *testing.T) {
		// The older table put in place of the newer, which every read
		// meets first.
		var second string
		fs := sameSize(t, func(fs vfs.FS) (string, string) {
			first := writeDamageTable(t, fs, "db", "v")
			second = writeDamageTable(t, fs, "db", "v")
			return first, second
		})
		readsFail(t, fs, "db", "k0000", "is not the table the MANIFEST names", fs.PathBase(second))
	})
	t.Run("an older state's", func(t *testing.T) {
		// Two copies of one DB (one restored from an old backup, say)
		// that went on to write a table of the same number and size.
		fs := sameSize(t, func(fs vfs.FS) (string, string) {
			writeDamageTable(t, fs, "db", "v")
			copyDir(t, fs, "db", "old")
			mine := writeDamageTable(t, fs, "db", "new")
			theirs := writeDamageTable(t, fs, "old", "new")
			if fs.PathBase(mine) != fs.PathBase(theirs) {
				t.Fatalf("tables %s and %s: want one number", mine, theirs)
			}
			return theirs, mine
		})
		readsFail(t, fs, "db", "k0000", "is not the table the MANIFEST names", "session")
	})
	t.Run("truncated", func(t *testing.T) {
		fs := vfs.NewMem()
		table := writeDamageTable(t, fs, "db", "v")
		b := readAll(t, fs, table)
		writeAll(t, fs, table, b[:len(b)-1])
		readsFail(t, fs, "db", "k0000", fs.PathBase(table), "bytes, the MANIFEST says")
	})
	t.Run("missing", func(t *testing.T) {
		fs := vfs.NewMem()
		table := writeDamageTable(t, fs, "db", "v")
		if err := fs.Remove(table); err != nil {
			t.Fatal(err)
		}
		if db, err := vigil.Open("db", damageOptions(fs)); !errors.Is(err, vigil.ErrCorruption) {
			if err == nil {
				db.Close()
			}
			t.Fatalf("Open with a live table missing = %v, want ErrCorruption", err)
		}
	})
}

// An ingested table keeps working through reopens, and one put in its
// place (another external table of the same size) fails like any other.
func TestIngestedTableIdentity(t *testing.T) {
	fs := vfs.NewMem()
	write := func(path, tag string) {
		w, err := vigil.NewExternalWriter(fs, path, &vigil.ExternalWriterOptions{Compression: vigil.NoCompression})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 100; i++ {
			if err := w.Set([]byte(fmt.Sprintf("x%04d", i)), []byte(tag)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	write("one.sst", "1")
	for try := 0; ; try++ {
		write("two.sst", "2")
		if len(readAll(t, fs, "two.sst")) == len(readAll(t, fs, "one.sst")) {
			break
		}
		if try == 50 {
			t.Fatal("no two tables of one size in 50 tries")
		}
	}
	db, err := vigil.Open("db", damageOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Ingest([]string{"one.sst"}); err != nil {
		t.Fatal(err)
	}
	tables := tablesIn(t, fs, "db")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = vigil.Open("db", damageOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := db.Get([]byte("x0007")); err != nil || string(v) != "1" {
		t.Fatalf("Get of an ingested key after reopen = %q, %v", v, err)
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if len(tables) != 1 {
		t.Fatalf("tables after one ingestion: %v", tables)
	}
	replaceFile(t, fs, "two.sst", fs.PathJoin("db", tables[0]))
	readsFail(t, fs, "db", "x0007", "is not the table the MANIFEST names", "external table")
}

// replaceFile copies src over dst, which must have the same size.
func replaceFile(t *testing.T, fs vfs.FS, src, dst string) {
	t.Helper()
	b, old := readAll(t, fs, src), readAll(t, fs, dst)
	if len(b) != len(old) {
		t.Fatalf("%s is %d bytes, %s %d: the test needs equal sizes", src, len(b), dst, len(old))
	}
	writeAll(t, fs, dst, b)
}

// copyDir copies the files of dir into a new directory to.
//
// The DB may be open (a crash image): a file listed and then gone before
// its copy was deleted by the DB as obsolete (a flushed WAL, a compacted
// table), so the image is what a crash at that moment would leave, and
// the file is skipped.
func copyDir(t *testing.T, fs vfs.FS, dir, to string) {
	t.Helper()
	if err := fs.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range mustList(t, fs, dir) {
		if n == "LOCK" {
			continue
		}
		if err := vfs.Copy(fs, fs.PathJoin(dir, n), fs.PathJoin(to, n)); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // vfs.Copy opens the source before it creates the copy
			}
			t.Fatal(err)
		}
	}
}
