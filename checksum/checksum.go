package checksum

import (
	"hash/crc32"
	"math/bits"

	"github.com/vigildb/vigil/internal/base"
	"github.com/zeebo/xxh3"
)

var crc32cTable = crc32.MakeTable(crc32.Castagnoli)

// crc32Update continues a CRC-32C (hash/crc32 convention: crc is the
// finished value of the data so far, 0 for none).
func crc32Update(crc uint32, p []byte) uint32 { return crc32.Update(crc, crc32cTable, p) }

// xxh3LastByteMul is RocksDB's constant for folding the trailer's last byte
// (the compression type) into an XXH3 checksum without streaming.
const xxh3LastByteMul = 0x6b9083d9

// MaskCRC32c applies LevelDB/RocksDB's CRC mask. Checksumming data that
// contains embedded CRCs is problematic, so stored CRCs are masked.
func MaskCRC32c(crc uint32) uint32 { return ((crc >> 15) | (crc << 17)) + 0xa282ead8 }

// UnmaskCRC32c reverses MaskCRC32c.
func UnmaskCRC32c(m uint32) uint32 {
	rot := m - 0xa282ead8
	return (rot >> 17) | (rot << 15)
}

// Block returns the 32-bit trailer checksum of data ‖ lastByte for type t, as
// RocksDB computes it (ComputeBuiltinChecksumWithLastByte): lastByte is the
// block's compression type, which the trailer stores just before the
// checksum. It neither copies data nor allocates, for every type: the CRCs
// take the last byte through their byte table, XXH32 and XXH64 assemble only
// their < 32-byte tail on the stack, and XXH3 (which RocksDB deliberately
// does not stream) mixes the byte in by multiply-xor.
//
// Per type: crc32c masked as LevelDB/RocksDB; XXH32; low 32 bits of XXH64;
// low32(XXH3(data)) ^ lastByte·0x6b9083d9; low 32 bits of Sum64's CRC64.
// Default is XXH3. It returns 0 for None and for invalid types.
func Block(t Type, data []byte, lastByte byte) uint32 {
	switch t {
	case CRC32c:
		// hash/crc32 pre- and post-inverts; undo the post-inversion, take
		// one byte through the table, invert again.
		c := ^crc32.Update(0, crc32cTable, data)
		c = crc32cTable[byte(c)^lastByte] ^ c>>8
		return MaskCRC32c(^c)
	case XXHash:
		return xxh32WithLastByte(data, lastByte)
	case XXHash64:
		return uint32(xxh64WithLastByte(data, lastByte))
	case XXH3, Default:
		return uint32(xxh3.Hash(data)) ^ uint32(lastByte)*xxh3LastByteMul
	case CRC64:
		return uint32(^crc64Byte(UpdateCRC64(^uint64(0), data), lastByte))
	}
	return 0
}

// Value returns the 32-bit checksum of data in RocksDB's one-buffer form
// (ComputeBuiltinChecksum): data's last byte plays the role of the trailer's
// type byte, so Value(t, d) == Block(t, d[:n-1], d[n-1]) for n = len(d) > 0.
// Footers are checked this way. For an empty input XXH3 gives 0 as in
// RocksDB, CRC64 gives 0 (its value for no bytes), the others the low 32 bits
// of their checksum of nothing (CRC32c masked).
func Value(t Type, data []byte) uint32 {
	if len(data) == 0 {
		switch t {
		case CRC32c:
			return MaskCRC32c(crc32.Update(0, crc32cTable, nil))
		case XXHash, XXHash64, CRC64:
			return uint32(Sum64(t, nil))
		}
		return 0
	}
	n := len(data) - 1
	return Block(t, data[:n], data[n])
}

// Sum64 returns the full-width checksum of data: 64 bits for XXHash64, XXH3
// (and Default) and CRC64, the 32-bit value zero-extended for CRC32c
// (unmasked) and XXHash, and 0 for None and invalid types. Used for per-key-value protection and
// whole-file checksums, where more than 32 bits are kept.
//
// CRC64 here is the Jones CRC in its inverted form, ^UpdateCRC64(^0, data)
// (all-ones initial value and final xor, as hash/crc64 computes it with the
// Jones table), not Valkey's init-0 form: a CRC with zero initial value and
// no final xor is 0 for every all-zero input, so a zeroed block with a
// zeroed trailer would pass its check. Block and Value use the same form.
func Sum64(t Type, data []byte) uint64 {
	switch t {
	case CRC32c:
		return uint64(crc32.Update(0, crc32cTable, data))
	case XXHash:
		return uint64(xxh32(data, 0))
	case XXHash64:
		return xxh64Sum(data)
	case XXH3, Default:
		return xxh3.Hash(data)
	case CRC64:
		return ^UpdateCRC64(^uint64(0), data)
	}
	return 0
}

