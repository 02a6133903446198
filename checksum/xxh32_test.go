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
