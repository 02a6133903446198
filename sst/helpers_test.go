package sst

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/cache"
)

// kv is one point entry of a test table (and of the model).
type kv struct {
	key   base.InternalKey
	value []byte
}

// tableSpec is the content of a test table.
type tableSpec struct {
	points []kv
	tombs  []base.RangeTombstone
}

// genSpec makes a random table: n point entries over about n/2 user keys
// (several versions of some, a mix of Set and Delete), keys of 1..maxKey
// bytes from a small alphabet so prefixes are shared, values of 0..maxVal
// bytes, plus nTombs range tombstones.
func genSpec(rng *rand.Rand, n, maxKey, maxVal, nTombs int) tableSpec {
	userKeys := map[string]bool{}
	for len(userKeys) < max(1, n/2) && n > 0 {
		k := make([]byte, 1+rng.IntN(maxKey))
		for i := range k {
			k[i] = "abcdxyz\x00\xff"[rng.IntN(9)]
		}
		userKeys[string(k)] = true
	}
	var uks []string
	for k := range userKeys {
		uks = append(uks, k)
	}
	sort.Strings(uks)
	var s tableSpec
	seq := uint64(1000)
	for len(s.points) < n {
		uk := []byte(uks[rng.IntN(len(uks))])
		kind := base.KindSet
		if rng.IntN(5) == 0 {
			kind = base.KindDelete
		}
		var v []byte
		if kind == base.KindSet {
			v = make([]byte, rng.IntN(maxVal+1))
			for i := range v {
				v[i] = byte(rng.IntN(4)) // compressible
			}
		}
		seq += uint64(1 + rng.IntN(3))
		s.points = append(s.points, kv{base.MakeInternalKey(uk, seq, kind), v})
	}
	slices.SortFunc(s.points, func(a, b kv) int { return base.CompareInternal(a.key, b.key) })
	for i := 0; i < nTombs; i++ {
		a := []byte{"abcdxyz"[rng.IntN(7)], "abcdxyz"[rng.IntN(7)]}
		b := []byte{"abcdxyz"[rng.IntN(7)], "abcdxyz"[rng.IntN(7)], 'q'}
		if bytes.Compare(a, b) > 0 {
			a, b = b, a
		}
		if bytes.Equal(a, b[:2]) {
			b = append(b[:2:2], 'z', 'z')
		}
		s.tombs = append(s.tombs, base.RangeTombstone{Start: a, End: b, Seq: uint64(1 + rng.IntN(2000))})
	}
	slices.SortFunc(s.tombs, func(a, b base.RangeTombstone) int {
		return base.CompareInternal(base.MakeInternalKey(a.Start, a.Seq, base.KindRangeDelete), base.MakeInternalKey(b.Start, b.Seq, base.KindRangeDelete))
	})
	s.tombs = slices.CompactFunc(s.tombs, func(a, b base.RangeTombstone) bool {
		return bytes.Equal(a.Start, b.Start) && a.Seq == b.Seq
	})
	return s
}

// testWriterOptions are deterministic writer options for tests.
func testWriterOptions(t checksum.Type, c Compression, blockSize int) WriterOptions {
	return WriterOptions{
		ChecksumType:         t,
		Compression:          c,
		BlockSize:            blockSize,
		BlockRestartInterval: 16,
		BloomBitsPerKey:      10,
		FileNum:              7,
		BaseContext:          0x5eed1234,
		CreationTime:         1700000000,
	}
}

// build writes spec to an in-memory file and returns its bytes and meta.
func build(t testing.TB, o WriterOptions, spec tableSpec) ([]byte, *Meta) {
	t.Helper()
	data, m, err := buildBytes(o, spec)
	if err != nil {
		t.Fatal(err)
	}
	return data, m
}

func buildBytes(o WriterOptions, spec tableSpec) ([]byte, *Meta, error) {
	fs := vfs.NewMem()
	f, err := fs.Create("t.sst")
	if err != nil {
		return nil, nil, err
	}
	w := NewWriter(f, o)
	for _, e := range spec.points {
		if err := w.Add(e.key, e.value); err != nil {
			w.Abort()
			return nil, nil, fmt.Errorf("Add(%s): %w", e.key, err)
		}
	}
	for _, rt := range spec.tombs {
		if err := w.AddRangeDel(rt.Start, rt.End, rt.Seq); err != nil {
			w.Abort()
			return nil, nil, fmt.Errorf("AddRangeDel: %w", err)
		}
	}
	m, err := w.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("Close: %w", err)
	}
	f, err = fs.Open("t.sst")
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	data := make([]byte, m.Size)
	if _, err := f.ReadAt(data, 0); err != nil && len(data) > 0 {
		return nil, nil, err
	}
	return data, m, nil
}

func readFile(t testing.TB, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && len(b) > 0 {
		t.Fatal(err)
	}
	return b
}

// openBytes opens a table held in memory.
func openBytes(data []byte, o ReaderOptions) (*Reader, error) {
	return Open(vfs.NewMemFile(data), "t.sst", int64(len(data)), o)
}

func mustOpen(t testing.TB, data []byte, o ReaderOptions) *Reader {
	t.Helper()
	r, err := openBytes(data, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return r
}

// modelGet is Get's specification over the sorted entries.
func modelGet(points []kv, ukey []byte, snap uint64) (kv, bool) {
	return modelGetCmp(base.DefaultComparer, points, ukey, snap)
}

// modelGetCmp is modelGet over entries sorted under comparer c (resolved).
func modelGetCmp(c *base.Comparer, points []kv, ukey []byte, snap uint64) (kv, bool) {
	i := sort.Search(len(points), func(i int) bool { return c.Compare(points[i].key.UserKey, ukey) >= 0 })
	for ; i < len(points) && c.Equal(points[i].key.UserKey, ukey); i++ {
		if points[i].key.SeqNum() <= snap {
			return points[i], true
		}
	}
	return kv{}, false
}

// inBoundsCmp reports whether a user key is within [lower, upper) under
// comparer c (resolved).
func inBoundsCmp(c *base.Comparer, k, lower, upper []byte) bool {
	return (lower == nil || c.Compare(k, lower) >= 0) && (upper == nil || c.Compare(k, upper) < 0)
}

// collect iterates forward (or backward) and returns the entries.
func collect(t testing.TB, it base.InternalIterator, forward bool) []kv {
	t.Helper()
	var out []kv
	var ok bool
	if forward {
		ok = it.First()
	} else {
		ok = it.Last()
	}
	for ; ok; ok = step(it, forward) {
		out = append(out, kv{it.Key().Clone(), bytes.Clone(it.Value())})
	}
	if err := it.Error(); err != nil {
		t.Fatalf("iteration error: %v", err)
	}
	if !forward {
		slices.Reverse(out)
	}
	return out
}

func step(it base.InternalIterator, forward bool) bool {
	if forward {
		return it.Next()
	}
	return it.Prev()
}

func equalKVs(a, b []kv) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d entries, want %d", len(a), len(b))
	}
	for i := range a {
		if base.CompareInternal(a[i].key, b[i].key) != 0 || a[i].key.Trailer != b[i].key.Trailer || !bytes.Equal(a[i].value, b[i].value) {
			return fmt.Errorf("entry %d: got %s=%q, want %s=%q", i, a[i].key, a[i].value, b[i].key, b[i].value)
		}
	}
	return nil
}

func newTestCache() *cache.Cache { return cache.New(8 << 20) }

func testFS() vfs.FS { return vfs.NewMem() }