// ContextModifier is the per-file, per-offset value added (mod 2^32) to a
// block's stored checksum, so a block read from another offset or another
// file fails its check. base is the file's random non-zero base value, stored
// in its footer; base 0 disables the modifier.
func ContextModifier(base uint32, offset uint64) uint32 {
	allOrNothing := -boolToUint32(base != 0)
	return (base ^ (uint32(offset) + uint32(offset>>32))) & allOrNothing
}

func boolToUint32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// KV returns the per-key-value protection checksum of (user key, trailer,
// value) for type t: what the memtable keeps (truncated to 1, 2, 4 or 8
// bytes) to catch an entry corrupted in memory. Key and value are hashed on
// their own with Sum64; the two hashes and the trailer are each multiplied by
// a distinct odd constant (a bijection), rotated apart, xored together with
// the key length, and finished with one base.Fmix64 (also a bijection). So
// changing one component changes the result whenever it changes that
// component's hash (always for the trailer; for key and value except for a
// hash collision); swapping key and value changes it (but for a 2^-64
// chance); and bytes moved across the key/value boundary change the key
// length. Default is XXH3; None and invalid types give 0.
//
// KV is KVSequence(KVUnsequenced(t, key, kind, value), trailer), kind being
// the trailer's low byte: a write batch computes the first half when an
// entry enters it, before the entry has a sequence number, and the memtable
// derives its checksum from that without hashing key and value again.
//
// The value is never written to disk (flushes drop the protection bytes),
// but it is pinned by golden tests so that a change is deliberate. The
// per-component multiplies replaced one Fmix64 each (2026-11-30), which made
// a protected memtable scan step about 20% cheaper.
func KV(t Type, key []byte, trailer uint64, value []byte) uint64 {
	if t == None || !t.Valid() {
		return 0
	}
	return KVSequence(KVUnsequenced(t, key, uint8(trailer), value), trailer)
}

// kvTrailerMul is KV's multiplier of the trailer.
const kvTrailerMul = 0x165667b19e3779f9

// kvTrailerTerm is the trailer's term in KV's sum, before the finish.
func kvTrailerTerm(trailer uint64) uint64 { return bits.RotateLeft64(trailer*kvTrailerMul, 43) }

// KVUnsequenced is the part of KV that needs no sequence number: the
// checksum of (user key, kind, value) that a write batch keeps for each
// entry from the moment the entry is added (RocksDB's per-operation
// protection info of a WriteBatch). It is KV's sum before the finish, with
// a trailer that holds the kind alone, so each of the three components
// changes it as KV's documented properties say (the kind through an
// injective term). Its low bytes are as good a check as any (key and value
// hashes enter through an odd multiply and a rotation that brings high
// product bits low), so a batch that keeps N of them misses a random
// corruption with probability about 2^-8N. KVSequence turns it into KV.
// None and invalid types give 0.
func KVUnsequenced(t Type, key []byte, kind uint8, value []byte) uint64 {
	if t == None || !t.Valid() {
		return 0
	}
	hk := Sum64(t, key) * 0x9e3779b97f4a7c15
	hv := Sum64(t, value) * 0xc2b2ae3d27d4eb4f
	return hk ^ bits.RotateLeft64(hv, 21) ^ kvTrailerTerm(uint64(kind)) ^ uint64(len(key))
}

// KVSequence finishes u = KVUnsequenced(t, key, kind, value) into
// KV(t, key, trailer, value) for the entry's trailer (seqnum<<8 | kind), in
// a few multiplies: the memtable's checksum of an entry is derived from its
// batch's, not recomputed. A trailer whose kind is not the one u was
// computed with gives a value other than KV of the entry with that kind
// (their difference is the two kinds' terms, never 0 for distinct kinds), so
// a kind changed in between is not laundered. For t None, where KV is 0,
// the result is meaningless.
func KVSequence(u, trailer uint64) uint64 {
	return base.Fmix64(u ^ kvTrailerTerm(uint64(uint8(trailer))) ^ kvTrailerTerm(trailer))
}
