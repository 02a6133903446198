package vigil

import (
	"encoding/binary"

	"github.com/vigildb/vigil/internal/base"
)

// WAL meta records: the records of a WAL that are not batches.
//
// A batch record starts with its sequence number, a uint64 little-endian no
// larger than base.SeqNumMax (2^56-1), so its eighth byte is always zero. A
// meta record starts with the eight bytes "VGLMETA\xff", whose eighth byte is
// not, so the two can never be confused (and an older reader that does not
// know meta records refuses one as a batch with an impossible seqnum rather
// than misreading it). This layout is an on-disk format, pinned by a golden
// test:
//
//	+------------------+-----------+---------------------------------+
//	| "VGLMETA\xff"    | kind u8   | fields (uvarints)               |
//	+------------------+-----------+---------------------------------+
//	kind 1, preamble:    prev log number | prev size | last seqnum
//	kind 2, clean close: last seqnum
//	kind 3, ingestion:   first seqnum | last seqnum
//
// The preamble is the first record of every WAL, written and synced with
// the file header before the WAL takes any batch. It names the WAL that came
// before it in the DB's chain of WALs, how many bytes of that WAL were
// durable and intact when this one was created, and the last sequence
// number assigned before it. Recovery uses it to tell a real torn tail from
// damage (the predecessor must be intact up to prev size: a crash cannot
// tear bytes that were synced before a later WAL existed), to find a missing
// WAL, and to find records missing at the end of the predecessor (its
// batches must reach last seqnum). RocksDB's track_and_verify_wals records
// the same facts about the predecessor in each WAL.
//
// The clean-close record is the last record Close writes (and syncs): after
// a clean Close, the last batch of the WAL is followed by an intact record,
// so damage to it cannot pass for a torn tail, and the batches must reach
// its last seqnum.
//
// The ingestion record holds the place of the seqnums an Ingest took (see
// ingest.go): they are in no batch, and its tables are in the MANIFEST, so
// without it recovery would see a gap in the seqnums between the batches
// before and after it. Replay treats it as a batch with no entries.

const (
	walMetaMagic    = "VGLMETA\xff"
	walMetaHeader   = len(walMetaMagic) + 1
	walMetaPreamble = 1
	walMetaClose    = 2
	walMetaIngest   = 3
)

// walPreamble is the decoded preamble of a WAL.
type walPreamble struct {
	// prevLogNum is the WAL before this one (0: none, a new DB).
	prevLogNum uint64
	// prevSize is the byte size up to which prevLogNum was durable and
	// intact when this WAL was created.
	prevSize int64
	// lastSeq is the last sequence number assigned before this WAL: the
	// batches of the WALs before it end there.
	lastSeq uint64
}

// walMeta is a decoded meta record.
type walMeta struct {
	kind     byte
	preamble walPreamble // kind walMetaPreamble
	lastSeq  uint64      // kind walMetaClose and walMetaIngest (and preamble.lastSeq)
	firstSeq uint64      // kind walMetaIngest
}

func (p walPreamble) encode() []byte {
	b := append(make([]byte, 0, walMetaHeader+30), walMetaMagic...)
	b = append(b, walMetaPreamble)
	b = binary.AppendUvarint(b, p.prevLogNum)
	b = binary.AppendUvarint(b, uint64(p.prevSize))
	return binary.AppendUvarint(b, p.lastSeq)
}

func encodeWALClose(lastSeq uint64) []byte {
	b := append(make([]byte, 0, walMetaHeader+10), walMetaMagic...)
	b = append(b, walMetaClose)
	return binary.AppendUvarint(b, lastSeq)
}

// encodeWALIngest returns the record of an ingestion that took the seqnums
// first..last.
func encodeWALIngest(first, last uint64) []byte {
	b := append(make([]byte, 0, walMetaHeader+20), walMetaMagic...)
	b = append(b, walMetaIngest)
	b = binary.AppendUvarint(b, first)
	return binary.AppendUvarint(b, last)
}

// isWALMeta reports whether a WAL record is a meta record (by its magic).
func isWALMeta(rec []byte) bool {
	return len(rec) >= len(walMetaMagic) && string(rec[:len(walMetaMagic)]) == walMetaMagic
}

// decodeWALMeta decodes a meta record. where names the WAL and offset for
// errors. Every field is bounds-checked; bad bytes are ErrCorruption.
func decodeWALMeta(rec []byte, where string) (walMeta, error) {
	if !isWALMeta(rec) || len(rec) < walMetaHeader {
		return walMeta{}, base.CorruptionErrorf("%s: not a WAL meta record (%d bytes)", where, len(rec))
	}
	m := walMeta{kind: rec[len(walMetaMagic)]}
	b := rec[walMetaHeader:]
	field := func(what string) (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, base.CorruptionErrorf("%s: WAL meta record (kind %d): bad varint for %s", where, m.kind, what)
		}
		b = b[n:]
		return v, nil
	}
	var err error
	switch m.kind {
	case walMetaPreamble:
		if m.preamble.prevLogNum, err = field("previous log number"); err != nil {
			return walMeta{}, err
		}
		size, err := field("previous log size")
		if err != nil {
			return walMeta{}, err
		}
		if size > 1<<62 {
			return walMeta{}, base.CorruptionErrorf("%s: WAL preamble: previous log size %d out of range", where, size)
		}
		m.preamble.prevSize = int64(size)
		if m.preamble.lastSeq, err = field("last seqnum"); err != nil {
			return walMeta{}, err
		}
		m.lastSeq = m.preamble.lastSeq
	case walMetaClose:
		if m.lastSeq, err = field("last seqnum"); err != nil {
			return walMeta{}, err
		}
	case walMetaIngest:
		if m.firstSeq, err = field("first seqnum"); err != nil {
			return walMeta{}, err
		}
		if m.lastSeq, err = field("last seqnum"); err != nil {
			return walMeta{}, err
		}
		if m.firstSeq == 0 || m.firstSeq > m.lastSeq {
			return walMeta{}, base.CorruptionErrorf("%s: WAL ingestion record: seqnums %d..%d", where, m.firstSeq, m.lastSeq)
		}
	default:
		return walMeta{}, base.CorruptionErrorf("%s: WAL meta record of unknown kind %d", where, m.kind)
	}
	if m.lastSeq > base.SeqNumMax {
		return walMeta{}, base.CorruptionErrorf("%s: WAL meta record: last seqnum %d exceeds the maximum", where, m.lastSeq)
	}
	if len(b) != 0 {
		return walMeta{}, base.CorruptionErrorf("%s: WAL meta record (kind %d) has %d trailing bytes", where, m.kind, len(b))
	}
	return m, nil
}
