package sst

import (
	"encoding/binary"
	"hash/crc32"
	"math/bits"

	"github.com/cespare/xxhash/v2"
	"github.com/vigildb/vigil/checksum"
	"github.com/zeebo/xxh3"
)

var crc32cTable = crc32.MakeTable(crc32.Castagnoli)

// trailerChecksum returns checksum.Block(t, b[:len(b)-1], b[len(b)-1]): the
// checksum of a block followed by its compression byte, which callers keep
// contiguous in one buffer. b must not be empty.
func trailerChecksum(t checksum.Type, b []byte) uint32 {
	n := len(b) - 1
	return checksum.Block(t, b[:n], b[n])
}

// fileHasher computes checksum.Sum64(t, data) over data fed in pieces, for
// the whole-file checksum the writer computes while it writes and Verify
// while it reads.
type fileHasher struct {
	t     checksum.Type
	crc32 uint32
	crc64 uint64
	xx64  *xxhash.Digest
	xxh3  *xxh3.Hasher
	xx32  xxh32Stream
}

func newFileHasher(t checksum.Type) *fileHasher {
	h := &fileHasher{t: t}
	switch t {
	case checksum.XXHash64:
		h.xx64 = xxhash.New()
	case checksum.XXH3:
		h.xxh3 = xxh3.New()
	case checksum.XXHash:
		h.xx32.reset()
	case checksum.CRC64:
		h.crc64 = ^uint64(0) // Sum64's CRC64 is the inverted form, ^UpdateCRC64(^0, data)
	}
	return h
}

func (h *fileHasher) write(p []byte) {
	switch h.t {
	case checksum.CRC32c:
		h.crc32 = crc32.Update(h.crc32, crc32cTable, p)
	case checksum.XXHash:
		h.xx32.write(p)
	case checksum.XXHash64:
		h.xx64.Write(p)
	case checksum.XXH3:
		h.xxh3.Write(p)
	case checksum.CRC64:
		h.crc64 = checksum.UpdateCRC64(h.crc64, p)
	}
}

func (h *fileHasher) sum64() uint64 {
	switch h.t {
	case checksum.CRC32c:
		return uint64(h.crc32)
	case checksum.XXHash:
		return uint64(h.xx32.sum())
	case checksum.XXHash64:
		return h.xx64.Sum64()
	case checksum.XXH3:
		return h.xxh3.Sum64()
	case checksum.CRC64:
		return ^h.crc64
	}
	return 0
}

// xxh32Stream is streaming XXH32 with seed 0 (the checksum package only has
// the one-shot form). Its result equals checksum.XXH32(all bytes, 0).
type xxh32Stream struct {
	v     [4]uint32
	buf   [16]byte
	nbuf  int
	total uint64
}

const (
	xxP1 uint32 = 2654435761
	xxP2 uint32 = 2246822519
	xxP3 uint32 = 3266489917
	xxP4 uint32 = 668265263
	xxP5 uint32 = 374761393
)

func (s *xxh32Stream) reset() {
	p1, p2 := xxP1, xxP2 // variables: the sums wrap, as the algorithm intends
	*s = xxh32Stream{v: [4]uint32{p1 + p2, p2, 0, -p1}}
}

func xxRound(acc, in uint32) uint32 {
	return bits.RotateLeft32(acc+in*xxP2, 13) * xxP1
}

func (s *xxh32Stream) stripe(p []byte) {
	s.v[0] = xxRound(s.v[0], binary.LittleEndian.Uint32(p[0:]))
	s.v[1] = xxRound(s.v[1], binary.LittleEndian.Uint32(p[4:]))
	s.v[2] = xxRound(s.v[2], binary.LittleEndian.Uint32(p[8:]))
	s.v[3] = xxRound(s.v[3], binary.LittleEndian.Uint32(p[12:]))
}

func (s *xxh32Stream) write(p []byte) {
	s.total += uint64(len(p))
	if s.nbuf > 0 {
		n := copy(s.buf[s.nbuf:], p)
		s.nbuf += n
		p = p[n:]
		if s.nbuf < 16 {
			return
		}
		s.stripe(s.buf[:])
		s.nbuf = 0
	}
	for len(p) >= 16 {
		s.stripe(p)
		p = p[16:]
	}
	s.nbuf = copy(s.buf[:], p)
}

func (s *xxh32Stream) sum() uint32 {
	var h uint32
	if s.total >= 16 {
		h = bits.RotateLeft32(s.v[0], 1) + bits.RotateLeft32(s.v[1], 7) + bits.RotateLeft32(s.v[2], 12) + bits.RotateLeft32(s.v[3], 18)
	} else {
		h = xxP5
	}
	h += uint32(s.total)
	q := s.buf[:s.nbuf]
	for len(q) >= 4 {
		h += binary.LittleEndian.Uint32(q) * xxP3
		h = bits.RotateLeft32(h, 17) * xxP4
		q = q[4:]
	}
	for _, b := range q {
		h += uint32(b) * xxP5
		h = bits.RotateLeft32(h, 11) * xxP1
	}
	h ^= h >> 15
	h *= xxP2
	h ^= h >> 13
	h *= xxP3
	h ^= h >> 16
	return h
}
