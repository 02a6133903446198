package bench

import (
	"encoding/binary"
	"math/rand/v2"
)

// MakeKey writes db_bench's key for index v into dst (len = key size): the
// first min(keySize, 8) bytes are v big-endian, the rest is ASCII '0'. So
// the default 16-byte key is BE64(v) + "00000000", as in db_bench's
// GenerateKeyFromInt, and key order equals index order.
func MakeKey(dst []byte, v uint64) []byte {
	var be [8]byte
	binary.BigEndian.PutUint64(be[:], v)
	n := copy(dst, be[:])
	for i := n; i < len(dst); i++ {
		dst[i] = '0'
	}
	return dst
}

// ValueGenerator hands out values like db_bench's RandomGenerator: windows of
// a 1 MiB buffer made of 100-byte pieces, each half random bytes and half a
// repeat of them (compressible to the given ratio), from a fixed seed — so
// every engine and every run gets the same values.
type ValueGenerator struct {
	data []byte
	pos  int
}

// NewValueGenerator builds the buffer for values of up to maxSize bytes
// with the given compression ratio (db_bench's --compression_ratio, 0.5).
func NewValueGenerator(ratio float64, maxSize int) *ValueGenerator {
	rng := rand.New(rand.NewPCG(301, 301))
	size := max(1<<20, maxSize)
	g := &ValueGenerator{data: make([]byte, 0, size+100)}
	for len(g.data) < size {
		g.data = append(g.data, compressible(rng, ratio, 100)...)
	}
	return g
}

// compressible returns n bytes whose first ratio*n are random printable
// characters and the rest repeats them.
func compressible(rng *rand.Rand, ratio float64, n int) []byte {
	raw := max(1, int(float64(n)*ratio))
	piece := make([]byte, raw)
	for i := range piece {
		piece[i] = byte(' ' + rng.IntN(95))
	}
	out := make([]byte, 0, n)
	for len(out) < n {
		out = append(out, piece[:min(raw, n-len(out))]...)
	}
	return out
}

// Next returns the next value of n bytes (aliasing the buffer).
func (g *ValueGenerator) Next(n int) []byte {
	if g.pos+n > len(g.data) {
		g.pos = 0
	}
	v := g.data[g.pos : g.pos+n]
	g.pos += n
	return v
}
