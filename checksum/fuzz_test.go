package checksum

import (
	"testing"
)

// FuzzCRC64 checks every CRC implementation against hash/crc64 on arbitrary
// data, initial values and split points (streaming and CombineCRC64).
func FuzzCRC64(f *testing.F) {
	f.Add([]byte("123456789"), uint64(0), uint16(4))
	f.Add(benchData(1000), uint64(1)<<63, uint16(999))
	f.Fuzz(func(t *testing.T, p []byte, init uint64, split uint16) {
		want := refCRC64(init, p)
		for name, impl := range crcImpls() {
			if got := impl(init, p); got != want {
				t.Fatalf("%s(%#x, len %d) = %#x, want %#x", name, init, len(p), got, want)
			}
		}
		k := int(split) % (len(p) + 1)
		if got := UpdateCRC64(UpdateCRC64(init, p[:k]), p[k:]); got != want {
			t.Fatalf("split at %d: %#x, want %#x", k, got, want)
		}
		a, b := UpdateCRC64(init, p[:k]), UpdateCRC64(0, p[k:])
		for name, comb := range combineImpls() {
			if got := comb(a, b, int64(len(p)-k)); got != want {
				t.Fatalf("%s at %d: %#x, want %#x", name, k, got, want)
			}
		}
	})
}

// FuzzBlock checks the in-place trailer checksum of every type against
// hashing data ‖ lastByte with the reference libraries.
func FuzzBlock(f *testing.F) {
	f.Add([]byte("This is a short block!"), byte(1))
	f.Add(make([]byte, 15), byte(0))
	f.Add(benchData(300), byte(7))
	f.Fuzz(func(t *testing.T, data []byte, last byte) {
		for typ := Type(0); typ < NumTypes; typ++ {
			want := refBlock(typ, data, last)
			if got := Block(typ, data, last); got != want {
				t.Fatalf("Block(%s, len %d, %#x) = %#x, want %#x", typ, len(data), last, got, want)
			}
		}
	})
}
