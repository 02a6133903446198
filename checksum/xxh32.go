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

func xxh32(p []byte, seed uint32) uint32 {
	n := len(p)
	var h uint32
	if n >= 16 {
		v1 := seed + xxPrime32_1 + xxPrime32_2
		v2 := seed + xxPrime32_2
		v3 := seed
		v4 := seed - xxPrime32_1
		for len(p) >= 16 {
			v1 = xxRound32(v1, binary.LittleEndian.Uint32(p[0:]))
			v2 = xxRound32(v2, binary.LittleEndian.Uint32(p[4:]))
			v3 = xxRound32(v3, binary.LittleEndian.Uint32(p[8:]))
			v4 = xxRound32(v4, binary.LittleEndian.Uint32(p[12:]))
			p = p[16:]
		}
		h = bits.RotateLeft32(v1, 1) + bits.RotateLeft32(v2, 7) + bits.RotateLeft32(v3, 12) + bits.RotateLeft32(v4, 18)
	} else {
		h = seed + xxPrime32_5
	}
	h += uint32(n)
	return xxh32Finish(h, p, nil)
}

// xxh32Finish consumes the < 16 remaining bytes of p, then extra (which
// together with p is < 16 bytes), and applies the avalanche.
func xxh32Finish(h uint32, p, extra []byte) uint32 {
	var tail [16]byte
	m := copy(tail[:], p)
	m += copy(tail[m:], extra)
	q := tail[:m]
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

// xxh32WithLastByte is XXH32(data ‖ last, 0) without copying data.
func xxh32WithLastByte(data []byte, last byte) uint32 {
	n := len(data) + 1
	var h uint32
	p := data
	if n >= 16 {
		var seed uint32
		v1 := seed + xxPrime32_1 + xxPrime32_2
		v2 := seed + xxPrime32_2
		v3 := seed
		v4 := seed - xxPrime32_1
		// Full stripes from data alone.
		for len(p) >= 16 {
			v1 = xxRound32(v1, binary.LittleEndian.Uint32(p[0:]))
			v2 = xxRound32(v2, binary.LittleEndian.Uint32(p[4:]))
			v3 = xxRound32(v3, binary.LittleEndian.Uint32(p[8:]))
			v4 = xxRound32(v4, binary.LittleEndian.Uint32(p[12:]))
			p = p[16:]
		}
		// If data's remainder plus the last byte make a full stripe, do it.
		if len(p) == 15 {
			var s [16]byte
			copy(s[:], p)
			s[15] = last
			v1 = xxRound32(v1, binary.LittleEndian.Uint32(s[0:]))
			v2 = xxRound32(v2, binary.LittleEndian.Uint32(s[4:]))
			v3 = xxRound32(v3, binary.LittleEndian.Uint32(s[8:]))
			v4 = xxRound32(v4, binary.LittleEndian.Uint32(s[12:]))
			h = bits.RotateLeft32(v1, 1) + bits.RotateLeft32(v2, 7) + bits.RotateLeft32(v3, 12) + bits.RotateLeft32(v4, 18)
			h += uint32(n)
			return xxh32Finish(h, nil, nil)
		}
		h = bits.RotateLeft32(v1, 1) + bits.RotateLeft32(v2, 7) + bits.RotateLeft32(v3, 12) + bits.RotateLeft32(v4, 18)
	} else {
		h = xxPrime32_5
	}
	h += uint32(n)
	return xxh32Finish(h, p, []byte{last})
}
