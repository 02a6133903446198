package vigil

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manifest"
)

// extEntry is one point entry of a test external table.
type extEntry struct {
	key, val string
	del      bool
}

// extFile is the content of a test external table: points in key order,
// tombstones [start, end) in the order they are added.
type extFile struct {
	points []extEntry
	tombs  [][2]string
}

func writeExt(t testing.TB, fs vfs.FS, path string, f extFile, o *ExternalWriterOptions) {
	t.Helper()
	w, err := NewExternalWriter(fs, path, o)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range f.points {
		if p.del {
			err = w.Delete([]byte(p.key))
		} else {
			err = w.Set([]byte(p.key), []byte(p.val))
		}
		if err != nil {
			t.Fatal(err)
		}
		if i < len(f.tombs) {
			// Tombstones interleaved with points, in any order.
			tb := f.tombs[i]
			if err := w.DeleteRange([]byte(tb[0]), []byte(tb[1])); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := len(f.points); i < len(f.tombs); i++ {
		if err := w.DeleteRange([]byte(f.tombs[i][0]), []byte(f.tombs[i][1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// applyExt applies an ingested table to the model: its range deletions
// delete what was there, its points (which they do not delete: same
// seqnum) then apply.
func (m model) applyExt(f extFile) {
	for _, tb := range f.tombs {
		m.deleteRange(tb[0], tb[1])
	}
	for _, p := range f.points {
		if p.del {
			delete(m, p.key)
		} else {
			m[p.key] = p.val
		}
	}
}

func (m model) deleteRange(a, b string) {
	for k := range m {
		if k >= a && k < b {
			delete(m, k)
		}
	}
}

func ikey(i int) string { return fmt.Sprintf("key%05d", i) }

// randExtFile makes a table over the keys [lo, hi): a random subset as
// sets and deletes, and a few range deletions, overlapping, unordered.
func randExtFile(rng *rand.Rand, lo, hi int, tag string) extFile {
	var f extFile
	for i := lo; i < hi; i++ {
		if rng.IntN(3) != 0 {
			continue
		}
		if rng.IntN(5) == 0 {
			f.points = append(f.points, extEntry{key: ikey(i), del: true})
		} else {
			f.points = append(f.points, extEntry{key: ikey(i), val: fmt.Sprintf("ext-%s-%d", tag, rng.IntN(1e6))})
		}
	}
	for n := rng.IntN(4); n > 0 && hi-lo > 1; n-- {
		a := lo + rng.IntN(hi-lo)
		b := a + 1 + rng.IntN(hi-a)
		f.tombs = append(f.tombs, [2]string{ikey(a), ikey(b)})
	}
	if len(f.tombs) > 0 && rng.IntN(2) == 0 {
		// An end exactly at hi: the exclusive bound.
		f.tombs = append(f.tombs, [2]string{ikey(hi - 1), ikey(hi)})
	}
	return f
}

func TestIngestBasic(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", smallIngestOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < 100; i++ {
		if err := db.Put([]byte(ikey(i)), []byte("old"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	m := model{}
	for i := 0; i < 100; i++ {
		m[ikey(i)] = "old"
	}
	before := db.visibleSeq.Load()
	snap := db.NewSnapshot()
	defer snap.Close()
	f := extFile{
		points: []extEntry{{key: ikey(5), val: "new5"}, {key: ikey(20), del: true}, {key: ikey(150), val: "new150"}},
		tombs:  [][2]string{{ikey(30), ikey(40)}, {ikey(35), ikey(45)}, {ikey(10), ikey(12)}},
	}
	writeExt(t, fs, "ext.sst", f, nil)
	if err := db.Ingest([]string{"ext.sst"}); err != nil {
		t.Fatal(err)
	}
	m.applyExt(f)
	if got := db.visibleSeq.Load(); got != before+1 {
		t.Fatalf("visible seq %d after an ingestion at %d", got, before)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	check := func(db *DB, what string) {
		it, err := db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		checkIter(t, it, m, nil, nil, rng, what)
		it.Close()
		for k, v := range m {
			got, err := db.Get([]byte(k))
			if err != nil || string(got) != v {
				t.Fatalf("%s: Get(%s) = %q, %v, want %q", what, k, got, err, v)
			}
		}
		for _, k := range []string{ikey(20), ikey(30), ikey(44), ikey(10)} {
			if _, err := db.Get([]byte(k)); !errors.Is(err, ErrNotFound) {
				t.Fatalf("%s: Get(%s) = %v, want ErrNotFound", what, k, err)
			}
		}
		if err := db.Verify(); err != nil {
			t.Fatal(err)
		}
	}
	check(db, "after ingest")
	// The snapshot taken before sees none of it.
	if v, err := snap.Get([]byte(ikey(5))); err != nil || string(v) != "old" {
		t.Fatalf("snapshot Get = %q, %v", v, err)
	}
	if _, err := snap.Get([]byte(ikey(150))); !errors.Is(err, ErrNotFound) {
		t.Fatalf("snapshot sees an ingested key: %v", err)
	}
	// The file is linked, not moved: the caller's copy stays.
	if _, err := fs.Stat("ext.sst"); err != nil {
		t.Fatal(err)
	}
	snap.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open("db", smallIngestOptions(fs)); err != nil {
		t.Fatal(err)
	}
	check(db, "after reopen")
	// Writes after the reopen go above the ingestion's seqnum.
	if err := db.Put([]byte(ikey(5)), []byte("newer"), nil); err != nil {
		t.Fatal(err)
	}
	if v, err := db.Get([]byte(ikey(5))); err != nil || string(v) != "newer" {
		t.Fatalf("Get after a write over the ingested key = %q, %v", v, err)
	}
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	m[ikey(5)] = "newer"
	check(db, "after compaction")
}

// A memtable holding a key of the ingested range is flushed first; one
// that does not is left alone.
func TestIngestFlushesOverlappingMemtable(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", smallIngestOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Put([]byte("a"), []byte("mem"), nil); err != nil {
		t.Fatal(err)
	}
	writeExt(t, fs, "x.sst", extFile{points: []extEntry{{key: "m", val: "ext"}, {key: "p", val: "ext"}}}, nil)
	if err := db.Ingest([]string{"x.sst"}); err != nil {
		t.Fatal(err)
	}
	if n := db.Metrics().Flush.Count; n != 0 {
		t.Fatalf("%d flushes for an ingestion that overlaps no memtable", n)
	}
	if err := db.Put([]byte("n"), []byte("mem"), nil); err != nil {
		t.Fatal(err)
	}
	writeExt(t, fs, "y.sst", extFile{points: []extEntry{{key: "n", val: "ext2"}}}, nil)
	if err := db.Ingest([]string{"y.sst"}); err != nil {
		t.Fatal(err)
	}
	if n := db.Metrics().Flush.Count; n != 1 {
		t.Fatalf("%d flushes for an ingestion over a memtable key, want 1", n)
	}
	for k, want := range map[string]string{"a": "mem", "m": "ext", "n": "ext2", "p": "ext"} {
		if v, err := db.Get([]byte(k)); err != nil || string(v) != want {
			t.Fatalf("Get(%s) = %q, %v, want %q", k, v, err, want)
		}
	}
	// The range deletion in a memtable counts as overlap too.
	if err := db.DeleteRange([]byte("q"), []byte("s"), nil); err != nil {
		t.Fatal(err)
	}
	writeExt(t, fs, "z.sst", extFile{points: []extEntry{{key: "r", val: "ext3"}}}, nil)
	if err := db.Ingest([]string{"z.sst"}); err != nil {
		t.Fatal(err)
	}
	if v, err := db.Get([]byte("r")); err != nil || string(v) != "ext3" {
		t.Fatalf("Get(r) = %q, %v: the range deletion written before the ingestion hid it", v, err)
	}
}

func TestIngestAndExcise(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs, WriteBufferSize: minWriteBufferSize, BlockCacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := model{}
	for i := 0; i < 300; i++ {
		k, v := ikey(i), fmt.Sprintf("v%d", i)
		if err := db.Put([]byte(k), []byte(v), nil); err != nil {
			t.Fatal(err)
		}
		m[k] = v
		if i%100 == 99 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	snap := db.NewSnapshot()
	defer snap.Close()
	old := m.clone()
	a := extFile{points: []extEntry{{key: ikey(100), val: "A"}, {key: ikey(101), val: "A"}}}
	b := extFile{points: []extEntry{{key: ikey(150), val: "B"}}, tombs: [][2]string{{ikey(150), ikey(200)}}}
	writeExt(t, fs, "a.sst", a, nil)
	writeExt(t, fs, "b.sst", b, nil)
	if err := db.IngestAndExcise([]string{"b.sst", "a.sst"}, []byte(ikey(100)), []byte(ikey(200))); err != nil {
		t.Fatal(err)
	}
	m.deleteRange(ikey(100), ikey(200))
	m.applyExt(a)
	m.applyExt(b)
	rng := rand.New(rand.NewPCG(2, 2))
	it, _ := db.NewIter(nil)
	checkIter(t, it, m, nil, nil, rng, "after excise")
	it.Close()
	it, _ = snap.NewIter(nil)
	checkIter(t, it, old, nil, nil, rng, "snapshot before excise")
	it.Close()
	// Files outside the range are refused, the DB unchanged.
	writeExt(t, fs, "c.sst", extFile{points: []extEntry{{key: ikey(250), val: "C"}}}, nil)
	sum, _ := db.Checksum(nil, nil)
	if err := db.IngestAndExcise([]string{"c.sst"}, []byte(ikey(100)), []byte(ikey(200))); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a file outside the excised range: %v", err)
	}
	if err := db.IngestAndExcise(nil, []byte(ikey(5)), []byte(ikey(5))); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("an empty excise range: %v", err)
	}
	if got, _ := db.Checksum(nil, nil); got != sum {
		t.Fatal("a refused IngestAndExcise changed the DB")
	}
	// No files: the range is emptied.
	if err := db.IngestAndExcise(nil, []byte(ikey(0)), []byte(ikey(50))); err != nil {
		t.Fatal(err)
	}
	m.deleteRange(ikey(0), ikey(50))
	snap.Close()
	for _, reopen := range []bool{false, true} {
		if reopen {
			db.Close()
			if db, err = Open("db", smallIngestOptions(fs)); err != nil {
				t.Fatal(err)
			}
		}
		it, _ = db.NewIter(nil)
		checkIter(t, it, m, nil, nil, rng, fmt.Sprintf("after emptying, reopen=%v", reopen))
		it.Close()
	}
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	it, _ = db.NewIter(nil)
	checkIter(t, it, m, nil, nil, rng, "after compaction")
	it.Close()
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
}

// Bad inputs are refused before anything changes: a DB's own table (not
// external), overlapping files, a missing file, a damaged one; each error
// names the file.
func TestIngestRefuses(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", smallIngestOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < 50; i++ {
		db.Put([]byte(ikey(i)), []byte("v"), nil)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	// The flush's rotation starts the next WAL in the background: let it
	// be made before the directory is listed below, or it shows up as a
	// file the refused ingestions left.
	waitFor(t, "the next WAL", func() bool {
		db.mu.Lock()
		defer db.mu.Unlock()
		return !db.wal.preparing
	})
	writeExt(t, fs, "a.sst", extFile{points: []extEntry{{key: ikey(1), val: "x"}, {key: ikey(9), val: "x"}}}, nil)
	writeExt(t, fs, "b.sst", extFile{points: []extEntry{{key: ikey(5), val: "y"}}}, nil)
	writeExt(t, fs, "c.sst", extFile{tombs: [][2]string{{ikey(9), ikey(12)}}}, nil)
	// The DB's own table.
	var own string
	for _, n := range must(fs.List("db")) {
		if strings.HasSuffix(n, ".sst") {
			own = fs.PathJoin("db", n)
		}
	}
	data := readAll(t, fs, "a.sst")
	data[len(data)/3] ^= 0x10
	writeFile(t, fs, "flipped.sst", data)
	writeFile(t, fs, "short.sst", readAll(t, fs, "a.sst")[:100])
	sum, err := db.Checksum(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	files := must(fs.List("db"))
	slices.Sort(files)
	for _, c := range []struct {
		paths []string
		want  error
		name  string
	}{
		{[]string{own}, ErrInvalidArgument, own},
		{[]string{"a.sst", "b.sst"}, ErrInvalidArgument, "b.sst"},
		{[]string{"a.sst", "c.sst"}, ErrInvalidArgument, "c.sst"}, // a's last key 9 is in c's [9, 12)
		{[]string{"a.sst", "missing.sst"}, os.ErrNotExist, "missing.sst"},
		{[]string{"flipped.sst"}, ErrCorruption, "flipped.sst"},
		{[]string{"b.sst", "short.sst"}, ErrCorruption, "short.sst"},
	} {
		err := db.Ingest(c.paths)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("Ingest(%v) = %v, want %v naming %s", c.paths, err, c.want, c.name)
		}
	}
	if got, _ := db.Checksum(nil, nil); got != sum {
		t.Fatal("a refused ingestion changed the DB")
	}
	if got := must(fs.List("db")); !slices.Equal(slices.Sorted(slices.Values(got)), files) {
		t.Fatalf("a refused ingestion left files behind: %v, before %v", got, files)
	}
	// Adjacent files (c starts where a's last key... no: a ends at 9
	// inclusive, so [10, 12) touches without overlapping).
	writeExt(t, fs, "d.sst", extFile{tombs: [][2]string{{ikey(10), ikey(12)}}}, nil)
	if err := db.Ingest([]string{"d.sst", "a.sst"}); err != nil {
		t.Fatal(err)
	}
	// Empty files are skipped; no file at all is a no-op.
	writeExt(t, fs, "empty.sst", extFile{}, nil)
	seq := db.visibleSeq.Load()
	if err := db.Ingest([]string{"empty.sst"}); err != nil {
		t.Fatal(err)
	}
	if err := db.Ingest(nil); err != nil {
		t.Fatal(err)
	}
	if db.visibleSeq.Load() != seq {
		t.Fatal("an empty ingestion took a seqnum")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Ingest([]string{"b.sst"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Ingest into a closed DB: %v", err)
	}
	ro, err := Open("db", &Options{FS: fs, ReadOnly: true, WriteBufferSize: 256 << 10, BlockCacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.Ingest([]string{"b.sst"}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Ingest into a read-only DB: %v", err)
	}
	if err := ro.IngestAndExcise(nil, []byte("a"), []byte("b")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("IngestAndExcise into a read-only DB: %v", err)
	}
}

func TestExternalWriterRefuses(t *testing.T) {
	fs := vfs.NewMem()
	w, err := NewExternalWriter(fs, "x.sst", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Set([]byte("b"), nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if err := w.Set([]byte(k), nil); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("Set(%s) after b: %v", k, err)
		}
		if err := w.Delete([]byte(k)); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("Delete(%s) after b: %v", k, err)
		}
	}
	if err := w.DeleteRange([]byte("z"), []byte("a")); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("inverted DeleteRange: %v", err)
	}
	if err := w.DeleteRange([]byte("c"), []byte("c")); err != nil {
		t.Fatalf("empty DeleteRange: %v", err)
	}
	// Still usable after refusals.
	if err := w.Set([]byte("c"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := NewExternalWriter(fs, "y.sst", &ExternalWriterOptions{ChecksumType: 99, BlockSize: -1}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad options: %v", err)
	}
	// The DB's rules for table options: what Open refuses, an external
	// writer refuses too, in the same words.
	bad := ExternalWriterOptions{BlockSize: 32, BlockRestartInterval: 1 << 20, BloomBitsPerKey: 100}
	_, werr := NewExternalWriter(fs, "y.sst", &bad)
	verr := (&Options{BlockSize: bad.BlockSize, BlockRestartInterval: bad.BlockRestartInterval, BloomBitsPerKey: bad.BloomBitsPerKey}).EnsureDefaults().Validate()
	for _, want := range []string{"BlockSize = 32", "BlockRestartInterval = 1048576", "BloomBitsPerKey = 100"} {
		if werr == nil || verr == nil || !strings.Contains(werr.Error(), want) || !strings.Contains(verr.Error(), want) {
			t.Fatalf("%q: external writer said %v; Validate said %v", want, werr, verr)
		}
	}
	w, _ = NewExternalWriter(fs, "z.sst", nil)
	w.Abort()
	if _, err := fs.Stat("z.sst"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Abort left the file: %v", err)
	}
}

// smallIngestOptions keep the memory of a test DB small: memtables and the
// block cache live outside the Go heap, and invariants builds never unmap
// them (freed memory is poisoned and kept inaccessible).
func smallIngestOptions(fs vfs.FS) *Options {
	return &Options{FS: fs, WriteBufferSize: 256 << 10, BlockCacheSize: 1 << 20}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func readAll(t testing.TB, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
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

func writeFile(t testing.TB, fs vfs.FS, name string, b []byte) {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Clone(b)); err != nil { // Write may scribble on its argument
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestIngestModel runs random writes, ingestions, excises, snapshots,
// flushes, compactions and reopens against the map model.
func TestIngestModel(t *testing.T) {
	seeds, ops := 12, 1500
	if testing.Short() {
		seeds, ops = 4, 800
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runIngestModel(t, uint64(seed), ops) })
	}
}

func runIngestModel(t *testing.T, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, seed*31))
	fs := vfs.NewMem()
	opts := smallOptions(fs, rng)
	opts.DisableWAL = rng.IntN(4) == 0
	db, err := Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if db != nil {
			db.Close()
		}
	}()
	const keys = 600
	m := model{}
	type snap struct {
		s *Snapshot
		m model
	}
	var snaps []snap
	nfile := 0
	var ingested, excised int
	newFile := func(lo, hi int) (string, extFile) {
		nfile++
		path := fmt.Sprintf("ext%04d.sst", nfile)
		f := randExtFile(rng, lo, hi, fmt.Sprint(nfile))
		var o *ExternalWriterOptions
		if rng.IntN(2) == 0 {
			o = &ExternalWriterOptions{ChecksumType: ChecksumType(1 + rng.IntN(6)), BlockSize: 128, Compression: NoCompression}
		}
		writeExt(t, fs, path, f, o)
		return path, f
	}
	// disjointRanges splits [lo, hi) into up to n non-empty ranges.
	disjointRanges := func(lo, hi, n int) [][2]int {
		cuts := []int{lo, hi}
		for i := 0; i < n-1 && hi-lo > 2; i++ {
			cuts = append(cuts, lo+1+rng.IntN(hi-lo-1))
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		var out [][2]int
		for i := 1; i < len(cuts); i++ {
			if rng.IntN(4) != 0 { // leave some gaps
				out = append(out, [2]int{cuts[i-1], cuts[i]})
			}
		}
		return out
	}
	for i := 0; i < ops; i++ {
		switch r := rng.IntN(100); {
		case r < 35:
			k, v := modelKey(rng, keys), fmt.Sprintf("v%d", rng.IntN(1e6))
			if err := db.Put(k, []byte(v), nil); err != nil {
				t.Fatal(err)
			}
			m[string(k)] = v
		case r < 42:
			k := modelKey(rng, keys)
			if err := db.Delete(k, nil); err != nil {
				t.Fatal(err)
			}
			delete(m, string(k))
		case r < 44:
			a, b := modelKey(rng, keys), modelKey(rng, keys)
			if bytes.Compare(a, b) > 0 {
				a, b = b, a
			}
			if err := db.DeleteRange(a, b, nil); err != nil {
				t.Fatal(err)
			}
			m.deleteRange(string(a), string(b))
		case r < 52:
			lo := rng.IntN(keys - 1)
			hi := lo + 1 + rng.IntN(min(keys-lo, 80))
			var paths []string
			var fs_ []extFile
			for _, rg := range disjointRanges(lo, hi, 1+rng.IntN(3)) {
				p, f := newFile(rg[0], rg[1])
				paths = append(paths, p)
				fs_ = append(fs_, f)
			}
			rng.Shuffle(len(paths), func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })
			if rng.IntN(3) == 0 {
				if err := db.IngestAndExcise(paths, []byte(ikey(lo)), []byte(ikey(hi))); err != nil {
					t.Fatalf("op %d: IngestAndExcise: %v", i, err)
				}
				m.deleteRange(ikey(lo), ikey(hi))
				excised++
			} else if err := db.Ingest(paths); err != nil {
				t.Fatalf("op %d: Ingest: %v", i, err)
			}
			for _, f := range fs_ {
				m.applyExt(f)
			}
			ingested++
		case r < 70:
			k := modelKey(rng, keys)
			v, err := db.Get(k)
			want, ok := m[string(k)]
			if ok != (err == nil) || (ok && string(v) != want) || (!ok && !errors.Is(err, ErrNotFound)) {
				t.Fatalf("op %d: Get(%s) = %q, %v; want %q, %v", i, k, v, err, want, ok)
			}
		case r < 74:
			it, err := db.NewIter(nil)
			if err != nil {
				t.Fatal(err)
			}
			checkIter(t, it, m, nil, nil, rng, fmt.Sprintf("op %d iter", i))
			it.Close()
		case r < 78:
			snaps = append(snaps, snap{db.NewSnapshot(), m.clone()})
		case r < 84 && len(snaps) > 0:
			j := rng.IntN(len(snaps))
			s := snaps[j]
			it, err := s.s.NewIter(nil)
			if err != nil {
				t.Fatal(err)
			}
			checkIter(t, it, s.m, nil, nil, rng, fmt.Sprintf("op %d snapshot iter", i))
			it.Close()
			k := modelKey(rng, keys)
			v, err := s.s.Get(k)
			want, ok := s.m[string(k)]
			if ok != (err == nil) || (ok && string(v) != want) {
				t.Fatalf("op %d: snapshot Get(%s) = %q, %v; want %q, %v", i, k, v, err, want, ok)
			}
			if rng.IntN(3) == 0 {
				s.s.Close()
				snaps = slices.Delete(snaps, j, j+1)
			}
		case r < 90:
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		case r < 94:
			a, b := modelKey(rng, keys), modelKey(rng, keys)
			if bytes.Compare(a, b) > 0 {
				a, b = b, a
			}
			if err := db.Compact(a, b); err != nil {
				t.Fatal(err)
			}
		case r < 97:
			for _, s := range snaps {
				s.s.Close()
			}
			snaps = nil
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = nil
			if db, err = Open("db", opts); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range snaps {
		it, _ := s.s.NewIter(nil)
		checkIter(t, it, s.m, nil, nil, rng, "final snapshot")
		it.Close()
		s.s.Close()
	}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	checkIter(t, it, m, nil, nil, rng, "final")
	it.Close()
	if err := db.Verify(); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	t.Logf("%d ingestions (%d with excise), WAL disabled %v; levels %v", ingested, excised, opts.DisableWAL, levelFiles(db.Metrics()))
}

// Concurrent writers, readers and ingestions of disjoint key ranges: every
// write and every ingested key is there at the end (run with -race).
func TestIngestConcurrent(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs, WriteBufferSize: minWriteBufferSize, L0CompactionTrigger: 2, BlockCacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const writers, perWriter, ingests = 2, 1500, 12
	var wg sync.WaitGroup
	errs := make(chan error, writers+2)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				// Writers' keys interleave with the ingested ones, so their
				// memtables overlap the ingestions' ranges.
				k := fmt.Sprintf("k%04d-w%d", i%400, w)
				if err := db.Put([]byte(k), []byte(fmt.Sprint(i)), nil); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	var files []extFile
	for n := 0; n < ingests; n++ {
		var f extFile
		for i := n * 30; i < n*30+30; i++ {
			f.points = append(f.points, extEntry{key: fmt.Sprintf("k%04d-x", i), val: fmt.Sprint("ext", n)})
		}
		files = append(files, f)
		writeExt(t, fs, fmt.Sprintf("e%d.sst", n), f, nil)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := range files {
			if err := db.Ingest([]string{fmt.Sprintf("e%d.sst", n)}); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 300; i++ {
			it, err := db.NewIter(nil)
			if err != nil {
				errs <- err
				return
			}
			prev := ""
			for it.First(); it.Valid(); it.Next() {
				if k := string(it.Key()); k <= prev {
					errs <- fmt.Errorf("iterator out of order: %q after %q", k, prev)
				} else {
					prev = k
				}
			}
			if err := it.Close(); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for n, f := range files {
		for _, p := range f.points {
			if v, err := db.Get([]byte(p.key)); err != nil || string(v) != p.val {
				t.Fatalf("ingestion %d: Get(%s) = %q, %v", n, p.key, v, err)
			}
		}
	}
	for w := 0; w < writers; w++ {
		for i := perWriter - 400; i < perWriter; i++ {
			k := fmt.Sprintf("k%04d-w%d", i%400, w)
			if v, err := db.Get([]byte(k)); err != nil || string(v) != fmt.Sprint(i) {
				t.Fatalf("Get(%s) = %q, %v, want %d", k, v, err, i)
			}
		}
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestIngestPlacement runs testdata/ingest_placement: a version defined as
// in testdata/compaction_picker, and the level each ingested file (a
// user-key range "a-c", or "a-c)" for an exclusive end) goes to; "excise"
// places the range tombstone's table first, then the files.
func TestIngestPlacement(t *testing.T) {
	var v *manifest.Version
	datadriven.RunTest(t, "testdata/ingest_placement", func(t *testing.T, td *datadriven.TestData) string {
		switch td.Cmd {
		case "define":
			e := &manifest.VersionEdit{}
			for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
				if line == "" {
					continue
				}
				f := strings.Fields(line)
				level := int(f[0][1] - '0')
				for _, spec := range f[1:] {
					e.Added = append(e.Added, manifest.NewFile{Level: level, Meta: parsePickerFile(t, spec)})
				}
			}
			b := manifest.NewBuilder(nil, nil)
			if err := b.Apply(e); err != nil {
				t.Fatal(err)
			}
			var err error
			if v, err = b.Build(nil); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			for l, files := range v.Levels {
				if len(files) == 0 {
					continue
				}
				fmt.Fprintf(&out, "L%d:", l)
				for _, f := range files {
					fmt.Fprintf(&out, " %d:%s-%s", f.FileNum, f.Smallest.UserKey, f.Largest.UserKey)
				}
				out.WriteByte('\n')
			}
			return out.String()
		case "ingest", "excise":
			var placed []manifest.NewFile
			var out strings.Builder
			args := td.CmdArgs
			for i, a := range args {
				span := a.Key
				excl := strings.HasSuffix(span, ")")
				span = strings.TrimSuffix(span, ")")
				s, l, _ := strings.Cut(span, "-")
				m := &manifest.FileMetadata{FileNum: uint64(900 + i), Smallest: base.MakeInternalKey([]byte(s), 1000, base.KindSet),
					Largest: base.MakeInternalKey([]byte(l), 1000, base.KindSet)}
				if excl || (td.Cmd == "excise" && i == 0) {
					m.Largest = base.MakeInternalKey([]byte(l), base.SeqNumMax, base.KindRangeDelete)
				}
				level := ingestLevel(v, placed, m)
				placed = append(placed, manifest.NewFile{Level: level, Meta: m})
				what := "file"
				if td.Cmd == "excise" && i == 0 {
					what = "excise tombstone"
				}
				fmt.Fprintf(&out, "%s %s: L%d\n", what, a.Key, level)
			}
			return out.String()
		}
		t.Fatalf("unknown command %q", td.Cmd)
		return ""
	})
}

// Placement through a real DB: a file that overlaps nothing goes to the
// bottom, one that overlaps a level's file just above it, one that
// overlaps L0 into L0.
func TestIngestPlacementDB(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs, DisableAutomaticCompactions: true, WriteBufferSize: 256 << 10, BlockCacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, k := range []string{"c", "d"} {
		db.Put([]byte(k), []byte("v"), nil)
	}
	db.Flush()
	if err := db.Compact(nil, nil); err != nil { // c-d to L1 (the bottom holding data)
		t.Fatal(err)
	}
	db.Put([]byte("m"), []byte("v"), nil)
	db.Flush() // m in L0
	level := func(path string, f extFile) int {
		writeExt(t, fs, path, f, nil)
		if err := db.Ingest([]string{path}); err != nil {
			t.Fatal(err)
		}
		db.mu.Lock()
		defer db.mu.Unlock()
		for l, files := range db.vs.current.Levels {
			for _, m := range files {
				if m.GlobalSeqNum != 0 && m.Smallest.UserKey[0] == f.points[0].key[0] {
					return l
				}
			}
		}
		t.Fatalf("%s not found", path)
		return -1
	}
	if l := level("x.sst", extFile{points: []extEntry{{key: "x", val: "1"}}}); l != 6 {
		t.Fatalf("a file overlapping nothing went to L%d, want L6", l)
	}
	if l := level("b.sst", extFile{points: []extEntry{{key: "b", val: "1"}, {key: "cc", val: "1"}}}); l != 0 {
		t.Fatalf("a file overlapping an L1 file went to L%d, want L0", l)
	}
	if l := level("l.sst", extFile{points: []extEntry{{key: "l", val: "1"}, {key: "n", val: "1"}}}); l != 0 {
		t.Fatalf("a file overlapping L0 went to L%d, want L0", l)
	}
	if l := level("w.sst", extFile{points: []extEntry{{key: "w", val: "1"}, {key: "xx", val: "1"}}}); l != 5 {
		t.Fatalf("a file overlapping the L6 one went to L%d, want L5", l)
	}
}

// The WAL's batches below an ingestion's seqnum that are in no table yet
// survive a crash: recovery must not take an ingested table's seqnum (or a
// compaction output holding its entries) for "everything below is in a
// table". Without a WAL the ingestion flushes them first, so it never
// survives a crash that loses writes made before it. And new writes after
// the reopen go above the ingested seqnum.
func TestIngestRecoveryKeepsUnflushedWrites(t *testing.T) {
	for _, disableWAL := range []bool{false, true} {
		t.Run(fmt.Sprintf("DisableWAL=%v", disableWAL), func(t *testing.T) {
			mem := vfs.NewStrictMem()
			opts := &Options{FS: mem, DisableWAL: disableWAL, DisableAutomaticCompactions: true, WriteBufferSize: 256 << 10, BlockCacheSize: 1 << 20}
			db, err := Open("db", opts)
			if err != nil {
				t.Fatal(err)
			}
			db.Put([]byte("m1"), []byte("table"), nil)
			db.Put([]byte("m9"), []byte("table"), nil)
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			// Unflushed, below the ingestion, not overlapping it.
			if err := db.Put([]byte("a"), []byte("wal"), nil); err != nil {
				t.Fatal(err)
			}
			if !disableWAL {
				if err := db.SyncWAL(); err != nil {
					t.Fatal(err)
				}
			}
			writeExt(t, mem, "x.sst", extFile{points: []extEntry{{key: "m5", val: "ext"}}}, nil)
			if err := db.Ingest([]string{"x.sst"}); err != nil {
				t.Fatal(err)
			}
			// Merge the ingested table with the other one (both in L0),
			// without the flush Compact would do first: the output is a
			// normal table whose largest seqnum is the ingestion's.
			db.compactionMu.Lock()
			db.mu.Lock()
			v := db.vs.current
			// Without a WAL, the ingestion flushed the memtable first (so
			// that it never outlives writes made before it).
			if want := map[bool]int{false: 2, true: 3}[disableWAL]; len(v.Levels[0]) != want {
				t.Fatalf("L0 holds %d tables, want %d", len(v.Levels[0]), want)
			}
			c := newCompaction(v, 0, slices.Clone(v.Levels[0]), "test")
			c.noMove = true
			db.mu.Unlock()
			err = db.runCompaction(c)
			db.compactionMu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if n, want := db.Metrics().Flush.Count, map[bool]int64{false: 1, true: 2}[disableWAL]; n != want {
				t.Fatalf("%d flushes, want %d (with a WAL the write must still be only in the WAL)", n, want)
			}
			ingestSeq := db.visibleSeq.Load()
			mem.SetIgnoreSyncs(true) // crash
			db.Close()
			mem.ResetToSyncedState()
			mem.SetIgnoreSyncs(false)
			if db, err = Open("db", opts); err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			want := map[string]string{"a": "wal", "m1": "table", "m5": "ext", "m9": "table"}
			for k, v := range want {
				if got, err := db.Get([]byte(k)); err != nil || string(got) != v {
					t.Fatalf("after the crash: Get(%s) = %q, %v, want %q", k, got, err, v)
				}
			}
			if got := db.visibleSeq.Load(); got < ingestSeq {
				t.Fatalf("visible seq %d after reopen, below the ingestion's %d", got, ingestSeq)
			}
			if err := db.Put([]byte("m5"), []byte("newer"), nil); err != nil {
				t.Fatal(err)
			}
			if got, err := db.Get([]byte("m5")); err != nil || string(got) != "newer" {
				t.Fatalf("a write after the reopen does not shadow the ingested key: %q, %v", got, err)
			}
		})
	}
}

// A checkpoint taken after an ingestion holds the ingested tables, and its
// WAL keeps the ingestion's record between the batches around it (without
// it, the checkpoint would open to a gap in the seqnums).
func TestIngestThenCheckpoint(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", smallIngestOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.Put([]byte("a"), []byte("before"), nil)
	writeExt(t, fs, "x.sst", extFile{points: []extEntry{{key: "x", val: "ext"}}}, nil)
	if err := db.Ingest([]string{"x.sst"}); err != nil {
		t.Fatal(err)
	}
	db.Put([]byte("b"), []byte("after"), nil)
	if n := db.Metrics().Flush.Count; n != 0 {
		t.Fatalf("%d flushes: the writes must be in the WAL only", n)
	}
	if err := db.Checkpoint("ckpt"); err != nil {
		t.Fatal(err)
	}
	cp, err := Open("ckpt", smallIngestOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	for k, v := range map[string]string{"a": "before", "x": "ext", "b": "after"} {
		if got, err := cp.Get([]byte(k)); err != nil || string(got) != v {
			t.Fatalf("checkpoint: Get(%s) = %q, %v, want %q", k, got, err, v)
		}
	}
	if err := cp.Verify(); err != nil {
		t.Fatal(err)
	}
}
