package checksum

import (
	"hash/crc64"
	"math/bits"
	"math/rand/v2"
	"testing"
)

var stdJones = crc64.MakeTable(JonesPoly)

// refCRC64 is the Valkey CRC computed by the standard library: hash/crc64
// inverts before and after, so invert around it to get init 0, no xorout.
func refCRC64(crc uint64, p []byte) uint64 { return ^crc64.Update(^crc, stdJones, p) }

// bitwiseCRC64 is the definition: one bit at a time, no tables.
func bitwiseCRC64(crc uint64, p []byte) uint64 {
	for _, b := range p {
		crc ^= uint64(b)
		for i := 0; i < 8; i++ {
			if crc&1 != 0 {
				crc = crc>>1 ^ JonesPoly
			} else {
				crc >>= 1
			}
		}
	}
	return crc
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// crcImpls are all the ways this package computes the CRC, by name.
func crcImpls() map[string]func(uint64, []byte) uint64 {
	m := map[string]func(uint64, []byte) uint64{
		"UpdateCRC64": UpdateCRC64,
		"generic":     updateCRC64Generic, // three lanes from 768 bytes
		"slice8":      updateCRC64Slice8,
	}
	if useCLMUL {
		m["clmul"] = func(c uint64, p []byte) uint64 {
			if len(p) < 16 {
				return updateCRC64Slice8(c, p)
			}
			return updateCRC64CLMUL(c, p)
		}
	}
	return m
}

func TestCRC64CheckValue(t *testing.T) {
	for name, f := range crcImpls() {
		if got := f(0, []byte("123456789")); got != 0xe9c6d914c4b8d9ca {
			t.Errorf("%s(\"123456789\") = %#x, want 0xe9c6d914c4b8d9ca", name, got)
		}
	}
	if got := bitwiseCRC64(0, []byte("123456789")); got != 0xe9c6d914c4b8d9ca {
		t.Errorf("bitwise reference = %#x", got)
	}
}

func TestCLMULAvailable(t *testing.T) {
	// Not an assertion (the fallback must work everywhere), but make it
	// visible in -v output which paths this run covered.
	t.Logf("useCLMUL = %v", useCLMUL)
}

// TestCRC64AllLengths compares every implementation with hash/crc64 for all
// lengths 0..2000 at random alignments and random initial CRCs.
func TestCRC64AllLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := randBytes(r, 2000+64)
	impls := crcImpls()
	for n := 0; n <= 2000; n++ {
		off := r.IntN(64)
		p := buf[off : off+n]
		init := r.Uint64()
		if n%3 == 0 {
			init = 0
		}
		want := refCRC64(init, p)
		for name, f := range impls {
			if got := f(init, p); got != want {
				t.Fatalf("%s(%#x, len %d, off %d) = %#x, want %#x", name, init, n, off, got, want)
			}
		}
	}
}

func TestCRC64LargeAndBitwise(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	sizes := []int{2047, 2048, 2049, 4096, 65536 + 13, 1 << 20}
	for _, n := range sizes {
		p := randBytes(r, n)
		want := refCRC64(0, p)
		for name, f := range crcImpls() {
			if got := f(0, p); got != want {
				t.Fatalf("%s(len %d) = %#x, want %#x", name, n, got, want)
			}
		}
	}
	p := randBytes(r, 300)
	if got, want := UpdateCRC64(7, p), bitwiseCRC64(7, p); got != want {
		t.Fatalf("UpdateCRC64 = %#x, bitwise = %#x", got, want)
	}
}

// TestCRC64Streaming checks that continuing a running CRC over random
// splits equals one call.
func TestCRC64Streaming(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	p := randBytes(r, 5000)
	want := UpdateCRC64(0, p)
	for i := 0; i < 200; i++ {
		k := r.IntN(len(p) + 1)
		if got := UpdateCRC64(UpdateCRC64(0, p[:k]), p[k:]); got != want {
			t.Fatalf("split at %d: %#x, want %#x", k, got, want)
		}
	}
}

func combineImpls() map[string]func(a, b uint64, n int64) uint64 {
	m := map[string]func(a, b uint64, n int64) uint64{
		"CombineCRC64": CombineCRC64,
		"generic":      func(a, b uint64, n int64) uint64 { return combineCRC64Generic(a, b, uint64(n)) },
	}
	if useCLMUL {
		m["clmul"] = func(a, b uint64, n int64) uint64 { return combineCRC64CLMUL(a, b, uint64(n)) }
	}
	return m
}

func TestCombineCRC64(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	p := randBytes(r, 1<<16)
	lens := []int{0, 1, 7, 8, 9, 15, 16, 17, 255, 256, 4095, 4096, 65535, 1 << 16}
	for i := 0; i < 100; i++ {
		lens = append(lens, r.IntN(len(p)+1))
	}
	for _, lenB := range lens {
		a := p[:r.IntN(len(p)-lenB+1)]
		b := p[len(a) : len(a)+lenB]
		want := UpdateCRC64(0, p[:len(a)+lenB])
		crcA, crcB := UpdateCRC64(0, a), UpdateCRC64(0, b)
		for name, f := range combineImpls() {
			if got := f(crcA, crcB, int64(lenB)); got != want {
				t.Fatalf("%s(lenA %d, lenB %d) = %#x, want %#x", name, len(a), lenB, got, want)
			}
		}
		// The inverted form (Sum64) combines with the same formula.
		sa, sb := Sum64(CRC64, a), Sum64(CRC64, b)
		if got, want := CombineCRC64(sa, sb, int64(lenB)), Sum64(CRC64, p[:len(a)+lenB]); got != want {
			t.Fatalf("inverted form (lenA %d, lenB %d) = %#x, want %#x", len(a), lenB, got, want)
		}
	}
}

