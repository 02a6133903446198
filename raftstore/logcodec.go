package raftstore

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/vigildb/vigil"
)

// The log entry format, version 1 (the value stored under a log key):
//
//	+---------+------+-------+---------------+--------------+
//	| version | type | flags | uvarint index | uvarint term |
//	+---------+------+-------+---------------+--------------+
//	  [ varint unix seconds | uvarint nanoseconds ]   if flags&flagAppendedAt
//	  [ uvarint len | extensions ]                    if flags&flagExtensions
//	  data                                            the rest of the value
//
// version, type and flags are one byte each. The index is stored too,
// although the key holds it, so that a value read back under the wrong key
// is caught. Data takes the rest of the value, so it needs no length. A
// zero AppendedAt and empty Extensions cost nothing. Version 1 is pinned
// by a golden test (TestLogFormatGolden); a new layout gets a new version
// byte, and decoders keep reading the old ones.
const (
	logFormatV1 = 1

	flagAppendedAt = 1 << 0
	flagExtensions = 1 << 1
	knownLogFlags  = flagAppendedAt | flagExtensions
)

// maxLogHeader bounds the encoded size of everything but Extensions and
// Data: three bytes, two uvarints, a varint and a uvarint, and the
// extensions' length.
const maxLogHeader = 3 + 5*binary.MaxVarintLen64

// AppendLog appends the encoding of l (format version 1) to dst and returns
// the extended slice. It allocates only if dst lacks the capacity.
func AppendLog(dst []byte, l *raft.Log) []byte {
	flags := byte(0)
	if !l.AppendedAt.IsZero() {
		flags |= flagAppendedAt
	}
	if len(l.Extensions) > 0 {
		flags |= flagExtensions
	}
	dst = append(dst, logFormatV1, byte(l.Type), flags)
	dst = binary.AppendUvarint(dst, l.Index)
	dst = binary.AppendUvarint(dst, l.Term)
	if flags&flagAppendedAt != 0 {
		dst = binary.AppendVarint(dst, l.AppendedAt.Unix())
		dst = binary.AppendUvarint(dst, uint64(l.AppendedAt.Nanosecond()))
	}
	if flags&flagExtensions != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
		dst = append(dst, l.Extensions...)
	}
	return append(dst, l.Data...)
}

// EncodedLogSize returns the length AppendLog adds for l, at most.
func EncodedLogSize(l *raft.Log) int {
	return maxLogHeader + len(l.Extensions) + len(l.Data)
}

// DecodeLog decodes an entry encoded by AppendLog into l, overwriting every
// field. l.Data and l.Extensions alias b (each capped at its own length, so
// appending to one never overwrites the other); copy b first if it will be
// reused. An empty Data or Extensions decodes as nil, and AppendedAt comes
// back in the local time zone without a monotonic reading.
//
// Every length is checked against the input: damaged or foreign bytes give
// an error wrapping vigil.ErrCorruption, never a panic, and DecodeLog never
// allocates.
func DecodeLog(b []byte, l *raft.Log) error {
	if len(b) < 3 {
		return corruptf("log entry of %d bytes is shorter than its 3-byte header", len(b))
	}
	if b[0] != logFormatV1 {
		return corruptf("log entry format version %d is unknown (this build reads version %d)", b[0], logFormatV1)
	}
	typ, flags := raft.LogType(b[1]), b[2]
	if flags&^knownLogFlags != 0 {
		return corruptf("log entry flags %#x have unknown bits", flags)
	}
	p := 3
	index, n := binary.Uvarint(b[p:])
	if n <= 0 {
		return corruptf("log entry index: bad uvarint at offset %d", p)
	}
	p += n
	term, n := binary.Uvarint(b[p:])
	if n <= 0 {
		return corruptf("log entry %d: term: bad uvarint at offset %d", index, p)
	}
	p += n
	var at time.Time
	if flags&flagAppendedAt != 0 {
		sec, n := binary.Varint(b[p:])
		if n <= 0 {
			return corruptf("log entry %d: AppendedAt seconds: bad varint at offset %d", index, p)
		}
		p += n
		nsec, n := binary.Uvarint(b[p:])
		if n <= 0 || nsec >= 1e9 {
			return corruptf("log entry %d: AppendedAt nanoseconds: bad uvarint at offset %d", index, p)
		}
		p += n
		at = time.Unix(sec, int64(nsec))
	}
	var ext []byte
	if flags&flagExtensions != 0 {
		m, n := binary.Uvarint(b[p:])
		if n <= 0 {
			return corruptf("log entry %d: extensions length: bad uvarint at offset %d", index, p)
		}
		p += n
		if m == 0 || m > uint64(len(b)-p) {
			return corruptf("log entry %d: extensions of %d bytes at offset %d, but %d bytes remain", index, m, p, len(b)-p)
		}
		ext = b[p : p+int(m) : p+int(m)]
		p += int(m)
	}
	var data []byte
	if p < len(b) {
		data = b[p:len(b):len(b)]
	}
	*l = raft.Log{Index: index, Term: term, Type: typ, Data: data, Extensions: ext, AppendedAt: at}
	return nil
}

// corruptf returns an error wrapping vigil.ErrCorruption.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: raftstore: %s", vigil.ErrCorruption, fmt.Sprintf(format, args...))
}
