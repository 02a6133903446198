package checksum

import (
	"encoding/binary"
	"math/bits"
)

// XXH32 (xxHash, 32-bit), seed 0 in all of Vigil's uses. Neither xxhash
// module Vigil depends on provides it, and RocksDB's kxxHash needs it.

const (
	xxPrime32_1 uint32 = 2654435761
	xxPrime32_2 uint32 = 2246822519
	xxPrime32_3 uint32 = 3266489917
	xxPrime32_4 uint32 = 668265263
	xxPrime32_5 uint32 = 374761393
)

func xxRound32(acc, input uint32) uint32 {
	acc += input * xxPrime32_2
	acc = bits.RotateLeft32(acc, 13)
	return acc * xxPrime32_1
}

// XXH32 returns the 32-bit xxHash of p with the given seed.
func XXH32(p []byte, seed uint32) uint32 { return xxh32(p, seed) }

// xxh32Acc is the four-lane accumulator of XXH32's 16-byte stripes.
type xxh32Acc struct{ v1, v2, v3, v4 uint32 }

func newXXH32Acc(seed uint32) xxh32Acc {
	return xxh32Acc{seed + xxPrime32_1 + xxPrime32_2, seed + xxPrime32_2, seed, seed - xxPrime32_1}
}

// stripes consumes every full 16-byte stripe of p and returns the tail.
func (a *xxh32Acc) stripes(p []byte) []byte {
	if useXXH32SSE41 && len(p) >= xxh32AsmMinLen {
		n := len(p) &^ 15
		xxh32StripesSSE41(a, p[:n])
		return p[n:]
	}
	return a.stripesGeneric(p)
}

// stripesGeneric is stripes in portable Go.
func (a *xxh32Acc) stripesGeneric(p []byte) []byte {
	v1, v2, v3, v4 := a.v1, a.v2, a.v3, a.v4
	for len(p) >= 16 {
		v1 = xxRound32(v1, binary.LittleEndian.Uint32(p[0:]))
		v2 = xxRound32(v2, binary.LittleEndian.Uint32(p[4:]))
		v3 = xxRound32(v3, binary.LittleEndian.Uint32(p[8:]))
		v4 = xxRound32(v4, binary.LittleEndian.Uint32(p[12:]))
		p = p[16:]
	}
	a.v1, a.v2, a.v3, a.v4 = v1, v2, v3, v4
	return p
}

func (a *xxh32Acc) merge() uint32 {
	return bits.RotateLeft32(a.v1, 1) + bits.RotateLeft32(a.v2, 7) + bits.RotateLeft32(a.v3, 12) + bits.RotateLeft32(a.v4, 18)
}

func xxh32(p []byte, seed uint32) uint32 {
	n := len(p)
	var h uint32
	if n >= 16 {
		a := newXXH32Acc(seed)
		p = a.stripes(p)
		h = a.merge()
	} else {
		h = seed + xxPrime32_5
	}
	return xxh32Tail(h+uint32(n), p)
}

// xxh32Tail consumes the < 16 remaining bytes q and applies the avalanche.
func xxh32Tail(h uint32, q []byte) uint32 {
	for len(q) >= 4 {
		h += binary.LittleEndian.Uint32(q) * xxPrime32_3
		h = bits.RotateLeft32(h, 17) * xxPrime32_4
		q = q[4:]
	}
	for _, b := range q {
		h += uint32(b) * xxPrime32_5
		h = bits.RotateLeft32(h, 11) * xxPrime32_1
	}
	h ^= h >> 15
	h *= xxPrime32_2
	h ^= h >> 13
	h *= xxPrime32_3
	h ^= h >> 16
	return h
}

// xxh32WithLastByte is XXH32(data ‖ last, 0) without copying data: the
// stripes are read in place, and only the < 16-byte tail plus last is
// assembled in a stack buffer.
func xxh32WithLastByte(data []byte, last byte) uint32 {
	n := len(data) + 1
	var buf [16]byte
	var h uint32
	p := data
	if n >= 16 {
		a := newXXH32Acc(0)
		p = a.stripes(p)
		if len(p) == 15 {
			// data's remainder and last make one more full stripe.
			copy(buf[:], p)
			buf[15] = last
			a.stripes(buf[:])
			return xxh32Tail(a.merge()+uint32(n), nil)
		}
		h = a.merge()
	} else {
		h = xxPrime32_5
	}
	m := copy(buf[:], p)
	buf[m] = last
	return xxh32Tail(h+uint32(n), buf[:m+1])
}

// xxh32Stream is XXH32 with seed 0 over data written in pieces; sum equals
// XXH32(all bytes written, 0). Only full stripes are hashed as they come,
// a partial one waits in buf.
type xxh32Stream struct {
	acc   xxh32Acc
	buf   [16]byte
	nbuf  int
	total uint64
}

func (s *xxh32Stream) reset() { *s = xxh32Stream{acc: newXXH32Acc(0)} }

func (s *xxh32Stream) write(p []byte) {
	s.total += uint64(len(p))
	if s.nbuf > 0 {
		n := copy(s.buf[s.nbuf:], p)
		s.nbuf += n
		p = p[n:]
		if s.nbuf < len(s.buf) {
			return
		}
		s.acc.stripes(s.buf[:])
		s.nbuf = 0
	}
	p = s.acc.stripes(p)
	s.nbuf = copy(s.buf[:], p)
}

func (s *xxh32Stream) sum() uint32 {
	h := xxPrime32_5 // seed 0
	if s.total >= 16 {
		h = s.acc.merge()
	}
	return xxh32Tail(h+uint32(s.total), s.buf[:s.nbuf])
}
