package base

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// TableIdentity names one table for good: the DB that wrote it, the
// session (one Open of that DB) that wrote it, and its file number. Every
// table stores its identity in its properties and the MANIFEST records it
// beside the file's number; opening a table compares the two, so a table
// swapped in from another DB, from another number or from another state of
// the same DB (a copy restored from a backup that then wrote new tables
// under the same numbers) is corruption at open instead of data read
// silently. RocksDB checks its tables' unique ids against the MANIFEST the
// same way.
//
// An external table (written for ingestion, outside any DB) has a zero DB
// and file number and a session of its own writer; a table written before
// identities existed has the zero identity.
type TableIdentity struct {
	// DB is the id of the DB that wrote the table, made at its creation.
	DB [16]byte
	// Session is random per Open of that DB (per writer of an external
	// table).
	Session [16]byte
	// FileNum is the table's file number in that DB (0: external).
	FileNum uint64
}

// TableIdentityLen is the length of an encoded TableIdentity.
const TableIdentityLen = 40

// NewRandomID returns 16 random bytes, for a DB's id or a session's.
func NewRandomID() [16]byte {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		// crypto/rand does not fail on the platforms Go supports.
		panic(fmt.Sprintf("vigil: reading random bytes: %v", err))
	}
	return id
}

// IsZero reports whether t is the zero identity (a table written before
// identities existed).
func (t TableIdentity) IsZero() bool { return t == TableIdentity{} }

// Append appends t's encoding: DB, Session, then FileNum big-endian.
func (t TableIdentity) Append(dst []byte) []byte {
	dst = append(dst, t.DB[:]...)
	dst = append(dst, t.Session[:]...)
	return binary.BigEndian.AppendUint64(dst, t.FileNum)
}

// DecodeTableIdentity decodes an encoding of exactly TableIdentityLen
// bytes.
func DecodeTableIdentity(b []byte) (TableIdentity, bool) {
	var t TableIdentity
	if len(b) != TableIdentityLen {
		return t, false
	}
	copy(t.DB[:], b[:16])
	copy(t.Session[:], b[16:32])
	t.FileNum = binary.BigEndian.Uint64(b[32:])
	return t, true
}

// String renders t for errors and tools: "table 000007 of DB <hex>,
// session <hex>", "external table, writer <hex>", or "no identity".
func (t TableIdentity) String() string {
	switch {
	case t.IsZero():
		return "no identity"
	case t.DB == [16]byte{} && t.FileNum == 0:
		return "external table, writer " + hex.EncodeToString(t.Session[:])
	default:
		return fmt.Sprintf("table %06d of DB %s, session %s", t.FileNum, hex.EncodeToString(t.DB[:]), hex.EncodeToString(t.Session[:]))
	}
}
