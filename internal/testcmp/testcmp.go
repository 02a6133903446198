// Package testcmp holds comparers for tests: orders other than bytewise,
// under which every part of the engine that orders keys must still be
// right. Each sorts differently from bytewise, so a part that compares keys
// bytewise behind the comparer's back misplaces keys and fails its tests.
package testcmp

import (
	"bytes"
	"cmp"
	"encoding/binary"

	"github.com/vigildb/vigil/internal/base"
)

// Reverse orders keys bytewise descending. It has an abbreviated key (the
// bytewise one, inverted) and no prefixes.
var Reverse = &base.Comparer{
	Compare:        func(a, b []byte) int { return bytes.Compare(b, a) },
	AbbreviatedKey: func(k []byte) uint64 { return ^base.BytewiseAbbreviatedKey(k) },
	Name:           "vigil.test.Reverse",
}

// VersionLen is the length of Versioned's version suffix.
const VersionLen = 8

// Versioned orders keys laid out as prefix ‖ 8-byte big-endian version (see
// VersionedKey): prefixes bytewise ascending, then versions descending, the
// newest first, as MVCC stores order their keys. A key shorter than 8 bytes
// is all prefix, without a version, and sorts before the versions of that
// prefix. Split returns the prefix; Separator shortens prefixes.
var Versioned = &base.Comparer{
	Compare:        compareVersioned,
	AbbreviatedKey: func(k []byte) uint64 { return base.BytewiseAbbreviatedKey(k[:splitVersioned(k)]) },
	Separator:      separatorVersioned,
	Split:          splitVersioned,
	Name:           "vigil.test.Versioned",
}

// VersionedKey returns prefix ‖ version, big-endian.
func VersionedKey(prefix []byte, version uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), version)
}

func splitVersioned(k []byte) int {
	if len(k) < VersionLen {
		return len(k)
	}
	return len(k) - VersionLen
}

func compareVersioned(a, b []byte) int {
	pa, pb := splitVersioned(a), splitVersioned(b)
	if c := bytes.Compare(a[:pa], b[:pb]); c != 0 {
		return c
	}
	va, vb := a[pa:], b[pb:]
	switch {
	case len(va) == 0 || len(vb) == 0:
		return cmp.Compare(len(va), len(vb)) // the key without a version first
	}
	return bytes.Compare(vb, va) // newer (larger) versions first
}

// separatorVersioned shortens the prefix of a towards b's, and gives the
// shortened prefix the newest version, so that it sorts after a (its prefix
// is larger) and before b (its prefix is smaller).
func separatorVersioned(dst, a, b []byte) []byte {
	pa, pb := a[:splitVersioned(a)], b[:splitVersioned(b)]
	if bytes.Compare(pa, pb) < 0 {
		s := base.BytewiseSeparator(nil, pa, pb)
		if bytes.Compare(s, pa) > 0 && bytes.Compare(s, pb) < 0 {
			dst = append(dst, s...)
			return binary.BigEndian.AppendUint64(dst, ^uint64(0))
		}
	}
	return append(dst, a...)
}
