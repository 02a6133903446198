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
				undo = undo || !it.(*tableIter).bi.cacheKeys
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
