package checksum

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Type identifies a checksum algorithm. Its numeric value is stored on disk.
type Type uint8

// The checksum types. The values are part of the on-disk format.
const (
	None     Type = 0 // no checksum; every check passes
	CRC32c   Type = 1 // CRC-32C (Castagnoli), masked as LevelDB/RocksDB do
	XXHash   Type = 2 // XXH32, seed 0
	XXHash64 Type = 3 // XXH64, seed 0, low 32 bits in trailers
	XXH3     Type = 4 // XXH3-64, low 32 bits in trailers, last byte mixed in by multiply-xor
	CRC64    Type = 5 // CRC-64/Jones (Redis/Valkey polynomial), inverted form; see Sum64
)

// NumTypes is one more than the largest valid Type.
const NumTypes = 6

// ErrInvalidArgument marks an invalid checksum type given by a caller. It is
// separate from Vigil's own sentinel because this package imports nothing of
// Vigil's; the DB wraps it with vigil.ErrInvalidArgument at its boundary.
var ErrInvalidArgument = errors.New("checksum: invalid argument")

var typeNames = [NumTypes]string{"none", "crc32c", "xxhash", "xxhash64", "xxh3", "crc64"}

// rocksNames are the names RocksDB uses in OPTIONS files and db_crashtest.
var rocksNames = [NumTypes]string{"kNoChecksum", "kCRC32c", "kxxHash", "kxxHash64", "kXXH3", "kCRC64"}

// Valid reports whether t is one of the defined types.
func (t Type) Valid() bool { return t < NumTypes }

// String returns the short lower-case name ("xxh3"), or "Type(N)" if invalid.
func (t Type) String() string {
	if t.Valid() {
		return typeNames[t]
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// RocksDBName returns RocksDB's name for the type ("kXXH3"); CRC64 is ours,
// named in the same style ("kCRC64").
func (t Type) RocksDBName() string {
	if t.Valid() {
		return rocksNames[t]
	}
	return t.String()
}

// validList renders "0 (none), 1 (crc32c), ..." for error messages.
func validList() string {
	var b strings.Builder
	for i := Type(0); i < NumTypes; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d (%s)", i, typeNames[i])
	}
	return b.String()
}

// Check returns nil if t is valid, and otherwise an error wrapping
// ErrInvalidArgument that names the value and lists the valid ones.
func (t Type) Check() error {
	if t.Valid() {
		return nil
	}
	return fmt.Errorf("%w: unknown checksum type %d; valid types are %s", ErrInvalidArgument, uint8(t), validList())
}

// ParseType accepts a number ("4"), a short name ("xxh3") or RocksDB's name
// ("kXXH3"), case-insensitively, so flags and OPTIONS files written for
// db_bench or RocksDB mean the same here. Anything else is an error wrapping
// ErrInvalidArgument that lists the valid types; the Type returned with an
// error is 0 and must not be used.
func ParseType(s string) (Type, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseUint(s, 10, 8); err == nil {
		t := Type(n)
		if err := t.Check(); err != nil {
			return 0, err
		}
		return t, nil
	}
	for i := Type(0); i < NumTypes; i++ {
		if strings.EqualFold(s, typeNames[i]) || strings.EqualFold(s, rocksNames[i]) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown checksum type %q; valid types are %s", ErrInvalidArgument, s, validList())
}
