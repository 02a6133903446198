package checksum

import (
	"io"
	"math/rand/v2"
	"testing"
)

var _ io.Writer = (*Digest)(nil)

// TestDigestMatchesSum64 writes random data in random pieces (including
// empty ones and pieces straddling every internal buffer boundary) and
// checks the digest against the one-shot Sum64 after every write.
func TestDigestMatchesSum64(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	data := randBytes(r, 20000)
	for typ := Type(0); typ <= NumTypes; typ++ { // NumTypes: an invalid type
		d := NewDigest(typ)
		for trial := 0; trial < 20; trial++ {
			d.Reset(typ)
			if d.Type() != typ.Resolve() {
				t.Fatalf("Type() = %v", d.Type())
			}
			if got, want := d.Sum64(), Sum64(typ, nil); got != want {
				t.Fatalf("%s: empty digest %#x, want %#x", typ, got, want)
			}
			n := 0
			limit := r.IntN(len(data) + 1)
			for n < limit {
				k := r.IntN(min(limit-n, []int{1, 17, 70, 1100, 5000}[r.IntN(5)]) + 1)
				if r.IntN(10) == 0 {
					k = 0
				}
				if w, err := d.Write(data[n : n+k]); w != k || err != nil {
					t.Fatalf("Write = %d, %v", w, err)
				}
				n += k
				if got, want := d.Sum64(), Sum64(typ, data[:n]); got != want {
					t.Fatalf("%s after %d bytes: digest %#x, Sum64 %#x", typ, n, got, want)
				}
			}
		}
	}
}

func TestDigestNoAllocs(t *testing.T) {
	data := benchData(3000)
	for typ := Type(0); typ < NumTypes; typ++ {
		d := NewDigest(typ)
		allocs := testing.AllocsPerRun(20, func() {
			d.Reset(typ)
			_, _ = d.Write(data[:7])
			_, _ = d.Write(data[7:])
			sink64 = d.Sum64()
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per run", typ, allocs)
		}
	}
}

// TestZeroDigestIsXXH3: like every zero Type, a zero Digest means the
// default, XXH3, and computes it without a Reset.
func TestZeroDigestIsXXH3(t *testing.T) {
	var d Digest
	data := benchData(3000)
	_, _ = d.Write(data[:5])
	_, _ = d.Write(data[5:])
	if d.Type() != XXH3 || d.Sum64() != Sum64(XXH3, data) {
		t.Fatal("zero Digest is not an XXH3 digest")
	}
}
