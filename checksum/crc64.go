package checksum

import (
	"encoding/binary"
	"math/bits"
	"sync"
)

// CRC-64/Jones as Redis and Valkey use it: reflected polynomial
// 0x95ac9329ac4bc9b5, init 0, no final xor (CRC-64/REDIS in the catalogue;
// check value for "123456789" is 0xe9c6d914c4b8d9ca). See the package
// documentation for how it is made fast and for the arithmetic behind it.
//
// Representation used throughout this file ("reflected"): a 64-bit value v
// stands for the polynomial whose coefficient of x^(63-i) is bit i of v, so
// bit 0 is the highest-degree term. This is the order in which a reflected
// CRC consumes the bits of each byte (least significant bit first), so a CRC
// register, a little-endian load of 8 message bytes and a table entry are
// all the same kind of number. xpow(e) below is x^e mod P in this form.

// JonesPoly is the reflected Jones polynomial.
const JonesPoly = 0x95ac9329ac4bc9b5

// crc64Tab[k][b] is the CRC (init 0) of the byte b followed by k zero bytes.
// Row 0 is the classic byte-at-a-time table; rows 1..7 let the slicing-by-8
// loop retire 8 bytes with 8 independent lookups. 16 KiB, built at init in a
// few microseconds.
var crc64Tab = func() *[8][256]uint64 {
	var t [8][256]uint64
	for i := range t[0] {
		c := uint64(i)
		for j := 0; j < 8; j++ {
			c = mulx(c)
		}
		t[0][i] = c
	}
	for k := 1; k < 8; k++ {
		for i := range t[k] {
			c := t[k-1][i]
			t[k][i] = t[0][byte(c)] ^ c>>8
		}
	}
	return &t
}()

// mulx returns v·x mod P: one bit of CRC shift with no data.
func mulx(v uint64) uint64 {
	return v>>1 ^ JonesPoly&-(v&1)
}

// xpow returns x^e mod P (reflected), for small e, by repeated mulx.
func xpow(e int) uint64 {
	v := uint64(1) << 63 // x^0
	for ; e > 0; e-- {
		v = mulx(v)
	}
	return v
}

// UpdateCRC64 continues a running CRC-64/Jones with p: UpdateCRC64(0, p) is
// the CRC of p, and UpdateCRC64(UpdateCRC64(0, a), b) that of a ‖ b. The
// result is bit-for-bit Valkey's crc64(crc, p, len(p)).
//
// It never allocates, and on amd64 CPUs with PCLMULQDQ and SSE4.1 it folds 64
// bytes per iteration with carry-less multiplies; elsewhere it runs three
// slicing-by-8 lanes in parallel (see the package documentation).
func UpdateCRC64(crc uint64, p []byte) uint64 {
	if useCLMUL && len(p) >= clmulMinLen {
		return updateCRC64CLMUL(crc, p)
	}
	return updateCRC64Generic(crc, p)
}

// updateCRC64Generic is the portable implementation of UpdateCRC64.
func updateCRC64Generic(crc uint64, p []byte) uint64 {
	return updateCRC64Lanes(crc, p)
}

// updateCRC64Slice8 is slicing-by-8: one 8-byte load, eight table lookups
// that do not depend on each other, then single bytes for the tail.
func updateCRC64Slice8(crc uint64, p []byte) uint64 {
	t := crc64Tab
	for len(p) >= 8 {
		crc ^= binary.LittleEndian.Uint64(p)
		crc = t[7][byte(crc)] ^ t[6][byte(crc>>8)] ^ t[5][byte(crc>>16)] ^ t[4][byte(crc>>24)] ^
			t[3][byte(crc>>32)] ^ t[2][byte(crc>>40)] ^ t[1][byte(crc>>48)] ^ t[0][crc>>56]
		p = p[8:]
	}
	for _, b := range p {
		crc = t[0][byte(crc)^b] ^ crc>>8
	}
	return crc
}

// crc64Byte advances crc over a single byte.
func crc64Byte(crc uint64, b byte) uint64 {
	return crc64Tab[0][byte(crc)^b] ^ crc>>8
}

// crc64LaneBlock is the number of bytes each of the three lanes of the
// pure-Go path consumes per round.
const crc64LaneBlock = 256

