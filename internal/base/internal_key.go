package base

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Kind is the type of an internal key. The numeric values are part of the
// on-disk format (WAL batches, SST entries) and are RocksDB's.
type Kind uint8

// Key kinds. Higher kinds sort first among entries with the same user key and
// sequence number.
const (
	KindDelete Kind = 0
	KindSet    Kind = 1
	// KindMerge is a merge operand: Options.Merger combines it with what
	// lies below it (older versions of the key) when the key is read.
	KindMerge       Kind = 2
	KindRangeDelete Kind = 15
	// KindMax is the largest kind; a search key uses it so that a seek lands on
	// the first entry of a user key at or below a sequence number.
	KindMax Kind = 15
)

// String returns the kind's name, as used in debugging output and tools.
func (k Kind) String() string {
	switch k {
	case KindDelete:
		return "DEL"
	case KindSet:
		return "SET"
	case KindMerge:
		return "MERGE"
	case KindRangeDelete:
		return "RANGEDEL"
	}
	return fmt.Sprintf("KIND(%d)", uint8(k))
}

// Valid reports whether k is a kind Vigil writes.
func (k Kind) Valid() bool { return k.IsPoint() || k == KindRangeDelete }

// IsPoint reports whether k is the kind of a point entry (one key's
// version): a Set, a Delete or a Merge.
func (k Kind) IsPoint() bool { return k == KindDelete || k == KindSet || k == KindMerge }

// TrailerLen is the size of the trailer appended to the user key of an
// encoded internal key.
const TrailerLen = 8

// SeqNumMax is the largest sequence number: 56 bits, the rest of the trailer
// holds the kind.
const SeqNumMax = uint64(1)<<56 - 1

// MakeTrailer packs a sequence number and a kind: seq<<8 | kind.
func MakeTrailer(seq uint64, kind Kind) uint64 { return seq<<8 | uint64(kind) }

// TrailerSeqNum extracts the sequence number of a trailer.
func TrailerSeqNum(t uint64) uint64 { return t >> 8 }

// TrailerKind extracts the kind of a trailer.
func TrailerKind(t uint64) Kind { return Kind(t & 0xff) }

// InternalKey is a user key with the sequence number and kind of one version.
// Order: user key ascending, then trailer descending (newest first).
type InternalKey struct {
	UserKey []byte
	Trailer uint64
}

// MakeInternalKey builds an InternalKey.
func MakeInternalKey(userKey []byte, seq uint64, kind Kind) InternalKey {
	return InternalKey{UserKey: userKey, Trailer: MakeTrailer(seq, kind)}
}

// MakeSearchKey is the internal key that sorts before every version of userKey
// visible at snapshot seq (entries with seqnum <= seq).
func MakeSearchKey(userKey []byte, seq uint64) InternalKey {
	return InternalKey{UserKey: userKey, Trailer: MakeTrailer(seq, KindMax)}
}

// SeqNum returns the key's sequence number.
func (k InternalKey) SeqNum() uint64 { return k.Trailer >> 8 }

// Kind returns the key's kind.
func (k InternalKey) Kind() Kind { return Kind(k.Trailer & 0xff) }

// IsExclusiveSentinel reports whether k is a range tombstone's end used as
// a table's largest bound (seqnum SeqNumMax, kind RangeDelete): the bound
// then excludes its user key.
func (k InternalKey) IsExclusiveSentinel() bool {
	return k.Kind() == KindRangeDelete && k.SeqNum() == SeqNumMax
}

// Size is the length of the encoded key.
func (k InternalKey) Size() int { return len(k.UserKey) + TrailerLen }

// Encode writes the key into buf, which must be at least Size() bytes.
func (k InternalKey) Encode(buf []byte) {
	n := copy(buf, k.UserKey)
	binary.LittleEndian.PutUint64(buf[n:], k.Trailer)
}

// Append appends the encoded key to dst.
func (k InternalKey) Append(dst []byte) []byte {
	dst = append(dst, k.UserKey...)
	return binary.LittleEndian.AppendUint64(dst, k.Trailer)
}

// Clone returns a copy whose user key does not alias k's.
func (k InternalKey) Clone() InternalKey {
	return InternalKey{UserKey: bytes.Clone(k.UserKey), Trailer: k.Trailer}
}

// String renders the key as hex-user-key#seq,KIND for debugging.
func (k InternalKey) String() string {
	return fmt.Sprintf("%s#%d,%s", HexKey(k.UserKey), k.SeqNum(), k.Kind())
}

// DecodeInternalKey splits an encoded internal key. ok is false if b is
// shorter than the trailer; the returned key then must not be used.
func DecodeInternalKey(b []byte) (k InternalKey, ok bool) {
	n := len(b) - TrailerLen
	if n < 0 {
		return InternalKey{}, false
	}
	return InternalKey{UserKey: b[:n:n], Trailer: binary.LittleEndian.Uint64(b[n:])}, true
}

// CompareInternal orders two internal keys: user key ascending, then trailer
// descending.
func CompareInternal(a, b InternalKey) int {
	if c := bytes.Compare(a.UserKey, b.UserKey); c != 0 {
		return c
	}
	return CompareTrailers(a.Trailer, b.Trailer)
}

// CompareTrailers orders the trailers of two versions of one user key:
// descending, the newest (largest seqnum, then kind) first.
func CompareTrailers(a, b uint64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// CompareEncoded orders two encoded internal keys like CompareInternal. Keys
// shorter than the trailer sort by their raw bytes, before any valid key with
// the same prefix; callers validate keys before relying on the order.
func CompareEncoded(a, b []byte) int {
	na, nb := len(a)-TrailerLen, len(b)-TrailerLen
	if na < 0 || nb < 0 {
		return bytes.Compare(a, b)
	}
	if c := bytes.Compare(a[:na], b[:nb]); c != 0 {
		return c
	}
	return CompareTrailers(binary.LittleEndian.Uint64(a[na:]), binary.LittleEndian.Uint64(b[nb:]))
}
