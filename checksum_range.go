package vigil

import (
	"encoding/binary"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/sst"
)

// Range checksums: a digest of the live key/value pairs of a key range that
// is the same on every replica holding the same data, whatever the shape
// of its LSM (memtables, levels, tombstones not yet compacted away), and
// composable across adjacent ranges, so that replicas can compare ranges of
// any size and narrow a difference down by bisection (etcd compares member
// hashes the same way; Valkey checks slot migrations with CRC-64 combine).
//
// The digest is CRC-64/Jones (checksum.UpdateCRC64, Valkey's: init 0, no
// final XOR) of the concatenation, in key order, of every live pair encoded
// as
//
//	0x01 ‖ uvarint(len(key)) ‖ key ‖ uvarint(len(value)) ‖ value
//
// Because a CRC of a concatenation follows from the CRCs of the parts and the
// second part's length (checksum.CombineCRC64), RangeDigest carries the
// encoded length: Append composes the digests of [a, b) and [b, c) into that
// of [a, c), and the empty range, {0, 0, 0}, is its identity.
//
// Why the leading 0x01 (the first version of this format had none, so
// digests taken before it differ from today's for the same data). A CRC
// with init 0 and no final XOR is blind to leading zero bytes:
// CRC(00ⁿ ‖ M) = CRC(M). Without the marker the pair ("", "") encoded as
// 00 00, so {"":""} ∪ S had the checksum of S and {"":""} that of the empty
// range (0); only Digest's counts told them apart, and Checksum, which
// replicas compare, did not. With it, the encoding of a set of pairs is
// injective: each pair's encoding is self-delimiting (lengths first) and the
// key order fixes the sequence; and since every pair's encoding begins with
// a non-zero byte, a non-empty range's message never begins with a zero
// byte, so distinct messages are distinct polynomials to the CRC. Two ranges
// then collide only when the CRC polynomial divides the difference of their
// messages, as for any 64-bit CRC (never for differences spanning 64 bits
// or less), not structurally. Inverting the CRC's initial and final values
// (the form Sum64 uses, which CombineCRC64 also composes) would have fixed
// Checksum too; the marker was preferred because it keeps the CRC Valkey's
// crc64 of the encoding and makes the encoding itself injective, whatever
// hash runs over it, for one byte per pair.

// RangeDigest is the digest of a key range's live pairs.
type RangeDigest struct {
	// CRC64 is the CRC-64/Jones of the pairs' encoding in key order.
	CRC64 uint64
	// Bytes is the length of that encoding, which composing needs.
	Bytes int64
	// Keys is the number of live pairs.
	Keys int64
}

// Append returns the digest of a's range followed by b's (a's range must end
// where b's begins).
func (a RangeDigest) Append(b RangeDigest) RangeDigest {
	return RangeDigest{CRC64: checksum.CombineCRC64(a.CRC64, b.CRC64, b.Bytes), Bytes: a.Bytes + b.Bytes, Keys: a.Keys + b.Keys}
}

// Checksum returns the digest's CRC-64 of the live pairs in [start, end)
// (nil: unbounded) as of now. See Digest for one that composes.
func (d *DB) Checksum(start, end []byte) (uint64, error) {
	g, err := d.Digest(start, end)
	return g.CRC64, err
}

// Digest returns the digest of the live pairs in [start, end) (nil:
// unbounded) as of now.
func (d *DB) Digest(start, end []byte) (RangeDigest, error) {
	if d.closed.Load() {
		return RangeDigest{}, ErrClosed
	}
	return d.digest(start, end, readLatest)
}

// Checksum is DB.Checksum at the snapshot.
func (s *Snapshot) Checksum(start, end []byte) (uint64, error) {
	g, err := s.Digest(start, end)
	return g.CRC64, err
}

// Digest is DB.Digest at the snapshot.
func (s *Snapshot) Digest(start, end []byte) (RangeDigest, error) {
	if s.closed.Load() || s.d.closed.Load() {
		return RangeDigest{}, ErrClosed
	}
	return s.d.digest(start, end, s.seq)
}

func (d *DB) digest(start, end []byte, snap uint64) (RangeDigest, error) {
	if start != nil && end != nil && d.cmp.Cmp(start, end) > 0 {
		return RangeDigest{}, base.InvalidArgumentErrorf("Digest: start %s > end %s", base.HexKey(start), base.HexKey(end))
	}
	// Always verified: a range checksum vouches for the data.
	it, err := d.newIter(&IterOptions{LowerBound: start, UpperBound: end}, snap, sst.ReadOptions{})
	if err != nil {
		return RangeDigest{}, err
	}
	var g RangeDigest
	for ok := it.First(); ok; ok = it.Next() {
		g.add(it.Key(), it.Value())
	}
	if err := it.Close(); err != nil {
		return RangeDigest{}, err
	}
	return g, nil
}

// pairMarker begins the encoding of every pair, so that no pair's encoding
// is all zeros (see the format above).
const pairMarker = 0x01

// add appends one pair to g's range (its key must sort after every key
// already in it).
func (g *RangeDigest) add(k, v []byte) {
	var hdr [1 + binary.MaxVarintLen64]byte
	hdr[0] = pairMarker
	n := 1 + binary.PutUvarint(hdr[1:], uint64(len(k)))
	g.CRC64 = checksum.UpdateCRC64(g.CRC64, hdr[:n])
	g.CRC64 = checksum.UpdateCRC64(g.CRC64, k)
	m := binary.PutUvarint(hdr[:], uint64(len(v)))
	g.CRC64 = checksum.UpdateCRC64(g.CRC64, hdr[:m])
	g.CRC64 = checksum.UpdateCRC64(g.CRC64, v)
	g.Bytes += int64(n + len(k) + m + len(v))
	g.Keys++
}