// updateCRC64Lanes runs three slicing-by-8 CRCs over consecutive
// crc64LaneBlock-byte blocks in one loop, so their table lookups overlap in
// the CPU instead of waiting for each other, then merges them:
// CRC(a‖b‖c) = shift(CRC(a), 2B) ⊕ shift(CRC(b), B) ⊕ CRC(c) for B-byte
// blocks. The two shifts are fixed, so they are table lookups (8 each, see
// laneShift) rather than general combines. The < 3B-byte tail goes through
// plain slicing-by-8.
func updateCRC64Lanes(crc uint64, p []byte) uint64 {
	const blk = crc64LaneBlock
	if len(p) < 3*blk {
		return updateCRC64Slice8(crc, p)
	}
	s := getLaneShift()
	t := crc64Tab
	for len(p) >= 3*blk {
		a := (*[blk]byte)(p[:blk])
		b := (*[blk]byte)(p[blk : 2*blk])
		c := (*[blk]byte)(p[2*blk : 3*blk])
		crcA, crcB, crcC := crc, uint64(0), uint64(0)
		for i := 0; i < blk; i += 8 {
			crcA ^= binary.LittleEndian.Uint64(a[i : i+8])
			crcB ^= binary.LittleEndian.Uint64(b[i : i+8])
			crcC ^= binary.LittleEndian.Uint64(c[i : i+8])
			crcA = t[7][byte(crcA)] ^ t[6][byte(crcA>>8)] ^ t[5][byte(crcA>>16)] ^ t[4][byte(crcA>>24)] ^
				t[3][byte(crcA>>32)] ^ t[2][byte(crcA>>40)] ^ t[1][byte(crcA>>48)] ^ t[0][crcA>>56]
			crcB = t[7][byte(crcB)] ^ t[6][byte(crcB>>8)] ^ t[5][byte(crcB>>16)] ^ t[4][byte(crcB>>24)] ^
				t[3][byte(crcB>>32)] ^ t[2][byte(crcB>>40)] ^ t[1][byte(crcB>>48)] ^ t[0][crcB>>56]
			crcC = t[7][byte(crcC)] ^ t[6][byte(crcC>>8)] ^ t[5][byte(crcC>>16)] ^ t[4][byte(crcC>>24)] ^
				t[3][byte(crcC>>32)] ^ t[2][byte(crcC>>40)] ^ t[1][byte(crcC>>48)] ^ t[0][crcC>>56]
		}
		crc = s.by2.apply(crcA) ^ s.by1.apply(crcB) ^ crcC
		p = p[3*blk:]
	}
	return updateCRC64Slice8(crc, p)
}

// shiftOp is the linear map "shift a CRC over a fixed number of zero bytes"
// as a slicing table: op[k][b] is the image of the value whose only non-zero
// byte is byte k, equal to b.
type shiftOp [8][256]uint64

func (op *shiftOp) apply(c uint64) uint64 {
	return op[0][byte(c)] ^ op[1][byte(c>>8)] ^ op[2][byte(c>>16)] ^ op[3][byte(c>>24)] ^
		op[4][byte(c>>32)] ^ op[5][byte(c>>40)] ^ op[6][byte(c>>48)] ^ op[7][c>>56]
}

// makeShiftOp builds the table for a shift over n > 0 zero bytes from the
// images of the 64 single bits (by linearity).
func makeShiftOp(n int) *shiftOp {
	var op shiftOp
	k := xpow(8*n - 1) // gfMul multiplies by an extra x
	for byteIdx := 0; byteIdx < 8; byteIdx++ {
		for b := 1; b < 256; b++ {
			if b&(b-1) == 0 {
				op[byteIdx][b] = gfMul(uint64(b)<<(8*byteIdx), k)
			} else {
				op[byteIdx][b] = op[byteIdx][b&(b-1)] ^ op[byteIdx][b&-b]
			}
		}
	}
	return &op
}

var (
	laneShiftOnce sync.Once
	laneShift     struct{ by1, by2 *shiftOp }
)

// getLaneShift builds the two merge tables of updateCRC64Lanes on first use
// (32 KiB; only the pure-Go path needs them).
func getLaneShift() *struct{ by1, by2 *shiftOp } {
	laneShiftOnce.Do(func() {
		laneShift.by1 = makeShiftOp(crc64LaneBlock)
		laneShift.by2 = makeShiftOp(2 * crc64LaneBlock)
	})
	return &laneShift
}

