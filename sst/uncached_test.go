package sst

import (
	"math/rand/v2"
	"testing"

	"github.com/vigildb/vigil/checksum"
)

// TestUncachedIterBypassesCache: the compaction iterator reads the same
// entries as a cached one, leaves the cache untouched, and is immune to a
// bit flip in a cached copy of a block (it reads the file).
func TestUncachedIterBypassesCache(t *testing.T) {
	spec := genSpec(rand.New(rand.NewPCG(7, 7)), 2000, 20, 100, 0)
	data, _ := build(t, testWriterOptions(checksum.XXH3, SnappyCompression, 512), spec)
	c := newTestCache()
	r := mustOpen(t, data, ReaderOptions{Cache: wrapCache(c), CacheID: 1, ParanoidCacheChecks: true})
	defer r.Close()
	want := collect(t, r.NewIter(nil, nil), true) // fills the cache
	before := c.Metrics()
	if before.Count == 0 {
		t.Fatal("cached scan cached nothing")
	}
	// Flip a bit in every cached block.
	c.ForEachBlock(func(b []byte) { b[len(b)/2] ^= 1 })
	got := collect(t, r.NewUncachedIter(), true)
	if err := equalKVs(got, want); err != nil {
		t.Fatal(err)
	}
	after := c.Metrics()
	if after.Hits != before.Hits || after.Misses != before.Misses || after.Count != before.Count {
		t.Fatalf("uncached scan touched the cache: %+v -> %+v", before, after)
	}
	// A cached read now reports the flips instead of returning them.
	it := r.NewIter(nil, nil)
	for ok := it.First(); ok; ok = it.Next() {
	}
	if it.Error() == nil {
		t.Fatal("cached scan over flipped blocks reported nothing")
	}
	it.Close()
}
