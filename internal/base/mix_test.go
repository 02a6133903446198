package base

import (
	"math/rand/v2"
	"testing"
)

// TestFmix64Bijective spot-checks that Fmix64 is invertible: it is a
// composition of xor-shifts and odd multiplications, so undoing each step
// recovers the input.
func TestFmix64Bijective(t *testing.T) {
	unxorshift := func(k uint64) uint64 { return k ^ k>>33 } // 33 >= 64/2: one step inverts
	// inv is the inverse of an odd m mod 2^64 (Newton iteration).
	inv := func(m uint64) uint64 {
		x := m
		for i := 0; i < 6; i++ {
			x *= 2 - m*x
		}
		return x
	}
	r := rand.New(rand.NewPCG(29, 30))
	for i := 0; i < 1000; i++ {
		k := r.Uint64()
		h := Fmix64(k)
		h = unxorshift(h)
		h *= inv(0xc4ceb9fe1a85ec53)
		h = unxorshift(h)
		h *= inv(0xff51afd7ed558ccd)
		h = unxorshift(h)
		if h != k {
			t.Fatalf("Fmix64 not inverted for %#x", k)
		}
	}
}
