package base

import (
	"bytes"
	"encoding/binary"
	"reflect"
)

// Comparer defines the order of user keys, and what the engine derives from
// it: shorter index keys, an integer abbreviation for fast compares, and
// where a key's prefix ends (for prefix bloom filters). Every part of the
// engine that orders user keys uses the DB's one Comparer; its Name is
// recorded with the DB and in every table, so that data written under one
// order is never read under another.
//
// Internal keys (user key ‖ trailer) order by Compare on the user keys,
// then by trailer descending, whatever the comparer.
//
// The functions must be safe for concurrent use, must not keep or modify
// their arguments, and must be pure: the same keys always compare the same
// way, in every process that opens the DB.
type Comparer struct {
	// Compare returns -1, 0 or +1 as a sorts before, equal to or after b.
	// It must be a total order, and keys that compare equal must be the
	// same bytes (bloom filters hash keys' bytes). Required.
	Compare func(a, b []byte) int
	// Equal reports whether a and b are the same key; it must agree with
	// Compare(a, b) == 0. Nil: Compare(a, b) == 0.
	Equal func(a, b []byte) bool
	// AbbreviatedKey returns an integer that orders like the key wherever
	// it differs: Compare(a, b) < 0 implies AbbreviatedKey(a) <=
	// AbbreviatedKey(b). Equal abbreviations say nothing, and Compare
	// decides. A good one decides most comparisons of distinct keys
	// (bytewise: the first 8 bytes, big-endian). Nil: none, every
	// comparison calls Compare.
	AbbreviatedKey func(key []byte) uint64
	// Separator appends to dst a key k with a <= k < b, given a < b, as
	// short as it can be: it becomes an index key of a table, between two
	// of its data blocks. Appending a itself is always correct. Nil: a.
	Separator func(dst, a, b []byte) []byte
	// Successor appends to dst a short key k >= a. Appending a itself is
	// always correct. Nil: a.
	Successor func(dst, a []byte) []byte
	// Split returns the length of key's prefix: key[:Split(key)] is what a
	// prefix bloom filter holds and what IterOptions.Prefix names. Keys
	// with the same prefix must be contiguous in the order, keys with
	// different prefixes must order as their prefixes do, and a prefix,
	// taken as a key, must sort at or before every key that has it (a
	// prefix iterator starts there). Nil: keys have no prefix of their
	// own; filters hold whole keys.
	Split func(key []byte) int
	// Name identifies the order. It is recorded in the MANIFEST, the
	// OPTIONS file and every table: a DB written under one name does not
	// open under another. Change it whenever the order changes. Required.
	Name string

	// bytewise is set by Resolve when Compare is bytes.Compare: the
	// engine's hot paths then compare inline.
	bytewise bool
}

// BytewiseComparerName is the default comparer's name, the one every
// Vigil DB has recorded in its MANIFEST since the first (RocksDB and
// LevelDB call the same order "leveldb.BytewiseComparator").
const BytewiseComparerName = "bytewise"

// DefaultComparer orders keys bytewise (bytes.Compare), a shorter key before
// any longer key it is a prefix of. Its keys have no prefix (Split is nil).
var DefaultComparer = &Comparer{
	Compare:        bytes.Compare,
	Equal:          bytes.Equal,
	AbbreviatedKey: BytewiseAbbreviatedKey,
	Separator:      BytewiseSeparator,
	Successor:      BytewiseSuccessor,
	Name:           BytewiseComparerName,
	bytewise:       true,
}

// Resolve returns the comparer the engine uses for c: DefaultComparer for
// nil, otherwise a copy with every optional function filled in (see the
// fields' Nil rules). It does not check c; see Check.
func (c *Comparer) Resolve() *Comparer {
	if c == nil || c == DefaultComparer {
		return DefaultComparer
	}
	r := *c
	cmp := r.Compare
	if r.Equal == nil {
		r.Equal = func(a, b []byte) bool { return cmp(a, b) == 0 }
	}
	if r.Separator == nil {
		r.Separator = func(dst, a, _ []byte) []byte { return append(dst, a...) }
	}
	if r.Successor == nil {
		r.Successor = func(dst, a []byte) []byte { return append(dst, a...) }
	}
	r.bytewise = sameFunc(r.Compare, bytes.Compare)
	return &r
}

