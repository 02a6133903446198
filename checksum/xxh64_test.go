package checksum

import (
	"math/rand/v2"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestXXH64MatchesCespare: Sum64 and Block for XXHash64 equal
// github.com/cespare/xxhash/v2's XXH64 for every length 0..600 (the data,
// and the data followed by the trailer's byte), whichever stripe loop this
// CPU runs.
func TestXXH64MatchesCespare(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	buf := randBytes(r, 601)
	for n := 0; n <= 600; n++ {
		p := buf[:n]
		if got, want := Sum64(XXHash64, p), xxhash.Sum64(p); got != want {
			t.Fatalf("Sum64 len %d: %#x, want %#x", n, got, want)
		}
		last := buf[n]
		if got, want := Block(XXHash64, p, last), uint32(xxhash.Sum64(buf[:n+1])); got != want {
			t.Fatalf("Block len %d: %#x, want %#x", n, got, want)
		}
		if got, want := xxh64Generic(p), xxhash.Sum64(p); got != want {
			t.Fatalf("portable len %d: %#x, want %#x", n, got, want)
		}
	}
}

// TestXXH64StripeLoops: the assembly stripe loop (where there is one)
// equals the portable one for every stripe count up to 40 (the four-stripe
// loop, the one-stripe loop and their mix), from random accumulators.
func TestXXH64StripeLoops(t *testing.T) {
	if !useXXH64AVX512 {
		t.Skip("no AVX-512 (DQ, VL) here: the portable loop is the only one")
	}
	r := rand.New(rand.NewPCG(13, 14))
	buf := randBytes(r, 40*32+32)
	for stripes := 1; stripes <= 40; stripes++ {
		for trial := 0; trial < 4; trial++ {
			off := r.IntN(32)
			p := buf[off : off+32*stripes]
			a := xxh64Acc{r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64()}
			b := a
			a.stripesGeneric(p)
			xxh64StripesAVX512(&b, p)
			if a != b {
				t.Fatalf("%d stripes at offset %d: asm %+v, generic %+v", stripes, off, b, a)
			}
		}
	}
}

// xxh64Generic is XXH64(p, 0) with the portable stripe loop only.
func xxh64Generic(p []byte) uint64 {
	n := len(p)
	h := xxPrime64_5
	if n >= 32 {
		a := newXXH64Acc()
		p = a.stripesGeneric(p)
		h = a.merge()
	}
	return xxh64Tail(h+uint64(n), p)
}
