package checksum

// clmulConsts are the constants of the carry-less-multiply (PCLMULQDQ) CRC
// path, all derived at init from JonesPoly (nothing here is a magic number).
// The layout is read by crc64_amd64.s; keep the offsets in sync.
//
// A fold pair {xpow(D+63), xpow(D-1)} moves a 128-bit chunk D bits forward:
// the chunk's high-degree half is multiplied by the first, its low-degree
// half by the second. The exponents are one less than the distance because a
// carry-less multiply of two reflected operands yields the product times x.
type clmulConsts struct {
	fold512 [2]uint64 // offset 0: four accumulators, 64 bytes apart
	fold384 [2]uint64 // offset 16: merging accumulator 0 into 3
	fold256 [2]uint64 // offset 32: merging accumulator 1 into 3
	fold128 [2]uint64 // offset 48: merging accumulator 2 into 3, and the 16-byte loop
	x127    uint64    // offset 64: xpow(127), folds the last chunk's high half onto x^128
	mu      uint64    // offset 72: Barrett constant floor(x^128/P) - x^64
	poly    uint64    // offset 80: P - x^64, i.e. JonesPoly
}

func foldPair(d int) [2]uint64 { return [2]uint64{xpow(d + 63), xpow(d - 1)} }

var clmulK = clmulConsts{
	fold512: foldPair(512),
	fold384: foldPair(384),
	fold256: foldPair(256),
	fold128: foldPair(128),
	x127:    xpow(127),
	mu:      barrettMu(),
	poly:    JonesPoly,
}
