package bench

import (
	"encoding/binary"
	"sync"
)

// MakeKey writes db_bench's key for index v into dst (len = key size), as
// db_bench's GenerateKeyFromInt does: the low min(keySize, 8) bytes of v,
// big-endian, then ASCII '0' up to the key size. So the default 16-byte key
// is BE64(v) + "00000000", and key order equals index order.
func MakeKey(dst []byte, v uint64) []byte {
	var be [8]byte
	binary.BigEndian.PutUint64(be[:], v)
	n := min(len(dst), 8)
	copy(dst, be[8-n:])
	for i := n; i < len(dst); i++ {
		dst[i] = '0'
	}
	return dst
}

// random64 is the 64-bit Mersenne Twister (MT19937-64, Matsumoto and
// Nishimura 2004) with its standard one-word seeding, the generator behind
// db_bench's per-thread Random64 (std::mt19937_64). With it, and with each
// benchmark drawing numbers in the order db_bench does, kvbench reads and
// writes the very keys db_bench does for the same --seed, so found counts
// can be compared line by line.
type random64 struct {
	mt  [mtN]uint64
	idx int
}

const (
	mtN       = 312
	mtM       = 156
	mtMatrixA = 0xB5026F5AA96619E9
	mtUpper   = 0xFFFFFFFF80000000
	mtLower   = 0x7FFFFFFF
)

func newRandom64(seed uint64) *random64 {
	r := &random64{idx: mtN}
	r.mt[0] = seed
	for i := 1; i < mtN; i++ {
		r.mt[i] = 6364136223846793005*(r.mt[i-1]^(r.mt[i-1]>>62)) + uint64(i)
	}
	return r
}

// Next returns the next 64-bit output.
func (r *random64) Next() uint64 {
	if r.idx >= mtN {
		r.twist()
	}
	x := r.mt[r.idx]
	r.idx++
	x ^= (x >> 29) & 0x5555555555555555
	x ^= (x << 17) & 0x71D67FFFEDA60000
	x ^= (x << 37) & 0xFFF7EEE000000000
	x ^= x >> 43
	return x
}

func (r *random64) twist() {
	mag := [2]uint64{0, mtMatrixA}
	i := 0
	for ; i < mtN-mtM; i++ {
		x := r.mt[i]&mtUpper | r.mt[i+1]&mtLower
		r.mt[i] = r.mt[i+mtM] ^ x>>1 ^ mag[x&1]
	}
	for ; i < mtN-1; i++ {
		x := r.mt[i]&mtUpper | r.mt[i+1]&mtLower
		r.mt[i] = r.mt[i+mtM-mtN] ^ x>>1 ^ mag[x&1]
	}
	x := r.mt[mtN-1]&mtUpper | r.mt[0]&mtLower
	r.mt[mtN-1] = r.mt[mtM-1] ^ x>>1 ^ mag[x&1]
	r.idx = 0
}

// minStd is the Park–Miller "minimal standard" generator (x = x·16807 mod
// 2³¹−1), which db_bench's value generator draws from with seed 301.
type minStd struct{ x uint64 }

func newMinStd(seed uint32) *minStd {
	s := uint64(seed & 0x7fffffff)
	if s == 0 || s == 0x7fffffff {
		s = 1
	}
	return &minStd{s}
}

func (r *minStd) next() uint32 {
	r.x = r.x * 16807 % 0x7fffffff
	return uint32(r.x)
}

// ValueGenerator hands out values like db_bench's RandomGenerator: windows of
// a buffer of at least 1 MiB made of 100-byte pieces, each a random run of
// printable characters repeated to fill it (so it compresses to the given
// ratio), drawn from the same fixed-seed generator as db_bench's. Every
// engine and run gets the same values, and the same as db_bench's.
type ValueGenerator struct {
	data []byte
	pos  int
}

// valueBuffers caches the (read-only) buffers by ratio and size: building
// one takes milliseconds, and every benchmark thread starts a new
// generator, as db_bench does.
var valueBuffers sync.Map // valueKey -> []byte

type valueKey struct {
	ratio float64
	size  int
}

// NewValueGenerator builds the buffer for values of up to maxSize bytes
// with the given compression ratio (db_bench's --compression_ratio, 0.5).
func NewValueGenerator(ratio float64, maxSize int) *ValueGenerator {
	size := max(1<<20, maxSize)
	k := valueKey{ratio, size}
	if b, ok := valueBuffers.Load(k); ok {
		return &ValueGenerator{data: b.([]byte)}
	}
	rng := newMinStd(301)
	data := make([]byte, 0, size+100)
	for len(data) < size {
		data = appendCompressible(data, rng, ratio, 100)
	}
	b, _ := valueBuffers.LoadOrStore(k, data)
	return &ValueGenerator{data: b.([]byte)}
}

// appendCompressible appends n bytes whose first int(n·ratio) (at least
// one) are random printable characters, repeated to fill the n.
func appendCompressible(dst []byte, rng *minStd, ratio float64, n int) []byte {
	raw := max(1, int(float64(n)*ratio))
	start := len(dst)
	for i := 0; i < raw; i++ {
		dst = append(dst, byte(' '+rng.next()%95))
	}
	for len(dst)-start < n {
		dst = append(dst, dst[start:start+min(raw, n-(len(dst)-start))]...)
	}
	return dst
}

// Next returns the next value of n bytes (aliasing the buffer, which
// callers must not modify).
func (g *ValueGenerator) Next(n int) []byte {
	if g.pos+n > len(g.data) {
		g.pos = 0
	}
	v := g.data[g.pos : g.pos+n]
	g.pos += n
	return v
}
