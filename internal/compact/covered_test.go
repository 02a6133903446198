package compact

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/rangedel"
)

// TestCoveredCursor: the filter's cursor over the tombstone stacks answers
// as rangedel.CoveredInStripe's binary search does for keys in ascending
// order, with and without snapshots, among overlapping tombstones, and
// for keys before, between, inside and after them.
func TestCoveredCursor(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	key := func(i int) []byte { return fmt.Appendf(nil, "k%04d", i) }
	for round := range 200 {
		var tombs []rangedel.Tombstone
		for range rng.IntN(12) {
			a := rng.IntN(300)
			b := a + 1 + rng.IntN(60)
			tombs = append(tombs, rangedel.Tombstone{Start: key(a), End: key(b), Seq: 1 + rng.Uint64N(100)})
		}
		var snaps []uint64
		for s := uint64(0); s < 100; s += 1 + rng.Uint64N(40) {
			if s > 0 {
				snaps = append(snaps, s)
			}
		}
		f, _, _ := NewFilter(base.DefaultComparer, snaps, 100, tombs, nil, nil)
		for i := 0; i < 400; i += 1 + rng.IntN(4) {
			k := key(i)
			for range 1 + rng.IntN(3) { // versions of one key, ascending too
				seq := 1 + rng.Uint64N(100)
				want := rangedel.CoveredInStripe(base.DefaultComparer, f.stacks, k, seq, f.stripe)
				if got := f.covered(k, seq); got != want {
					t.Fatalf("round %d: covered(%s, %d) = %v, the binary search says %v (stacks %v)", round, k, seq, got, want, f.stacks)
				}
			}
		}
	}
}

// BenchmarkCovered: a raft log's flush, in the small: 180k ascending keys
// looked up among the stacks of 25 range deletions of the log's prefix,
// by the filter's cursor and by the binary search it replaced.
func BenchmarkCovered(b *testing.B) {
	const n = 180_000
	key := func(i int) []byte { return fmt.Appendf(nil, "raft/l%016d", i) }
	var tombs []rangedel.Tombstone
	for i := range 25 {
		tombs = append(tombs, rangedel.Tombstone{Start: key(0), End: key((i + 1) * n / 26), Seq: uint64(1_000_000 + i)})
	}
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = key(i)
	}
	for _, mode := range []string{"cursor", "search"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				f, _, _ := NewFilter(base.DefaultComparer, nil, 2_000_000, tombs, nil, nil)
				for i, k := range keys {
					if mode == "cursor" {
						f.covered(k, uint64(i))
					} else {
						rangedel.CoveredInStripe(f.cmp, f.stacks, k, uint64(i), f.stripe)
					}
				}
			}
		})
	}
}
