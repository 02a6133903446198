package checksum

import (
	"encoding/binary"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// XXH64 (xxHash, 64-bit), seed 0. github.com/cespare/xxhash/v2 computes it
// with a scalar assembly loop (eight multiplies per 32-byte stripe); on CPUs
// with AVX-512 (DQ and VL) Vigil's own stripe loop takes the four input
// products of a stripe in one VPMULLQ, off the lanes' dependency chains,
// as xxh32StripesSSE41 does for XXH32. Elsewhere the cespare code is used.

const (
	xxPrime64_1 uint64 = 11400714785074694791
	xxPrime64_2 uint64 = 14029467366897019727
	xxPrime64_3 uint64 = 1609587929392839161
	xxPrime64_4 uint64 = 9650029242287828579
	xxPrime64_5 uint64 = 2870177450012600261
)

func xxRound64(acc, input uint64) uint64 {
	acc += input * xxPrime64_2
	acc = bits.RotateLeft64(acc, 31)
	return acc * xxPrime64_1
}

func xxMergeRound64(h, v uint64) uint64 {
	h ^= xxRound64(0, v)
	return h*xxPrime64_1 + xxPrime64_4
}

// xxh64Acc is the four-lane accumulator of XXH64's 32-byte stripes.
type xxh64Acc struct{ v1, v2, v3, v4 uint64 }

func newXXH64Acc() xxh64Acc {
	p1, p2 := xxPrime64_1, xxPrime64_2 // variables: the sums wrap, as the algorithm wants
	return xxh64Acc{p1 + p2, p2, 0, -p1}
}

// stripes consumes every full 32-byte stripe of p and returns the tail.
func (a *xxh64Acc) stripes(p []byte) []byte {
	if useXXH64AVX512 && len(p) >= 32 {
		n := len(p) &^ 31
		xxh64StripesAVX512(a, p[:n])
		return p[n:]
	}
	return a.stripesGeneric(p)
}

// stripesGeneric is stripes in portable Go.
func (a *xxh64Acc) stripesGeneric(p []byte) []byte {
	v1, v2, v3, v4 := a.v1, a.v2, a.v3, a.v4
	for len(p) >= 32 {
		v1 = xxRound64(v1, binary.LittleEndian.Uint64(p[0:]))
		v2 = xxRound64(v2, binary.LittleEndian.Uint64(p[8:]))
		v3 = xxRound64(v3, binary.LittleEndian.Uint64(p[16:]))
		v4 = xxRound64(v4, binary.LittleEndian.Uint64(p[24:]))
		p = p[32:]
	}
	a.v1, a.v2, a.v3, a.v4 = v1, v2, v3, v4
	return p
}

func (a *xxh64Acc) merge() uint64 {
	h := bits.RotateLeft64(a.v1, 1) + bits.RotateLeft64(a.v2, 7) + bits.RotateLeft64(a.v3, 12) + bits.RotateLeft64(a.v4, 18)
	h = xxMergeRound64(h, a.v1)
	h = xxMergeRound64(h, a.v2)
	h = xxMergeRound64(h, a.v3)
	return xxMergeRound64(h, a.v4)
}

// xxh64Sum is XXH64(p, 0).
func xxh64Sum(p []byte) uint64 {
	if !useXXH64AVX512 {
		return xxhash.Sum64(p)
	}
	n := len(p)
	h := xxPrime64_5
	if n >= 32 {
		a := newXXH64Acc()
		p = a.stripes(p)
		h = a.merge()
	}
	return xxh64Tail(h+uint64(n), p)
}

// xxh64Tail consumes the < 32 remaining bytes q and applies the avalanche.
func xxh64Tail(h uint64, q []byte) uint64 {
	for len(q) >= 8 {
		h ^= xxRound64(0, binary.LittleEndian.Uint64(q))
		h = bits.RotateLeft64(h, 27)*xxPrime64_1 + xxPrime64_4
		q = q[8:]
	}
	if len(q) >= 4 {
		h ^= uint64(binary.LittleEndian.Uint32(q)) * xxPrime64_1
		h = bits.RotateLeft64(h, 23)*xxPrime64_2 + xxPrime64_3
		q = q[4:]
	}
	for _, b := range q {
		h ^= uint64(b) * xxPrime64_5
		h = bits.RotateLeft64(h, 11) * xxPrime64_1
	}
	h ^= h >> 33
	h *= xxPrime64_2
	h ^= h >> 29
	h *= xxPrime64_3
	h ^= h >> 32
	return h
}

// xxh64WithLastByte is XXH64(data ‖ last, 0) without copying data: full
// stripes are hashed in place, only the < 32-byte tail and last are
// assembled on the stack.
func xxh64WithLastByte(data []byte, last byte) uint64 {
	if !useXXH64AVX512 {
		var d xxhash.Digest
		d.Reset()
		_, _ = d.Write(data)
		b := [1]byte{last}
		_, _ = d.Write(b[:])
		return d.Sum64()
	}
	n := len(data) + 1
	var buf [32]byte
	h := xxPrime64_5
	p := data
	if n >= 32 {
		a := newXXH64Acc()
		p = a.stripes(p)
		if len(p) == 31 {
			// data's remainder and last make one more full stripe.
			copy(buf[:], p)
			buf[31] = last
			a.stripesGeneric(buf[:])
			return xxh64Tail(a.merge()+uint64(n), nil)
		}
		h = a.merge()
	}
	m := copy(buf[:], p)
	buf[m] = last
	return xxh64Tail(h+uint64(n), buf[:m+1])
}
