package vigil

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/sst"
)

// damagedTableDB writes 200 keys into one table of an in-memory DB, closes
// it and flips one byte inside the first data block's first value (values
// are long and uncompressed, so the block still decodes). It returns the FS,
// the damaged key and its true value.
func damagedTableDB(t *testing.T) (vfs.FS, []byte, []byte) {
	t.Helper()
	fs := vfs.NewMem()
	opts := &Options{FS: fs, Compression: NoCompression}
	db, err := Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	val := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 200) }
	for i := 0; i < 200; i++ {
		if err := db.Put([]byte(fmt.Sprintf("key%03d", i)), val(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ls, err := fs.List("db")
	if err != nil {
		t.Fatal(err)
	}
	var name string
	for _, n := range ls {
		if strings.HasSuffix(n, ".sst") {
			name = fs.PathJoin("db", n)
		}
	}
	if name == "" {
		t.Fatal("no table written")
	}
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	r, err := sst.Open(f, name, st.Size(), sst.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var off int64 = -1
	for _, b := range r.Layout() {
		if b.Kind == sst.BlockKindData {
			off = int64(b.Offset) + 100 // inside key000's 200-byte value
			break
		}
	}
	r.Close()
	if off < 0 {
		t.Fatal("no data block")
	}
	rw, err := fs.OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := rw.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	if b[0] != 'a' {
		t.Fatalf("byte at %d is %q, not inside key000's value", off, b[0])
	}
	b[0] ^= 0x01
	if _, err := rw.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	return fs, []byte("key000"), val(0)
}

// TestSkipReadChecksums: by default a damaged data block is ErrCorruption
// for Get and iterators; with SkipReadChecksums they return the damaged
// bytes, and every verifying path (Checksum, Verify, compaction) still
// reports the damage, even after an unverified read cached the block.
func TestSkipReadChecksums(t *testing.T) {
	fs, key, want := damagedTableDB(t)

	db, err := Open("db", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Get(key); !errors.Is(err, ErrCorruption) {
		t.Fatalf("verified Get of a damaged block: %v, want ErrCorruption", err)
	}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	if it.First() || !errors.Is(it.Error(), ErrCorruption) {
		t.Fatalf("verified iterator over a damaged block: valid, err %v; want ErrCorruption", it.Error())
	}
	it.Close()
	if err := db.Close(); err != nil && !errors.Is(err, ErrCorruption) {
		t.Fatal(err)
	}

	db, err = Open("db", &Options{FS: fs, SkipReadChecksums: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.Get(key)
	if err != nil {
		t.Fatalf("unverified Get: %v", err)
	}
	if bytes.Equal(got, want) || len(got) != len(want) {
		t.Fatalf("unverified Get returned %q; want the damaged 200-byte value", got)
	}
	it, err = db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if err := it.Close(); err != nil || n != 200 {
		t.Fatalf("unverified scan: %d keys, err %v; want 200, nil", n, err)
	}
	// The block is now in the cache, unverified: a range checksum must not
	// use it.
	if _, err := db.Checksum(nil, nil); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Checksum after an unverified read: %v, want ErrCorruption", err)
	}
	if err := db.Verify(); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Verify: %v, want ErrCorruption", err)
	}
	if err := db.Compact(nil, nil); !errors.Is(err, ErrCorruption) {
		t.Fatalf("compaction of the damaged table: %v, want ErrCorruption", err)
	}
}

// TestSkipReadChecksumsWithoutCache: the same without a block cache, where
// every read goes to the file.
func TestSkipReadChecksumsWithoutCache(t *testing.T) {
	fs, key, want := damagedTableDB(t)
	for _, skip := range []bool{false, true} {
		db, err := Open("db", &Options{FS: fs, BlockCacheSize: -1, SkipReadChecksums: skip})
		if err != nil {
			t.Fatal(err)
		}
		got, err := db.Get(key)
		switch {
		case !skip && !errors.Is(err, ErrCorruption):
			t.Errorf("verified Get without a cache: %q, %v; want ErrCorruption", got, err)
		case skip && (err != nil || bytes.Equal(got, want)):
			t.Errorf("unverified Get without a cache: %q, %v; want the damaged value", got, err)
		}
		if err := db.Close(); err != nil && !errors.Is(err, ErrCorruption) {
			t.Fatal(err)
		}
	}
}
