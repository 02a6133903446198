package sst

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/cache"
)

// lookbackSpec is n entries whose keys share a prefix of prefixLen bytes
// (a long one pushes the reverse cache into its undo mode), with values
// that differ from one entry to the next.
func lookbackSpec(n, prefixLen int) tableSpec {
	prefix := bytes.Repeat([]byte("p"), prefixLen)
	var s tableSpec
	for i := 0; i < n; i++ {
		k := append(bytes.Clone(prefix), fmt.Sprintf("%06d", i)...)
		s.points = append(s.points, kv{base.MakeInternalKey(k, 100, base.KindSet), []byte(fmt.Sprintf("value-%06d", i))})
	}
	return s
}

// TestPrevLookback: with a block cache, the key and value a Prev stepped
// from stay intact until the next positioning call, across restart
// intervals (the reverse cache's refill, in both of its modes) and blocks
// (evicted, their memory reused by churn), as base.InternalIterator
// promises and the DB's reverse iteration relies on.
func TestPrevLookback(t *testing.T) {
	for _, tc := range []struct {
		name      string
		prefixLen int
		blockSize int
	}{{"whole keys", 4, 1024}, {"undo bytes", 3000, 64 << 10}} {
		t.Run(tc.name, func(t *testing.T) {
			spec := lookbackSpec(600, tc.prefixLen)
			data, _ := build(t, testWriterOptions(checksum.XXH3, SnappyCompression, tc.blockSize), spec)
			c := cache.New(1 << 20)
			r := mustOpen(t, data, ReaderOptions{Cache: wrapCache(c), CacheID: 1})
			defer r.Close()
			it := r.NewIter(nil, nil)
			defer it.Close()
			n := len(spec.points) - 1
			ok := it.Last()
			undo := false
			for ; ok; n-- {
				if want := spec.points[n]; !bytes.Equal(it.Key().UserKey, want.key.UserKey) || !bytes.Equal(it.Value(), want.value) {
					t.Fatalf("entry %d: %q = %q, want %q = %q", n, it.Key().UserKey, it.Value(), want.key.UserKey, want.value)
				}
				key, val := it.Key().UserKey, it.Value()
				ok = it.Prev()
				undo = undo || !it.(*Iter).bi.cacheKeys
				if n%50 == 0 {
					churn(c, 1) // the block left is evicted; its memory reused if freed
				}
				if !bytes.Equal(key, spec.points[n].key.UserKey) || !bytes.Equal(val, spec.points[n].value) {
					t.Fatalf("after Prev from entry %d, the key and value it left read %q = %q", n, key, val)
				}
			}
			if err := it.Error(); err != nil || n != -1 {
				t.Fatalf("stopped at %d: %v", n, err)
			}
			if undo != (tc.prefixLen > 1000) {
				t.Fatalf("reverse cache in undo mode: %v", undo)
			}
		})
	}
}

// TestPrevLookbackAcrossEmptyBlock: a Prev that crosses an empty data
// block (our writer makes none; the reader accepts them) keeps the block
// it stepped from, not the empty one, for the lookback.
func TestPrevLookbackAcrossEmptyBlock(t *testing.T) {
	ik := func(k string) []byte { return base.MakeInternalKey([]byte(k), 1, base.KindSet).Append(nil) }
	valC := bytes.Repeat([]byte("C"), 200)
	blk := func(k string, v []byte) []byte { return finishRawBlock(appendRawEntry(nil, 0, ik(k), v), 0) }
	c := tableCraft{ct: checksum.XXH3, dataRaw: [][]byte{blk("a", []byte("va")), finishRawBlock(nil), blk("c", valC)},
		index: func(hs []handle) []byte {
			var b []byte
			var rs []uint32
			for i, s := range []string{"a", "b", "c"} {
				rs = append(rs, uint32(len(b)))
				b = appendRawEntry(b, 0, ik(s), appendHandle(nil, hs[i]))
			}
			return finishRawBlock(b, rs...)
		}}
	c.props.NumEntries = 2
	c.props.SmallestKey = base.MakeInternalKey([]byte("a"), 1, base.KindSet)
	c.props.LargestKey = base.MakeInternalKey([]byte("c"), 1, base.KindSet)
	data := c.build()
	cc := cache.New(1 << 20)
	r := mustOpen(t, data, ReaderOptions{Cache: wrapCache(cc), CacheID: 1})
	defer r.Close()
	it := r.NewIter(nil, nil)
	defer it.Close()
	if !it.Last() || string(it.Key().UserKey) != "c" {
		t.Fatalf("Last: %v", it.Key())
	}
	key, val := it.Key().UserKey, it.Value()
	if !it.Prev() || string(it.Key().UserKey) != "a" {
		t.Fatalf("Prev: %v %v", it.Key(), it.Error())
	}
	churn(cc, 1)
	if string(key) != "c" || !bytes.Equal(val, valC) {
		t.Fatalf("after Prev across an empty block, the entry it left reads %q = %q", key, val[:min(len(val), 16)])
	}
}
