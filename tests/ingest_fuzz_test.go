package tests

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/sst"
)

// externalTableBytes writes an external table of n keys (every third one a
// Delete) and, with tombs, two range deletions, and returns its bytes.
func externalTableBytes(t testing.TB, o vigil.ExternalWriterOptions, n int, tombs bool) []byte {
	t.Helper()
	fs := vfs.NewMem()
	w, err := vigil.NewExternalWriter(fs, "t.sst", &o)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		k := []byte(fmt.Sprintf("k%05d", 10+i*7))
		if i%3 == 2 {
			err = w.Delete(k)
		} else {
			err = w.Set(k, []byte(fmt.Sprintf("fuzz-%d", i)))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if tombs {
		if err := w.DeleteRange([]byte("k00040"), []byte("k00090")); err != nil {
			t.Fatal(err)
		}
		if err := w.DeleteRange([]byte("k00000"), []byte("k00012")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Open("t.sst")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

// ingestFuzzTables are the valid tables the seeds start from.
func ingestFuzzTables(t testing.TB) [][]byte {
	return [][]byte{
		externalTableBytes(t, vigil.ExternalWriterOptions{BlockSize: 128}, 30, true),
		externalTableBytes(t, vigil.ExternalWriterOptions{ChecksumType: vigil.ChecksumCRC32c, Compression: vigil.NoCompression, BlockSize: 64}, 20, false),
		externalTableBytes(t, vigil.ExternalWriterOptions{ChecksumType: vigil.ChecksumCRC64, BloomBitsPerKey: -1}, 0, true),
	}
}

// ingestOpenTarget opens the DB the damaged files are ingested into: tables
// and a memtable overlapping the files' keys.
func ingestOpenTarget(t testing.TB, fs vfs.FS) *vigil.DB {
	t.Helper()
	// Small buffers: the fuzzer opens one DB per input.
	db, err := vigil.Open("db", &vigil.Options{FS: fs, DisableAutomaticCompactions: true,
		WriteBufferSize: 256 << 10, BlockCacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i += 5 {
		if err := db.Put([]byte(fmt.Sprintf("k%05d", i)), []byte("before"), nil); err != nil {
			t.Fatal(err)
		}
		if i == 150 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return db
}

func tableNames(t testing.TB, fs vfs.FS) string {
	t.Helper()
	names, err := fs.List("db")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, ".sst") {
			out = append(out, n)
		}
	}
	return fmt.Sprint(out)
}

// checkIngestOf ingests data as a table into db: a refusal must wrap
// ErrCorruption or ErrInvalidArgument, name the file and leave the DB as
// it was (same digest, same tables); a success must leave a DB that
// verifies and holds the file's entries as an independent reader sees them
// (a table with checksum type None can be damaged and still valid). It
// returns Ingest's error.
func checkIngestOf(t *testing.T, fs vfs.FS, db *vigil.DB, data []byte) error {
	sum, err := db.Checksum(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tables := tableNames(t, fs)
	f, err := fs.Create("in.sst")
	if err != nil {
		t.Fatal(err)
	}
	// (A copy: vfs.File.Write may scribble on its argument, and Pebble's
	// invariants builds do.)
	if _, err := f.Write(bytes.Clone(data)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	err = db.Ingest([]string{"in.sst"})
	if err != nil {
		if !errors.Is(err, vigil.ErrCorruption) && !errors.Is(err, vigil.ErrInvalidArgument) {
			t.Fatalf("refused with %v, neither ErrCorruption nor ErrInvalidArgument", err)
		}
		if !strings.Contains(err.Error(), "in.sst") {
			t.Fatalf("the error does not name the file: %v", err)
		}
		if got, err := db.Checksum(nil, nil); err != nil || got != sum {
			t.Fatalf("a refused ingestion changed the DB: digest %#x, was %#x (%v)", got, sum, err)
		}
		if got := tableNames(t, fs); got != tables {
			t.Fatalf("a refused ingestion changed the tables: %s, were %s", got, tables)
		}
		return err
	}
	if err := db.Verify(); err != nil {
		t.Fatalf("Verify after an ingestion: %v", err)
	}
	file, err := fs.Open("in.sst")
	if err != nil {
		t.Fatal(err)
	}
	r, err := sst.Open(file, "in.sst", int64(len(data)), sst.ReaderOptions{})
	if err != nil {
		t.Fatalf("Ingest accepted a table sst.Open refuses: %v", err)
	}
	defer r.Close()
	it := r.NewIter(nil, nil)
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		v, err := db.Get(k.UserKey)
		switch {
		case k.Kind() == base.KindDelete && !errors.Is(err, vigil.ErrNotFound):
			t.Fatalf("ingested Delete of %q, but Get = %q, %v", k.UserKey, v, err)
		case k.Kind() == base.KindSet && (err != nil || string(v) != string(it.Value())):
			t.Fatalf("ingested %q=%q, but Get = %q, %v", k.UserKey, it.Value(), v, err)
		}
	}
	if err := it.Error(); err != nil {
		t.Fatalf("reading a table Ingest accepted: %v", err)
	}
	return nil
}

// FuzzIngest feeds damaged external tables to Ingest: refused cleanly (DB
// unchanged), or, if still a valid table, ingested in full; never a panic.
// The seed corpus (testdata/fuzz/FuzzIngest) holds valid tables, bit flips
// in each kind of block and truncations.
func FuzzIngest(f *testing.F) {
	for _, b := range ingestFuzzTables(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fs := vfs.NewMem()
		db := ingestOpenTarget(t, fs)
		defer db.Close()
		_ = checkIngestOf(t, fs, db, data)
	})
}

// TestIngestDamagedSweep flips every bit of an external table in turn and
// truncates it at every length: each damaged file is refused with an error
// naming it, and the DB is left as it was.
func TestIngestDamagedSweep(t *testing.T) {
	data := ingestFuzzTables(t)[0]
	fs := vfs.NewMem()
	db := ingestOpenTarget(t, fs)
	defer db.Close()
	sum, _ := db.Checksum(nil, nil)
	bits := 8
	if testing.Short() {
		bits = 1
	}
	refused := 0
	for off := 0; off < len(data); off++ {
		for bit := 0; bit < bits; bit++ {
			bad := append([]byte(nil), data...)
			bad[off] ^= 1 << ((off + bit) % 8)
			if checkIngestOf(t, fs, db, bad) != nil {
				refused++
			}
		}
	}
	for n := 0; n < len(data); n++ {
		if checkIngestOf(t, fs, db, data[:n]) != nil {
			refused++
		}
	}
	if got, _ := db.Checksum(nil, nil); got != sum {
		t.Fatal("a damaged file was ingested")
	}
	// And the intact one goes in.
	if err := checkIngestOf(t, fs, db, data); err != nil {
		t.Fatalf("the intact file is refused: %v", err)
	}
	if got, _ := db.Checksum(nil, nil); got == sum {
		t.Fatal("the intact file changed nothing")
	}
	t.Logf("%d damaged versions of a %d-byte table refused", refused, len(data))
}

var writeIngestFuzzSeeds = flag.Bool("write-ingest-fuzz-seeds", false, "rewrite testdata/fuzz/FuzzIngest")

// TestIngestFuzzSeeds writes the seed corpus of FuzzIngest with
// -write-ingest-fuzz-seeds; otherwise it checks that it exists.
func TestIngestFuzzSeeds(t *testing.T) {
	tables := ingestFuzzTables(t)
	seeds := map[string][]byte{}
	for i, b := range tables {
		seeds[fmt.Sprintf("valid-%d", i)] = b
	}
	// A flip in the first data block, the last block before the footer,
	// the footer; truncations inside the footer and mid-file.
	b := tables[0]
	for name, off := range map[string]int{"flip-data": 20, "flip-metaindex": len(b) - sst.FooterLen - 10, "flip-footer": len(b) - 20} {
		bad := append([]byte(nil), b...)
		bad[off] ^= 0x04
		seeds[name] = bad
	}
	seeds["truncated-footer"] = b[:len(b)-5]
	seeds["truncated-half"] = b[:len(b)/2]
	dir := filepath.Join("testdata", "fuzz", "FuzzIngest")
	for name, data := range seeds {
		path := filepath.Join(dir, name)
		if *writeIngestFuzzSeeds {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)), 0o644); err != nil {
				t.Fatal(err)
			}
		} else if _, err := os.Stat(path); err != nil {
			t.Errorf("seed corpus file missing (regenerate with -write-ingest-fuzz-seeds): %v", err)
		}
	}
}
