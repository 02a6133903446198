package checksum

import (
	"github.com/cespare/xxhash/v2"
	"github.com/zeebo/xxh3"
)

// Digest computes Sum64(t, data) over data written in pieces, so a whole-file
// checksum can be computed while the file is written or read, without
// holding it in memory. Its result equals Sum64 of the concatenation of
// everything written since the last Reset, for every type (the tests check
// it on random splits), so the one-shot and streaming forms cannot drift
// apart.
//
// A Digest holds the state of every algorithm (about 1.2 KiB, most of it
// XXH3's buffer) so that it needs no allocation after it exists: Write and
// Sum64 never allocate. The zero Digest is an XXH3 digest (its type is
// Default); use NewDigest or Reset to choose another. A Digest is not safe
// for concurrent use.
type Digest struct {
	t     Type
	crc32 uint32
	crc64 uint64
	xx32  xxh32Stream
	xx64  xxhash.Digest
	xxh3  xxh3.Hasher
}

// NewDigest returns a Digest for type t. An invalid t gives a digest whose
// Sum64 is 0, like Sum64; validate types with Type.Check first.
func NewDigest(t Type) *Digest {
	d := new(Digest)
	d.Reset(t)
	return d
}

// Reset discards everything written and restarts the digest with type t
// (Default is XXH3).
func (d *Digest) Reset(t Type) {
	t = t.Resolve()
	d.t = t
	switch t {
	case CRC32c:
		d.crc32 = 0
	case XXHash:
		d.xx32.reset()
	case XXHash64:
		d.xx64.Reset()
	case XXH3:
		d.xxh3.Reset()
	case CRC64:
		d.crc64 = ^uint64(0) // the inverted form Sum64 uses
	}
}

// Type returns the digest's checksum type, resolved: XXH3 for Default.
func (d *Digest) Type() Type { return d.t.Resolve() }

// Write adds p to the digest. It never fails; the signature is io.Writer's.
func (d *Digest) Write(p []byte) (int, error) {
	switch d.t {
	case CRC32c:
		d.crc32 = crc32Update(d.crc32, p)
	case XXHash:
		d.xx32.write(p)
	case XXHash64:
		_, _ = d.xx64.Write(p)
	case XXH3, Default: // Default only in a zero Digest
		_, _ = d.xxh3.Write(p)
	case CRC64:
		d.crc64 = UpdateCRC64(d.crc64, p)
	}
	return len(p), nil
}

// Sum64 returns Sum64(t, everything written). It does not change the
// digest's state: more can be written afterwards.
func (d *Digest) Sum64() uint64 {
	switch d.t {
	case CRC32c:
		return uint64(d.crc32)
	case XXHash:
		return uint64(d.xx32.sum())
	case XXHash64:
		return d.xx64.Sum64()
	case XXH3, Default:
		return d.xxh3.Sum64()
	case CRC64:
		return ^d.crc64
	}
	return 0
}
