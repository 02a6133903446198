package checksum

import (
	"math/rand/v2"
	"testing"
)

func TestXXH32Seeded(t *testing.T) {
	// From a from-the-spec Python implementation (see golden_test.go).
	if got := XXH32([]byte("abc"), 1); got != 0xaa3da8ff {
		t.Errorf("XXH32(abc, 1) = %#x, want 0xaa3da8ff", got)
	}
	b := make([]byte, 100)
	for i := range b {
		b[i] = byte(i)
	}
	if got := XXH32(b, 0x9747b28c); got != 0x6bcb75c0 {
		t.Errorf("XXH32(0..99, 0x9747b28c) = %#x, want 0x6bcb75c0", got)
	}
}

// TestXXH32WithLastByte: the in-place form equals hashing the appended
// buffer for every length 0..100 (every tail size and the stripe the last
// byte completes), a few larger ones, every last-byte value class.
func TestXXH32WithLastByte(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	buf := randBytes(r, 1100)
	lengths := []int{}
	for n := 0; n <= 100; n++ {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 127, 128, 255, 1023, 1024, 1039)
	for _, n := range lengths {
		for _, last := range []byte{0, 1, 0x7f, 0xff, byte(r.Uint32())} {
			off := r.IntN(16)
			data := buf[off : off+n]
			want := XXH32(append(append([]byte(nil), data...), last), 0)
			if got := xxh32WithLastByte(data, last); got != want {
				t.Fatalf("len %d, last %#x: %#x, want %#x", n, last, got, want)
			}
		}
	}
}

// TestXXH32StripeLoops: the assembly stripe loop (where there is one)
// equals the portable one for every stripe count up to 80 (the four-stripe
// loop, the one-stripe loop and their mix), from random accumulators.
func TestXXH32StripeLoops(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	buf := randBytes(r, 80*16+16)
	for stripes := 1; stripes <= 80; stripes++ {
		for trial := 0; trial < 4; trial++ {
			off := r.IntN(16)
			p := buf[off : off+16*stripes]
			a := xxh32Acc{r.Uint32(), r.Uint32(), r.Uint32(), r.Uint32()}
			b := a
			a.stripesGeneric(p)
			xxh32StripesSSE41(&b, p)
			if a != b {
				t.Fatalf("%d stripes at offset %d: asm %+v, generic %+v", stripes, off, b, a)
			}
		}
	}
}

// TestXXH32DispatchMatchesGeneric: XXH32 through the dispatching stripes
// equals a portable-only computation for every length 0..300.
func TestXXH32DispatchMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	buf := randBytes(r, 300)
	for n := 0; n <= 300; n++ {
		p := buf[:n]
		want := xxh32Generic(p, 0x1234)
		if got := XXH32(p, 0x1234); got != want {
			t.Fatalf("len %d: %#x, want %#x", n, got, want)
		}
	}
}

// xxh32Generic is xxh32 with the portable stripe loop only.
func xxh32Generic(p []byte, seed uint32) uint32 {
	n := len(p)
	h := seed + xxPrime32_5
	if n >= 16 {
		a := newXXH32Acc(seed)
		p = a.stripesGeneric(p)
		h = a.merge()
	}
	return xxh32Tail(h+uint32(n), p)
}
