package vigil_test

import (
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/vigildb/vigil"
)

// The README's API in ten lines, runnable.
func Example() {
	dir, err := os.MkdirTemp("", "vigil-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := vigil.Open(dir, nil) // nil options = defaults
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Put([]byte("hello"), []byte("world"), nil); err != nil {
		log.Fatal(err)
	}
	v, err := db.Get([]byte("hello"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("hello=%s\n", v)

	b := db.NewBatch()
	b.Put([]byte("a"), []byte("1"))
	b.Put([]byte("b"), []byte("2"))
	b.Put([]byte("c"), []byte("3"))
	b.Delete([]byte("hello"))
	b.DeleteRange([]byte("b"), []byte("c"))         // deletes b
	if err := db.Apply(b, vigil.Sync); err != nil { // atomic; waits for the WAL fsync
		log.Fatal(err)
	}
	if _, err := db.Get([]byte("hello")); errors.Is(err, vigil.ErrNotFound) {
		fmt.Println("hello deleted")
	}

	it, err := db.NewIter(&vigil.IterOptions{LowerBound: []byte("a"), UpperBound: []byte("z")})
	if err != nil {
		log.Fatal(err)
	}
	for it.First(); it.Valid(); it.Next() {
		fmt.Printf("%s=%s\n", it.Key(), it.Value())
	}
	if err := it.Close(); err != nil {
		log.Fatal(err)
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// hello=world
	// hello deleted
	// a=1
	// c=3
}

// A snapshot reads the DB as it was when it was taken.
func ExampleDB_NewSnapshot() {
	dir, _ := os.MkdirTemp("", "vigil-example")
	defer os.RemoveAll(dir)
	db, err := vigil.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	_ = db.Put([]byte("k"), []byte("old"), nil)
	snap := db.NewSnapshot()
	defer snap.Close()
	_ = db.Put([]byte("k"), []byte("new"), nil)
	v1, _ := snap.Get([]byte("k"))
	v2, _ := db.Get([]byte("k"))
	fmt.Printf("snapshot: %s, now: %s\n", v1, v2)
	// Output: snapshot: old, now: new
}

// Corruption is an error to test with errors.Is, never a silent loss.
func ExampleOptions_paranoid() {
	dir, _ := os.MkdirTemp("", "vigil-example")
	defer os.RemoveAll(dir)
	db, err := vigil.Open(dir, &vigil.Options{
		ChecksumType:                  vigil.ChecksumXXH3,
		ParanoidMemoryChecks:          true, // memtable reads verify key order
		MemtableProtectionBytesPerKey: 8,    // and a per-entry checksum
	})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	_ = db.Put([]byte("k"), []byte("v"), vigil.Sync)
	if err := db.Verify(); errors.Is(err, vigil.ErrCorruption) {
		fmt.Println("corrupt:", err)
	} else {
		fmt.Println("verified")
	}
	// Output: verified
}

// A DB that keeps L0 uncompressed (flushes stay cheap) and compresses the
// levels below with zstd, scrubbing its tables in the background and
// healing a damaged one from its backup directory.
func ExampleOptions_zstd() {
	dir, _ := os.MkdirTemp("", "vigil-example")
	defer os.RemoveAll(dir)
	db, err := vigil.Open(dir, &vigil.Options{
		Compression: vigil.ZstdCompression,
		ZstdLevel:   3,
		Levels:      []vigil.LevelOptions{{Compression: vigil.NoCompression}}, // L0; the rest: zstd
		// ScrubInterval: 24 * time.Hour, HealFrom: "/backups/mydb",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	for i := range 1000 {
		_ = db.Put(fmt.Appendf(nil, "user:%04d", i), fmt.Appendf(nil, "profile of user %d", i), nil)
	}
	if err := db.Compact(nil, nil); err != nil { // flush, then compact into L1: zstd tables
		log.Fatal(err)
	}
	v, _ := db.Get([]byte("user:0042"))
	fmt.Printf("%s; scrubbed clean: %v\n", v, db.Scrub() == nil)
	// Output: profile of user 42; scrubbed clean: true
}
