package checksum

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Type identifies a checksum algorithm: the one type for the concept (the
// root package's Options.ChecksumType is an alias of it). Its zero value is
// Default, which means XXH3, so that a zero value of every options struct
// that holds a Type (vigil.Options, sst.WriterOptions, memtable.Options)
// checksums: "no checksum" is never what an unset field means, and has its
// own name, None.
//
// The number stored on disk (WAL headers, SST footers and properties,
// MANIFEST file metadata, backup meta files) and given on the command line
// (--checksum_type) is RocksDB's, a different numbering in which 0 is "no
// checksum": convert with Code and TypeFromCode, never by a cast. A Type's
// own value is not part of any format.
type Type uint8

// The checksum types.
const (
	// Default is XXH3, what an unset option means. Every function of this
	// package treats it exactly as XXH3; Resolve names the type it means,
	// and Code stores it as XXH3, so files never record "default".
	Default  Type = iota
	None          // no checksum; every check passes
	CRC32c        // CRC-32C (Castagnoli), masked as LevelDB/RocksDB do
	XXHash        // XXH32, seed 0
	XXHash64      // XXH64, seed 0, low 32 bits in trailers
	XXH3          // XXH3-64, low 32 bits in trailers, last byte mixed in by multiply-xor
	CRC64         // CRC-64/Jones (Redis/Valkey polynomial), inverted form; see Sum64
)

// NumTypes is one more than the largest valid Type.
const NumTypes = 7

// defaultType is what Default means: RocksDB's default since 7.8.
const defaultType = XXH3

// invalidType is what TypeFromCode returns for a code no type has: not
// Valid, so a decoder that checks Valid reports the file as corrupt.
const invalidType Type = 0xff

// ErrInvalidArgument marks an invalid checksum type given by a caller. It is
// separate from Vigil's own sentinel because this package imports nothing of
// Vigil's; the DB wraps it with vigil.ErrInvalidArgument at its boundary.
var ErrInvalidArgument = errors.New("checksum: invalid argument")

// typeNames are the short names, in Type order; Default's names the type it
// resolves to.
var typeNames = [NumTypes]string{"default(xxh3)", "none", "crc32c", "xxhash", "xxhash64", "xxh3", "crc64"}

// goNames are the constants' names, for the errors of Check.
var goNames = [NumTypes]string{"Default", "None", "CRC32c", "XXHash", "XXHash64", "XXH3", "CRC64"}

// rocksNames are the names RocksDB uses in OPTIONS files and db_crashtest;
// Default has XXH3's, since that is what RocksDB would be told.
var rocksNames = [NumTypes]string{"kXXH3", "kNoChecksum", "kCRC32c", "kxxHash", "kxxHash64", "kXXH3", "kCRC64"}

// codes are RocksDB's ChecksumType numbers (plus ours, CRC64 = 5), in Type
// order. They are part of the on-disk format and never change.
var codes = [NumTypes]uint8{4, 0, 1, 2, 3, 4, 5}

// numCodes is one more than the largest code.
const numCodes = NumTypes - 1

// Valid reports whether t is one of the defined types (Default included).
func (t Type) Valid() bool { return t < NumTypes }

// Resolve returns the type t means: XXH3 for Default, t itself otherwise
// (an invalid t stays invalid). Whatever keeps or reports a type that was
// configured (a table's metadata, a log's header) keeps the resolved one,
// which is also what reading it back from disk gives.
func (t Type) Resolve() Type {
	if t == Default {
		return defaultType
	}
	return t
}

// Code returns the number stored on disk and used on the command line for t:
// RocksDB's (None 0, CRC32c 1, XXHash 2, XXHash64 3, XXH3 4) and ours (CRC64
// 5). Default gives XXH3's code, so writing an unresolved Type is still
// correct; an invalid t gives 0xff, which no type has.
func (t Type) Code() uint8 {
	if t.Valid() {
		return codes[t]
	}
	return 0xff
}

// TypeFromCode returns the type whose Code is c, never Default. A code no
// type has gives an invalid Type, which Valid and Check reject: a decoder
// must check it and report the code it read (the Type does not keep it).
func TypeFromCode(c uint8) Type {
	if c < numCodes {
		return Type(c) + 1
	}
	return invalidType
}

// String returns the short lower-case name ("xxh3"); Default is
// "default(xxh3)", and an invalid value renders as written,
// "ChecksumType(N)".
func (t Type) String() string {
	if t.Valid() {
		return typeNames[t]
	}
	return "ChecksumType(" + strconv.Itoa(int(t)) + ")"
}

// RocksDBName returns RocksDB's name for the type ("kXXH3"; Default gives
// XXH3's); CRC64 is ours, named in the same style ("kCRC64").
func (t Type) RocksDBName() string {
	if t.Valid() {
		return rocksNames[t]
	}
	return t.String()
}

// validCodes renders "0 (none), 1 (crc32c), ...": the valid input of
// ParseType, in the command line's terms.
func validCodes() string {
	var b strings.Builder
	for c := uint8(0); c < numCodes; c++ {
		if c > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d (%s)", c, TypeFromCode(c))
	}
	return b.String()
}

// validTypes lists the constants, in the terms of a caller holding a Type.
var validTypes = strings.Join(goNames[:], ", ")

// Check returns nil if t is valid, and otherwise an error wrapping
// ErrInvalidArgument that names the value as written ("ChecksumType(9)")
// and lists the valid ones.
func (t Type) Check() error {
	if t.Valid() {
		return nil
	}
	return fmt.Errorf("%w: %s is not a checksum type; valid types are %s", ErrInvalidArgument, t, validTypes)
}

// ParseType accepts RocksDB's number ("4", see Code), a short name ("xxh3")
// or RocksDB's name ("kXXH3"), case-insensitively, so flags and OPTIONS
// files written for db_bench or RocksDB mean the same here. It never returns
// Default: every accepted input names a type. Anything else is an error
// wrapping ErrInvalidArgument that lists the valid numbers and names; the
// Type returned with an error is Default and must not be used.
func ParseType(s string) (Type, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseUint(s, 10, 8); err == nil {
		if t := TypeFromCode(uint8(n)); t.Valid() {
			return t, nil
		}
		return Default, fmt.Errorf("%w: unknown checksum type %d; valid types are %s", ErrInvalidArgument, n, validCodes())
	}
	for t := None; t < NumTypes; t++ {
		if strings.EqualFold(s, typeNames[t]) || strings.EqualFold(s, rocksNames[t]) {
			return t, nil
		}
	}
	return Default, fmt.Errorf("%w: unknown checksum type %q; valid types are %s", ErrInvalidArgument, s, validCodes())
}