// sameFunc reports whether two functions are the same top-level function.
func sameFunc(f, g func(a, b []byte) int) bool {
	return f != nil && reflect.ValueOf(f).Pointer() == reflect.ValueOf(g).Pointer()
}

// Check returns a description of what makes c unusable ("" if nothing):
// a comparer needs Compare and a Name.
func (c *Comparer) Check() string {
	switch {
	case c == nil:
		return ""
	case c.Compare == nil && c.Name == "":
		return "Comparer needs Compare and a Name"
	case c.Compare == nil:
		return "Comparer " + c.Name + " has no Compare function"
	case c.Name == "":
		return "Comparer has no Name (it is recorded with the DB and checked at every Open)"
	}
	return ""
}

// IsBytewise reports whether c orders keys bytewise with the default's
// functions (DefaultComparer, or a resolved copy of it).
func (c *Comparer) IsBytewise() bool { return c == nil || c.bytewise }

// Cmp is Compare, inline for the bytewise order. c must be resolved.
func (c *Comparer) Cmp(a, b []byte) int {
	if c.bytewise {
		return bytes.Compare(a, b)
	}
	return c.Compare(a, b)
}

// Eq is Equal, inline for the bytewise order. c must be resolved.
func (c *Comparer) Eq(a, b []byte) bool {
	if c.bytewise {
		return bytes.Equal(a, b)
	}
	return c.Equal(a, b)
}

// Prefix returns key's prefix under Split (the whole key without one).
func (c *Comparer) Prefix(key []byte) []byte {
	if c == nil || c.Split == nil {
		return key
	}
	return key[:c.Split(key)]
}

// CompareInternal orders two internal keys under c: user keys by c, then
// trailers descending. c must be resolved.
func (c *Comparer) CompareInternal(a, b InternalKey) int {
	if r := c.Cmp(a.UserKey, b.UserKey); r != 0 {
		return r
	}
	return CompareTrailers(a.Trailer, b.Trailer)
}

// CompareEncoded orders two encoded internal keys like CompareInternal.
// Keys shorter than the trailer order by c over their whole bytes, before
// any valid key with the same bytes; callers validate keys before relying
// on the order. c must be resolved.
func (c *Comparer) CompareEncoded(a, b []byte) int {
	na, nb := len(a)-TrailerLen, len(b)-TrailerLen
	if na < 0 || nb < 0 {
		return c.Cmp(a, b)
	}
	if r := c.Cmp(a[:na], b[:nb]); r != 0 {
		return r
	}
	return CompareTrailers(binary.LittleEndian.Uint64(a[na:]), binary.LittleEndian.Uint64(b[nb:]))
}

// BytewiseAbbreviatedKey is the bytewise order's abbreviation: the key's
// first 8 bytes, big-endian, zero-padded.
func BytewiseAbbreviatedKey(key []byte) uint64 {
	if len(key) >= 8 {
		return binary.BigEndian.Uint64(key)
	}
	var v uint64
	for i, b := range key {
		v |= uint64(b) << (56 - 8*uint(i))
	}
	return v
}

// BytewiseSeparator is the bytewise order's Separator: where a and b first
// differ, at byte i, if a[i] < 0xff and either a[i]+1 < b[i] or b goes on
// past i, it appends a[:i] ‖ a[i]+1, which is > a and < b; otherwise a.
// (It is the rule the table format has always used for index keys.)
func BytewiseSeparator(dst, a, b []byte) []byte {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i < n && a[i] < 0xff && (a[i]+1 < b[i] || len(b) > i+1) {
		dst = append(dst, a[:i]...)
		return append(dst, a[i]+1)
	}
	return append(dst, a...)
}

// BytewiseSuccessor is the bytewise order's Successor: a[:i] ‖ a[i]+1 for
// the first byte a[i] below 0xff, or a itself if every byte is 0xff.
func BytewiseSuccessor(dst, a []byte) []byte {
	for i, b := range a {
		if b != 0xff {
			dst = append(dst, a[:i]...)
			return append(dst, b+1)
		}
	}
	return append(dst, a...)
}