// CombineCRC64 returns the CRC of A ‖ B from crcA = CRC(A), crcB = CRC(B)
// and lenB = len(B), without looking at the bytes: it shifts crcA over lenB
// zero bytes (a multiplication by x^(8·lenB) mod P) and adds crcB. It works
// for UpdateCRC64 values (init 0) and equally for the inverted form Sum64
// uses, because the two conventions differ by terms that cancel.
//
// lenB = 0 gives crcA ^ crcB (crcB is then the CRC of nothing, 0). A
// negative lenB is a programming error and panics. The cost is independent
// of lenB's magnitude: one carry-less fold per non-zero hex digit of lenB
// plus one reduction, on tables built once on first use.
func CombineCRC64(crcA, crcB uint64, lenB int64) uint64 {
	if lenB < 0 {
		panic("checksum: CombineCRC64 with negative length")
	}
	if useCLMUL {
		return combineCRC64CLMUL(crcA, crcB, uint64(lenB))
	}
	return combineCRC64Generic(crcA, crcB, uint64(lenB))
}

// shiftTab[i][d] holds, for e = 8·d·16^i bits (d·16^i zero bytes), the pair
// {xpow(e+63), xpow(e-1)}: the two constants that fold a 128-bit value
// forward by e bits with two carry-less multiplies (see the package
// documentation for why the exponents are off by one). Index d = 0 is
// unused. 16 positions cover every non-negative int64 length.
type shiftTable [16][16][2]uint64

var (
	shiftTabOnce sync.Once
	shiftTab     *shiftTable
)

// getShiftTable builds shiftTab on first use: 480 software multiplies,
// about 20 µs, paid once per process and only if Combine is used.
func getShiftTable() *shiftTable {
	shiftTabOnce.Do(func() {
		var t shiftTable
		x63 := xpow(63)
		base := xpow(8 - 1) // one zero byte, minus the multiply's extra x
		for i := range t {
			cur := base
			for d := 1; d < 16; d++ {
				if d > 1 {
					cur = gfMul(cur, base)
				}
				t[i][d][1] = cur
				t[i][d][0] = gfMul(cur, x63)
			}
			base = gfMul(cur, base) // 16·base: the next hex digit
		}
		shiftTab = &t
	})
	return shiftTab
}

// red4[t] is t·x^4 mod P for t < 16 in the low (highest-degree) bits: what
// the 4 bits shifted out by v>>4 contribute when v is multiplied by x^4.
var red4 = func() (r [16]uint64) {
	for i := range r {
		c := uint64(i)
		for j := 0; j < 4; j++ {
			c = mulx(c)
		}
		r[i] = c
	}
	return r
}()

// gfMul returns a·b·x mod P (reflected). The extra factor x is what a
// hardware carry-less multiply of two reflected operands produces, so the
// constants in shiftTab serve both this function and the PCLMULQDQ path.
// It is Horner's rule over the 16 nibbles of b, highest degree first, with a
// 16-entry table of multiples of a·x.
func gfMul(a, b uint64) uint64 {
	var m [16]uint64
	a1 := mulx(a) // a·x: nibble bit 3 (x^0 within the nibble)
	a2 := mulx(a1)
	a3 := mulx(a2)
	a4 := mulx(a3) // nibble bit 0 (x^3 within the nibble)
	m[1], m[2], m[4], m[8] = a4, a3, a2, a1
	for j := 3; j < 16; j++ {
		if j&(j-1) != 0 {
			m[j] = m[j&(j-1)] ^ m[j&-j]
		}
	}
	var acc uint64
	for i := 0; i < 64; i += 4 {
		acc = acc>>4 ^ red4[acc&15] ^ m[b>>i&15]
	}
	return acc
}

// combineCRC64Generic is CombineCRC64 in pure Go: one gfMul per non-zero
// hex digit of lenB.
func combineCRC64Generic(crcA, crcB, lenB uint64) uint64 {
	if lenB == 0 || crcA == 0 {
		return crcA ^ crcB
	}
	t := getShiftTable()
	for i := 0; lenB != 0; i, lenB = i+1, lenB>>4 {
		if d := lenB & 15; d != 0 {
			crcA = gfMul(crcA, t[i][d][1])
		}
	}
	return crcA ^ crcB
}

// barrettMu returns μ' = floor(x^128 / P) - x^64, reflected: the Barrett
// constant that turns a 128-bit remainder into a 64-bit one with two
// carry-less multiplies. Computed by long division in normal bit order.
func barrettMu() uint64 {
	pn := bits.Reverse64(JonesPoly) // P - x^64, normal order
	// r is the window of the running remainder's coefficients of degrees
	// 127..64 (bit j is x^(64+j)); x^128 - x^64·P leaves pn there.
	r := pn
	var q uint64 // quotient bits x^63..x^0 (the x^64 term is implicit)
	for d := 127; d >= 64; d-- {
		if r>>(d-64)&1 == 1 {
			q |= 1 << (d - 64)
			r ^= 1 << (d - 64)
			r ^= pn >> (128 - d)
		}
	}
	return bits.Reverse64(q)
}
