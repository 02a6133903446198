package vigil

import (
	"fmt"
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