// TestCombineCRC64HugeLengths checks lengths far beyond what can be hashed,
// against shifting by zero bytes computed another way: x^(8n) by repeated
// squaring with the bitwise multiply.
func TestCombineCRC64HugeLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for i := 0; i < 200; i++ {
		n := r.Uint64() >> (1 + r.IntN(63)) // all magnitudes, < 2^63
		if i == 0 {
			n = 1<<63 - 1
		}
		crcA, crcB := r.Uint64(), r.Uint64()
		want := slowMulMod(crcA, slowXPow8(n)) ^ crcB
		for name, f := range combineImpls() {
			if got := f(crcA, crcB, int64(n)); got != want {
				t.Fatalf("%s(%#x, %#x, %d) = %#x, want %#x", name, crcA, crcB, n, got, want)
			}
		}
	}
}

func TestCombineCRC64NegativePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("CombineCRC64 with lenB < 0 did not panic")
		}
	}()
	CombineCRC64(1, 2, -1)
}

// slowMulMod is a·b mod P (reflected), bit by bit: the textbook definition
// gfMul is checked against (gfMul has an extra factor x).
func slowMulMod(a, b uint64) uint64 {
	var acc uint64
	// b's bit i is the coefficient of x^(63-i): Horner from x^63 down.
	for i := 0; i < 64; i++ {
		acc = mulx(acc)
		if b>>i&1 != 0 {
			acc ^= a
		}
	}
	return acc
}

// slowXPow8 is x^(8n) mod P by square-and-multiply.
func slowXPow8(n uint64) uint64 {
	result := uint64(1) << 63 // 1
	base := xpow(8)
	for ; n != 0; n >>= 1 {
		if n&1 != 0 {
			result = slowMulMod(result, base)
		}
		base = slowMulMod(base, base)
	}
	return result
}

func TestGFMul(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 1000; i++ {
		a, b := r.Uint64(), r.Uint64()
		if got, want := gfMul(a, b), mulx(slowMulMod(a, b)); got != want {
			t.Fatalf("gfMul(%#x, %#x) = %#x, want %#x", a, b, got, want)
		}
	}
	if got := slowMulMod(xpow(5), xpow(70)); got != xpow(75) {
		t.Fatalf("x^5·x^70 = %#x, want %#x", got, xpow(75))
	}
}

// clmul64 is a software carry-less multiply: what PCLMULQDQ computes.
func clmul64(a, b uint64) (hi, lo uint64) {
	for i := 0; i < 64; i++ {
		if b>>i&1 != 0 {
			lo ^= a << i
			if i > 0 {
				hi ^= a >> (64 - i)
			}
		}
	}
	return hi, lo
}

// foldEmulated mirrors crc64_amd64.s step by step with clmul64, so the
// constants and the algebra are checked on every platform, and a failure
// of the assembly can be told apart from a failure of the math.
// len(p) must be a non-zero multiple of 16.
func foldEmulated(crc uint64, p []byte, k *clmulConsts) uint64 {
	type x128 struct{ lo, hi uint64 }
	load := func(b []byte) x128 {
		var v x128
		for i := 7; i >= 0; i-- {
			v.lo = v.lo<<8 | uint64(b[i])
			v.hi = v.hi<<8 | uint64(b[8+i])
		}
		return v
	}
	fold := func(v x128, kp [2]uint64) x128 {
		h1, l1 := clmul64(v.lo, kp[0])
		h2, l2 := clmul64(v.hi, kp[1])
		return x128{l1 ^ l2, h1 ^ h2}
	}
	acc := load(p)
	acc.lo ^= crc
	for p = p[16:]; len(p) > 0; p = p[16:] {
		n := load(p)
		f := fold(acc, k.fold128)
		acc = x128{f.lo ^ n.lo, f.hi ^ n.hi}
	}
	// reduce
	h, l := clmul64(acc.lo, k.x127)
	y := x128{l ^ acc.hi, h}
	// Barrett
	_, ql := clmul64(y.lo, k.mu)
	q := y.lo ^ ql<<1
	zh, zl := clmul64(q, k.poly)
	return y.hi ^ (zh<<1 | zl>>63)
}

func TestFoldEmulated(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for n := 16; n <= 512; n += 16 {
		p := randBytes(r, n)
		init := r.Uint64()
		if got, want := foldEmulated(init, p, &clmulK), refCRC64(init, p); got != want {
			t.Fatalf("len %d: emulated fold = %#x, want %#x", n, got, want)
		}
	}
}

func TestCLMULConstants(t *testing.T) {
	// The Barrett constant satisfies its definition: x^128 = μ·P + r with
	// deg r < 64, i.e. (x^64 + μ')(x^64 + P') has no terms of degree 64..127
	// other than those of x^128. In normal order: μ'·x^64 + P'·x^64 + μ'·P'
	// must vanish at degrees >= 64.
	mu := bits.Reverse64(clmulK.mu)
	pn := bits.Reverse64(JonesPoly)
	hi, _ := clmul64(mu, pn)
	if mu^pn^hi != 0 {
		t.Fatalf("Barrett constant wrong: μ'=%#x", mu)
	}
	if clmulK.fold128 != [2]uint64{xpow(191), xpow(127)} || clmulK.x127 != xpow(127) {
		t.Fatal("fold constants")
	}
	if xpow(0) != 1<<63 || xpow(63) != 1 || xpow(64) != JonesPoly {
		t.Fatal("xpow")
	}
}
