package sst

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// sampleShapes are key generators for the index samples' tests: the
// shapes users have (the prefix the samples skip, and what follows it).
var sampleShapes = map[string]func(rng *rand.Rand, i int) []byte{
	"alphabet": func(rng *rand.Rand, _ int) []byte { // shared prefixes, 0x00 and 0xff
		k := make([]byte, 1+rng.IntN(12))
		for j := range k {
			k[j] = "abcdxyz\x00\xff"[rng.IntN(9)]
		}
		return k
	},
	"decimal": func(rng *rand.Rand, _ int) []byte { return fmt.Appendf(nil, "%016d", rng.IntN(1e6)) },
	"prefixed": func(rng *rand.Rand, _ int) []byte {
		return binary.BigEndian.AppendUint64([]byte("/tbl/53/1/ab"), rng.Uint64N(1e5))
	},
	"hashed": func(rng *rand.Rand, _ int) []byte {
		k := make([]byte, 33)
		k[0] = 'h'
		for j := 1; j < len(k); j++ {
			k[j] = byte(rng.Uint32())
		}
		return k
	},
	// Keys that share their first 8 bytes after the prefix: every sample
	// ties, and the separators decide.
	"long-ties": func(rng *rand.Rand, _ int) []byte {
		return fmt.Appendf(nil, "p/%c/00000000000/%06d", "ab"[rng.IntN(2)], rng.IntN(1e5))
	},
	"varlen": func(rng *rand.Rand, _ int) []byte {
		return fmt.Appendf(nil, "user:%d:%s", rng.IntN(1e5), []string{"n", "email", "x"}[rng.IntN(3)])
	},
}

// sampledTable builds a table of n distinct keys of the given shape with
// small blocks, opens it and returns it with its sorted user keys.
func sampledTable(t *testing.T, shape string, n int, seed uint64) (*Reader, [][]byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	gen := sampleShapes[shape]
	seen := map[string]bool{}
	var keys [][]byte
	for i := 0; len(keys) < n && i < 20*n; i++ {
		if k := gen(rng, i); !seen[string(k)] {
			seen[string(k)] = true
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b []byte) int { return base.DefaultComparer.Compare(a, b) })
	var spec tableSpec
	for i, k := range keys {
		spec.points = append(spec.points, kv{base.MakeInternalKey(k, uint64(100+i), base.KindSet), []byte("v")})
	}
	data, _ := build(t, testWriterOptions(checksum.CRC32c, NoCompression, 64), spec)
	r := mustOpen(t, data, ReaderOptions{})
	t.Cleanup(func() { r.Close() })
	return r, keys
}

// probes returns search keys for an index over keys: each key, keys just
// around each (a byte more, a byte less, cut short), and random ones
// (which mostly do not share the index's prefix).
func probes(rng *rand.Rand, keys [][]byte) [][]byte {
	out := [][]byte{nil, {}, {0}, {0xff, 0xff, 0xff}}
	for _, k := range keys {
		out = append(out, k, append(slices.Clip(k), 0), append(slices.Clip(k), 0xff))
		if len(k) > 0 {
			out = append(out, k[:len(k)-1], k[:rng.IntN(len(k))])
			less := slices.Clone(k)
			less[len(less)-1]--
			out = append(out, less)
		}
	}
	for range 200 {
		k := make([]byte, rng.IntN(20))
		for j := range k {
			k[j] = byte(rng.Uint32())
		}
		out = append(out, k)
	}
	return out
}

// TestIndexSamplesAgree checks that a search narrowed by the samples finds
// what a search of the whole index does, and that the range the samples
// give holds it, for every key shape, trailers
// on both sides of a separator's, and keys in and out of the table's
// prefix.
func TestIndexSamplesAgree(t *testing.T) {
	for shape := range sampleShapes {
		t.Run(shape, func(t *testing.T) {
			r, keys := sampledTable(t, shape, 3000, 1)
			x := &r.index
			if x.samples.abbrs == nil {
				t.Fatalf("no samples for an index of %d entries", x.len())
			}
			rng := rand.New(rand.NewPCG(2, 3))
			for _, k := range probes(rng, keys) {
				for _, tr := range []uint64{0, base.MakeTrailer(1500, base.KindSet), iterSearchTrailer, base.MakeTrailer(base.SeqNumMax, base.KindMax)} {
					want := x.searchIn(0, x.len(), k, tr)
					if got := x.search(k, tr); got != want {
						t.Fatalf("search(%q, %#x) = %d, the whole index says %d (prefix %q)", k, tr, got, want, x.samples.prefix)
					}
					// The samples' own range must hold the answer: the
					// search's check would mend a wrong one, slowly.
					if lo, hi := x.samples.narrow(k, x.len()); want < lo || want > hi {
						t.Fatalf("narrow(%q) = [%d, %d), the answer is %d", k, lo, hi, want)
					}
				}
			}
		})
	}
}

// TestIndexSamplesCorrupted checks the samples' invariant: corrupted in
// memory, they cost time, never a wrong answer. Each round flips bits in
// the samples, or overwrites them with garbage or with a constant, and
// every search must still agree with the whole index's; Verify must
// report it.
func TestIndexSamplesCorrupted(t *testing.T) {
	r, keys := sampledTable(t, "decimal", 3000, 4)
	x := &r.index
	rng := rand.New(rand.NewPCG(5, 6))
	ps := probes(rng, keys)
	orig := slices.Clone(x.samples.abbrs)
	for round := range 30 {
		a := x.samples.abbrs
		copy(a, orig)
		switch round % 3 {
		case 0:
			for range 1 + rng.IntN(4) {
				a[rng.IntN(len(a))] ^= 1 << rng.IntN(8)
			}
		case 1:
			for i := range a {
				a[i] = byte(rng.Uint32())
			}
		case 2:
			v := rng.Uint64()
			for j := 0; j < len(a); j += 8 {
				binary.LittleEndian.PutUint64(a[j:], v)
			}
		}
		for _, k := range ps {
			if got, want := x.search(k, iterSearchTrailer), x.searchIn(0, x.len(), k, iterSearchTrailer); got != want {
				t.Fatalf("round %d: search(%q) = %d with corrupted samples, the whole index says %d", round, k, got, want)
			}
		}
		if err := r.Verify(); err == nil {
			t.Fatalf("round %d: Verify passed with corrupted samples", round)
		}
	}
	copy(x.samples.abbrs, orig)
	if err := r.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestIndexSamplesShape checks what the samples hold: the prefix every
// separator shares, and one abbreviation per indexSampleStride entries.
func TestIndexSamplesShape(t *testing.T) {
	r, _ := sampledTable(t, "prefixed", 2000, 7)
	x := &r.index
	if got := string(x.samples.prefix); len(got) < len("/tbl/53/1/ab") || got[:12] != "/tbl/53/1/ab" {
		t.Fatalf("prefix %q, want it to start with the keys' shared 12 bytes", got)
	}
	n := x.len()
	if got, want := len(x.samples.abbrs)/8, (n+indexSampleStride-1)/indexSampleStride; got != want {
		t.Fatalf("%d samples for %d entries, want %d", got, n, want)
	}
	// A table too small for samples, and a bytewise search without them.
	small, _ := sampledTable(t, "prefixed", 2, 7)
	if small.index.samples.abbrs != nil {
		t.Fatalf("a %d-entry index has samples", small.index.len())
	}
}
