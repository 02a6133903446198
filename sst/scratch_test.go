package sst

import (
	"fmt"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// TestScratchReuse: writers one after another reuse the buffers their
// tables end in (scratchPool), and a reused buffer carries nothing of the
// table before: after a table of 20,000 keys, one of 50 other keys has
// its own index (every key found) and its own filter (the first table's
// keys all but rejected; with the first filter's bits left in, most
// would pass).
func TestScratchReuse(t *testing.T) {
	spec := func(prefix string, n int) tableSpec {
		var s tableSpec
		for i := range n {
			k := base.MakeInternalKey(fmt.Appendf(nil, "%s%08d", prefix, i), 1, base.KindSet)
			s.points = append(s.points, kv{key: k, value: []byte("v")})
		}
		return s
	}
	o := testWriterOptions(checksum.XXH3, SnappyCompression, 256)
	o.BloomBitsPerKey = 10
	big, small := spec("big-", 20000), spec("small-", 50)
	for round := range 3 {
		build(t, o, big)
		data, _ := build(t, o, small)
		r := mustOpen(t, data, ReaderOptions{FileNum: 1})
		for _, e := range small.points {
			checkGetCmp(t, r, small.points, e.key.UserKey, base.SeqNumMax)
		}
		passed := 0
		for _, e := range big.points {
			if r.MayContain(e.key.UserKey) {
				passed++
			}
		}
		// 50 keys in a filter of 10 bits each: about 1 % false positives.
		if passed > len(big.points)/20 {
			t.Fatalf("round %d: the small table's filter passes %d of the %d keys of the table before it", round, passed, len(big.points))
		}
		r.Close()
	}
}
