package sst

import (
	"bytes"
	"errors"
	"runtime/debug"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/cache"
	"github.com/vigildb/vigil/internal/invariants"
)

// churn evicts every block of table id from c and refills c with other
// blocks, so that freed memory is reused if anything freed it too early.
func churn(c *cache.Cache, id uint64) {
	c.EvictFile(id)
	for i := uint64(0); i < 4000; i++ {
		h := c.Alloc(1000 + int(i%3000))
		d := h.Data()
		for j := range d {
			d[j] = 0xcc
		}
		c.Set(1<<40+i, 0, h, 0)
		h.Release()
	}
}

// TestBlockRefsAreExact: Gets, GetRefs, iterators (both directions, seeks,
// bounds), paranoid-check failures and uncached scans leave no reference
// behind: once the reader is closed nothing of the cache is in use.
func TestBlockRefsAreExact(t *testing.T) {
	spec := fixedSpec(3000)
	data, _ := build(t, testWriterOptions(checksum.XXH3, SnappyCompression, 512), spec)
	c := cache.New(64 << 10) // small: blocks are evicted while held
	r := mustOpen(t, data, ReaderOptions{Cache: wrapCache(c), CacheID: 1, ParanoidCacheChecks: true})
	rng := newRand(3)
	for round := 0; round < 3; round++ {
		for i := 0; i < 500; i++ {
			e := spec.points[rng.IntN(len(spec.points))]
			v, _, _, found, ref, err := r.GetRef(e.key.UserKey, base.SeqNumMax)
			if err != nil || !found || !bytes.Equal(v, e.value) {
				t.Fatalf("GetRef(%s) = %q %v %v", e.key, v, found, err)
			}
			ref.Release()
			if v, _, _, found, err := r.Get(e.key.UserKey, base.SeqNumMax); err != nil || !found || !bytes.Equal(v, e.value) {
				t.Fatalf("Get(%s) = %q %v %v", e.key, v, found, err)
			}
			if _, _, _, found, ref, _ := r.GetRef(append(bytes.Clone(e.key.UserKey), 0), base.SeqNumMax); found || ref.Valid() {
				t.Fatal("absent key found, or its block held")
			}
		}
		for _, b := range [][2][]byte{{nil, nil}, {[]byte("key00100"), []byte("key02000")}} {
			it := r.NewIter(b[0], b[1])
			collect(t, it, true)
			collect(t, it, false)
			it.SeekGE([]byte("key01500"))
			it.SeekLT([]byte("key00500"))
			it.Close()
		}
		uit := r.NewUncachedIter()
		collect(t, uit, true)
		uit.Close()
		// Flip bits: detected reads Delete the bad blocks and release them.
		c.ForEachBlock(func(d []byte) { d[len(d)/2] ^= 1 })
		for _, e := range spec.points { // each damaged block is found and dropped
			if _, _, _, _, err := r.Get(e.key.UserKey, base.SeqNumMax); err != nil && !errors.Is(err, base.ErrCorruption) {
				t.Fatal(err)
			}
		}
		it := r.NewIter(nil, nil)
		for ok := it.First(); ok; ok = it.Next() {
		}
		it.Close()
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if m := c.Metrics(); m.Count != 0 || m.InUse != 0 {
		t.Fatalf("after closing the reader: %+v", m)
	}
}

// TestHeldBlocksSurviveEviction: an iterator's current block and a GetRef
// value stay intact when their blocks are evicted and the cache's memory is
// reused, and the iterator carries on correctly.
func TestHeldBlocksSurviveEviction(t *testing.T) {
	spec := fixedSpec(2000)
	data, _ := build(t, testWriterOptions(checksum.XXH3, SnappyCompression, 1024), spec)
	c := cache.New(1 << 20)
	r := mustOpen(t, data, ReaderOptions{Cache: wrapCache(c), CacheID: 1, ParanoidCacheChecks: true})
	defer r.Close()

	e := spec.points[777]
	v, _, _, found, ref, err := r.GetRef(e.key.UserKey, base.SeqNumMax)
	if err != nil || !found {
		t.Fatal(found, err)
	}
	it := r.NewIter(nil, nil)
	var got []kv
	ok := it.First()
	for ; ok && len(got) < 5; ok = it.Next() {
		got = append(got, kv{it.Key().Clone(), bytes.Clone(it.Value())})
	}
	key, val := it.Key().UserKey, it.Value() // alias the held block
	wantKey, wantVal := bytes.Clone(key), bytes.Clone(val)
	churn(c, 1)
	if !bytes.Equal(v, e.value) {
		t.Fatalf("GetRef value changed after eviction: %q", v)
	}
	ref.Release()
	if !bytes.Equal(val, wantVal) || !bytes.Equal(it.Key().UserKey, wantKey) {
		t.Fatal("iterator's current entry changed after eviction")
	}
	for ; ok; ok = it.Next() {
		got = append(got, kv{it.Key().Clone(), bytes.Clone(it.Value())})
		if len(got)%100 == 0 {
			churn(c, 1)
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if err := equalKVs(got, spec.points); err != nil {
		t.Fatal(err)
	}
}

// TestUseAfterReleaseFaults: in invariants builds, reading a GetRef value
// after Release, or an iterator's value after Close, once the block is
// evicted, faults instead of returning recycled memory.
func TestUseAfterReleaseFaults(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("needs -tags invariants")
	}
	spec := fixedSpec(2000)
	data, _ := build(t, testWriterOptions(checksum.XXH3, SnappyCompression, 4096), spec)
	c := cache.New(1 << 20)
	r := mustOpen(t, data, ReaderOptions{Cache: wrapCache(c), CacheID: 1})
	defer r.Close()
	keep := c.Alloc(4200) // keeps the chunks of the blocks' class mapped
	defer keep.Release()

	v, _, _, found, ref, err := r.GetRef(spec.points[100].key.UserKey, base.SeqNumMax)
	if err != nil || !found || len(v) == 0 {
		t.Fatal(found, err)
	}
	c.EvictFile(1)
	_ = v[0] // still held: fine
	ref.Release()
	if !faults(func() { sink = v[0] }) {
		t.Fatal("reading a released GetRef value did not fault")
	}

	it := r.NewIter(nil, nil)
	it.SeekGE(spec.points[1000].key.UserKey)
	val := it.Value()
	c.EvictFile(1)
	sink = val[0]
	it.Close()
	if !faults(func() { sink = val[0] }) {
		t.Fatal("reading an iterator's value after Close did not fault")
	}
}

var sink byte

func faults(fn func()) (faulted bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() { faulted = recover() != nil }()
	fn()
	return false
}

// BenchmarkGetMiss: point reads through a cache far smaller than the table,
// so nearly every Get reads, verifies and decompresses a block and inserts
// it into the cache, evicting (and freeing) another.
func BenchmarkGetMiss(b *testing.B) {
	data := benchData(b, 10)
	r := mustOpen(b, data, ReaderOptions{Cache: NewCache(2 << 20), CacheID: 1})
	defer r.Close()
	rng := newRand(5)
	b.ReportAllocs()
	for b.Loop() {
		_, _, _, found, ref, err := r.GetRef(benchKey(rng.IntN(benchN)), base.SeqNumMax)
		if err != nil || !found {
			b.Fatal(found, err)
		}
		ref.Release()
	}
}
