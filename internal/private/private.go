// Package private is the hook table through which Vigil's own fault-injection
// tests (tests/, tests/stress and so `vigil stress`) reach the bytes the
// engine guards, to flip bits in them as bad RAM would. The hooks are set by
// the packages that own those bytes (package vigil and package memtable, in
// their init functions) and are not part of any public API: a user of Vigil
// cannot import an internal package, so the public types carry no testing
// methods.
//
// The hooks take the owning object as an `any` (a *vigil.DB, a
// *memtable.MemTable) because this package is imported by those packages
// and cannot import them back.
//
// Concurrency: the hooks are written once, at init, and only read after.
// Writing to the slices they hand out races with readers by design; only
// fault-injection tests do that.
package private

// MemtableEntryKind finds the newest entry of key in db's memtables (the
// mutable one first, then the immutable ones, newest first) and calls fn
// with slices aliasing that entry's user-key bytes and value bytes in the
// arena, telling whether it is a range tombstone (the value is then its end
// key). It reports whether an entry was found. Set by package vigil.
var MemtableEntryKind func(db any, key []byte, fn func(keyBytes, valueBytes []byte, rangeDel bool)) bool

// ForEachMemtableArena calls fn with the used bytes of every memtable arena
// of db. Set by package vigil.
var ForEachMemtableArena func(db any, fn func(arena []byte))

// ForEachCachedBlock calls fn with every block in db's block cache. Set by
// package vigil.
var ForEachCachedBlock func(db any, fn func(block []byte))

// BatchBuffer returns the encoded bytes of a *vigil.Batch (header and
// records), the buffer Apply checks against the batch's protection and
// writes to the WAL. The batch must not be lent to the DB (see vigil.Batch):
// it is copied first if it is. Set by package vigil.
var BatchBuffer func(b any) []byte

// MemtableArena returns a memtable's live arena bytes. Set by package
// memtable.
var MemtableArena func(mt any) []byte

// MemtableEntry locates the newest entry of userKey in a memtable (a point
// entry, or else a range tombstone starting at userKey) and returns the
// offsets inside MemtableArena's bytes of its user key and its value
// (without protection bytes), their lengths, and whether it is a range
// tombstone. Set by package memtable.
var MemtableEntry func(mt any, userKey []byte) (keyOff, keyLen, valOff, valLen int, rangeDel, ok bool)

// MemtableEntryBytes is MemtableEntryKind without the kind: the form
// most tests use.
func MemtableEntryBytes(db any, key []byte, fn func(keyBytes, valueBytes []byte)) bool {
	return MemtableEntryKind(db, key, func(k, v []byte, _ bool) { fn(k, v) })
}

// WrapBlockCache returns the *sst.Cache view of an engine cache
// (*cache.Cache; nil gives a nil *sst.Cache), which a DB hands its tables.
// Set by package sst.
var WrapBlockCache func(c any) any
