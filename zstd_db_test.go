package vigil

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

// TestZstdDB: a DB written with Snappy and reopened with zstd reads both
// kinds of table; after a compaction every table is zstd, smaller than the
// Snappy ones, and verifies.
func TestZstdDB(t *testing.T) {
	fs := vfs.NewMem()
	put := func(db *DB, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			v := fmt.Appendf(nil, "value %d of a row, with some repetition: %d %d %d", i, i%7, i%11, i%13)
			if err := db.Put(fmt.Appendf(nil, "user:%08d", i), v, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	size := func(db *DB) int64 {
		var n int64
		for _, l := range db.Metrics().Levels {
			n += int64(l.Size)
		}
		return n
	}
	db := openMem(t, fs, &Options{Compression: SnappyCompression})
	put(db, 0, 20000)
	snappySize := size(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openMem(t, fs, &Options{Compression: ZstdCompression, ZstdLevel: 5})
	defer db.Close()
	put(db, 20000, 40000)
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40000; i += 997 {
		if _, err := db.Get(fmt.Appendf(nil, "user:%08d", i)); err != nil {
			t.Fatalf("user:%08d: %v", i, err)
		}
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	if zstdSize := size(db); zstdSize >= 2*snappySize {
		t.Errorf("40,000 rows in zstd tables take %d bytes, 20,000 in snappy ones %d: want under twice", zstdSize, snappySize)
	}
	v := db.vs.current
	for _, files := range v.Levels {
		for _, f := range files {
			h, err := db.tableCache.get(f)
			if err != nil {
				t.Fatal(err)
			}
			c := h.reader.Properties().Compression
			h.release()
			if c != ZstdCompression {
				t.Errorf("table %06d after the compaction: %s, want zstd", f.FileNum, c)
			}
		}
	}
}

// TestLevelCompression: Options.Levels picks the compression of the tables
// each level receives: none for flushes into L0, zstd for compactions
// below; the last element covers the deeper levels; Validate names a bad
// element.
func TestLevelCompression(t *testing.T) {
	db := openMem(t, vfs.NewMem(), &Options{Levels: []LevelOptions{{Compression: NoCompression}, {Compression: ZstdCompression}}})
	defer db.Close()
	for i := range 5000 {
		if err := db.Put(fmt.Appendf(nil, "k%06d", i), fmt.Appendf(nil, "value %d %d", i, i%10), nil); err != nil {
			t.Fatal(err)
		}
	}
	compressions := func() map[int]Compression {
		out := map[int]Compression{}
		for level, files := range db.vs.current.Levels {
			for _, f := range files {
				h, err := db.tableCache.get(f)
				if err != nil {
					t.Fatal(err)
				}
				out[level] = h.reader.Properties().Compression
				h.release()
			}
		}
		return out
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := compressions(); len(got) != 1 || got[0] != NoCompression {
		t.Fatalf("after a flush: %v, want L0 uncompressed", got)
	}
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	for level, c := range compressions() {
		if level == 0 || c != ZstdCompression {
			t.Fatalf("after a compaction: level %d is %v, want zstd below L0", level, c)
		}
	}
	o := &Options{Levels: []LevelOptions{{Compression: 9}, {ZstdLevel: 30}}}
	o.EnsureDefaults()
	err := o.Validate()
	for _, want := range []string{"Levels[0].Compression = Compression(9)", "Levels[1].ZstdLevel = 30"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want it to mention %s", err, want)
		}
	}
	if c, z := (&Options{Compression: ZstdCompression, ZstdLevel: 7, Levels: []LevelOptions{{Compression: NoCompression}, {}}}).levelCompression(4); c != ZstdCompression || z != 7 {
		t.Errorf("level 4 past a zero last element: %v/%d, want the DB's zstd/7", c, z)
	}
}
