package manifest

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// The MANIFEST is a record log (package wal) of version edits. Replaying
// the edits from the first record rebuilds the LSM shape: which SST files
// are live at which level, the next file number, the last sequence number,
// and the oldest WAL that still holds unflushed data. CURRENT names the live
// MANIFEST.
//
// A version edit is a sequence of tagged fields (tags and integers are
// uvarints; this layout is an on-disk format, pinned by a golden test):
//
//	tagLogNumber     log number        all WALs below it are flushed
//	tagNextFileNum   file number       next number to allocate
//	tagLastSeq       seqnum            largest sequence number in any file
//	tagDeletedFile   level, file num   file leaves the level
//	tagNewFile       level, file num, size, smallest key, largest key
//	                 (uvarint-length-prefixed encoded internal keys),
//	                 smallest seq, largest seq, entries, deletions,
//	                 range deletions, file checksum (fixed64 LE),
//	                 checksum type (1 byte)
//	tagComparer      name (uvarint-length-prefixed): always "bytewise"
//	tagNewFileGlobalSeq
//	                 the fields of tagNewFile, then the global seqnum: an
//	                 ingested table whose entries all have that seqnum
//	                 (FileMetadata.GlobalSeqNum, non-zero; the smallest and
//	                 largest seqnums must equal it)
//
//	tagNewFileIdentity
//	                 the fields of tagNewFile, then the global seqnum
//	                 (uvarint, 0: none, else as for tagNewFileGlobalSeq),
//	                 then the table's identity (40 bytes, see
//	                 base.TableIdentity): the DB, session and file number
//	                 the table's properties must name
//	tagFormatVersion the DB's format version (uvarint, >= 1): the first
//	                 field of the first record of every MANIFEST written
//	                 since format versions exist; absent means version 1.
//	                 A build refuses a newer version as soon as it reads
//	                 the field, before any field it might not know.
//	tagDBID          the DB's id (16 bytes), in the first record of every
//	                 MANIFEST
//	tagMerger        the merge operator's name (uvarint-length-prefixed;
//	                 format version 2 and up): the Options.Merger that
//	                 wrote merge operands, in the first record of every
//	                 MANIFEST of a DB that has one, or in the edit that
//	                 records it when a DB first opens with one
//
// A table with an identity is written with tagNewFileIdentity, one without
// (written before identities existed) with tagNewFile or
// tagNewFileGlobalSeq as before, so older MANIFESTs read as they did.
const (
	tagLogNumber        = 1
	tagNextFileNum      = 2
	tagLastSeq          = 3
	tagDeletedFile      = 4
	tagNewFile          = 5
	tagComparer         = 6
	tagNewFileGlobalSeq = 7
	tagNewFileIdentity  = 8
	tagDBID             = 9
	tagFormatVersion    = 10
	tagMerger           = 11
)

// NumLevels is the number of LSM levels, L0 to L6.
const NumLevels = 7

// ComparerName is the default comparer's name (base.BytewiseComparerName),
// what a DB records when it is opened without Options.Comparer.
const ComparerName = base.BytewiseComparerName

// FormatVersion is the newest DB format version this build writes and
// reads: the MANIFEST, WAL, table and batch formats together, raised by any
// change an older build could not read. Version 1 is Vigil's first
// release's format (every MANIFEST without a format version is one).
// Version 2 adds merge operands (entry kind 2 in batches, WALs and tables)
// and the MANIFEST's merger name (tagMerger).
const FormatVersion = 2

// FormatVersionMerges is the first format version with merge operands.
const FormatVersionMerges = 2

// DeletedFile names a file leaving a level.
type DeletedFile struct {
	Level   int
	FileNum uint64
}

// NewFile is a file entering a level.
type NewFile struct {
	Level int
	Meta  *FileMetadata
}

// VersionEdit is one atomic change to the LSM shape.
type VersionEdit struct {
	// FormatVersion is the DB's format version (0: not in this edit);
	// only the first record of a MANIFEST carries it.
	FormatVersion uint64
	// Comparer names the key order; only the first record of a MANIFEST
	// carries it, and it is always "bytewise".
	Comparer string
	// Merger names the merge operator the DB's merge operands need ("":
	// none recorded in this edit).
	Merger string
	// LogNumber: every WAL below it is flushed (set if HasLogNumber).
	LogNumber    uint64
	HasLogNumber bool
	// NextFileNum is the next file number to allocate.
	NextFileNum    uint64
	HasNextFileNum bool
	// LastSeq is the largest sequence number in any table, or in any WAL
	// below LogNumber.
	LastSeq    uint64
	HasLastSeq bool
	// DBID is the DB's id (set if HasDBID): in the first record of a
	// MANIFEST. The DB's tables carry it in their identities.
	DBID    [16]byte
	HasDBID bool
	Deleted []DeletedFile
	Added   []NewFile
}

// SetLogNumber sets the log number.
func (e *VersionEdit) SetLogNumber(n uint64) { e.LogNumber, e.HasLogNumber = n, true }

// SetNextFileNum sets the next file number.
func (e *VersionEdit) SetNextFileNum(n uint64) { e.NextFileNum, e.HasNextFileNum = n, true }

// SetDBID sets the DB's id.
func (e *VersionEdit) SetDBID(id [16]byte) { e.DBID, e.HasDBID = id, true }

// SetLastSeq sets the last sequence number.
func (e *VersionEdit) SetLastSeq(n uint64) { e.LastSeq, e.HasLastSeq = n, true }

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// Encode appends the edit's encoding to dst.
func (e *VersionEdit) Encode(dst []byte) []byte {
	if e.FormatVersion != 0 {
		dst = binary.AppendUvarint(dst, tagFormatVersion)
		dst = binary.AppendUvarint(dst, e.FormatVersion)
	}
	if e.Comparer != "" {
		dst = binary.AppendUvarint(dst, tagComparer)
		dst = appendBytes(dst, []byte(e.Comparer))
	}
	if e.Merger != "" {
		dst = binary.AppendUvarint(dst, tagMerger)
		dst = appendBytes(dst, []byte(e.Merger))
	}
	if e.HasLogNumber {
		dst = binary.AppendUvarint(dst, tagLogNumber)
		dst = binary.AppendUvarint(dst, e.LogNumber)
	}
	if e.HasNextFileNum {
		dst = binary.AppendUvarint(dst, tagNextFileNum)
		dst = binary.AppendUvarint(dst, e.NextFileNum)
	}
	if e.HasLastSeq {
		dst = binary.AppendUvarint(dst, tagLastSeq)
		dst = binary.AppendUvarint(dst, e.LastSeq)
	}
	if e.HasDBID {
		dst = binary.AppendUvarint(dst, tagDBID)
		dst = append(dst, e.DBID[:]...)
	}
	for _, d := range e.Deleted {
		dst = binary.AppendUvarint(dst, tagDeletedFile)
		dst = binary.AppendUvarint(dst, uint64(d.Level))
		dst = binary.AppendUvarint(dst, d.FileNum)
	}
	for _, a := range e.Added {
		m := a.Meta
		tag := uint64(tagNewFile)
		switch {
		case !m.Identity.IsZero():
			tag = tagNewFileIdentity
		case m.GlobalSeqNum != 0:
			tag = tagNewFileGlobalSeq
		}
		dst = binary.AppendUvarint(dst, tag)
		dst = binary.AppendUvarint(dst, uint64(a.Level))
		dst = binary.AppendUvarint(dst, m.FileNum)
		dst = binary.AppendUvarint(dst, m.Size)
		dst = appendBytes(dst, m.Smallest.Append(nil))
		dst = appendBytes(dst, m.Largest.Append(nil))
		dst = binary.AppendUvarint(dst, m.SmallestSeq)
		dst = binary.AppendUvarint(dst, m.LargestSeq)
		dst = binary.AppendUvarint(dst, m.NumEntries)
		dst = binary.AppendUvarint(dst, m.NumDeletions)
		dst = binary.AppendUvarint(dst, m.NumRangeDels)
		dst = binary.LittleEndian.AppendUint64(dst, m.FileChecksum)
		dst = append(dst, m.ChecksumType.Code())
		switch tag {
		case tagNewFileGlobalSeq:
			dst = binary.AppendUvarint(dst, m.GlobalSeqNum)
		case tagNewFileIdentity:
			dst = binary.AppendUvarint(dst, m.GlobalSeqNum)
			dst = m.Identity.Append(dst)
		}
	}
	return dst
}

// editDecoder reads the fields of one encoded edit with bounds checks.
type editDecoder struct {
	b     []byte
	off   int
	where string
}

func (d *editDecoder) errorf(format string, args ...any) error {
	return base.CorruptionErrorf("%s: version edit at byte %d: %s", d.where, d.off, fmt.Sprintf(format, args...))
}

func (d *editDecoder) uvarint(what string) (uint64, error) {
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		return 0, d.errorf("bad varint for %s", what)
	}
	d.off += n
	return v, nil
}

func (d *editDecoder) bytes(what string) ([]byte, error) {
	n, err := d.uvarint(what + " length")
	if err != nil {
		return nil, err
	}
	if n > uint64(len(d.b)-d.off) {
		return nil, d.errorf("%s length %d exceeds the %d bytes left", what, n, len(d.b)-d.off)
	}
	v := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return v, nil
}

func (d *editDecoder) level() (int, error) {
	l, err := d.uvarint("level")
	if err != nil {
		return 0, err
	}
	if l >= NumLevels {
		return 0, d.errorf("level %d out of range", l)
	}
	return int(l), nil
}

func (d *editDecoder) ikey(what string) (base.InternalKey, error) {
	b, err := d.bytes(what)
	if err != nil {
		return base.InternalKey{}, err
	}
	k, ok := base.DecodeInternalKey(b)
	if !ok {
		return base.InternalKey{}, d.errorf("%s of %d bytes is shorter than an internal key trailer", what, len(b))
	}
	return k.Clone(), nil
}

// DecodeVersionEdit parses one MANIFEST record. where names the file for
// errors. Every length is checked against the record; nothing is trusted.
func DecodeVersionEdit(b []byte, where string) (*VersionEdit, error) {
	d := &editDecoder{b: b, where: where}
	e := &VersionEdit{}
	for d.off < len(b) {
		tagOff := d.off
		tag, err := d.uvarint("tag")
		if err != nil {
			return nil, err
		}
		switch tag {
		case tagFormatVersion:
			if e.FormatVersion, err = d.uvarint("format version"); err != nil {
				return nil, err
			}
			switch {
			case e.FormatVersion == 0:
				return nil, d.errorf("format version 0")
			case e.FormatVersion > FormatVersion:
				// Before any field this build may not know.
				return nil, base.InvalidArgumentErrorf("%s: the DB's format version is %d, newer than this build's %d: open it with a newer Vigil",
					where, e.FormatVersion, FormatVersion)
			}
		case tagComparer:
			name, err := d.bytes("comparer name")
			if err != nil {
				return nil, err
			}
			e.Comparer = string(name)
		case tagMerger:
			name, err := d.bytes("merger name")
			if err != nil {
				return nil, err
			}
			if len(name) == 0 {
				return nil, d.errorf("empty merger name")
			}
			e.Merger = string(name)
		case tagLogNumber:
			if e.LogNumber, err = d.uvarint("log number"); err != nil {
				return nil, err
			}
			e.HasLogNumber = true
		case tagNextFileNum:
			if e.NextFileNum, err = d.uvarint("next file number"); err != nil {
				return nil, err
			}
			e.HasNextFileNum = true
		case tagDBID:
			if len(b)-d.off < len(e.DBID) {
				return nil, d.errorf("DB id: %d bytes left, need %d", len(b)-d.off, len(e.DBID))
			}
			copy(e.DBID[:], b[d.off:])
			d.off += len(e.DBID)
			e.HasDBID = true
		case tagLastSeq:
			if e.LastSeq, err = d.uvarint("last seqnum"); err != nil {
				return nil, err
			}
			if e.LastSeq > base.SeqNumMax {
				return nil, d.errorf("last seqnum %d exceeds the maximum", e.LastSeq)
			}
			e.HasLastSeq = true
		case tagDeletedFile:
			var df DeletedFile
			if df.Level, err = d.level(); err != nil {
				return nil, err
			}
			if df.FileNum, err = d.uvarint("deleted file number"); err != nil {
				return nil, err
			}
			e.Deleted = append(e.Deleted, df)
		case tagNewFile, tagNewFileGlobalSeq, tagNewFileIdentity:
			nf, err := d.newFile(tag)
			if err != nil {
				return nil, err
			}
			e.Added = append(e.Added, nf)
		default:
			d.off = tagOff
			return nil, d.errorf("unknown tag %d", tag)
		}
	}
	return e, nil
}

// newFile decodes the fields of a new file after its tag (tagNewFile,
// tagNewFileGlobalSeq or tagNewFileIdentity).
func (d *editDecoder) newFile(tag uint64) (NewFile, error) {
	nf := NewFile{Meta: &FileMetadata{}}
	m := nf.Meta
	var err error
	if nf.Level, err = d.level(); err != nil {
		return nf, err
	}
	fields := []struct {
		dst  *uint64
		name string
	}{{&m.FileNum, "file number"}, {&m.Size, "file size"}}
	for _, f := range fields {
		if *f.dst, err = d.uvarint(f.name); err != nil {
			return nf, err
		}
	}
	if m.Smallest, err = d.ikey("smallest key"); err != nil {
		return nf, err
	}
	if m.Largest, err = d.ikey("largest key"); err != nil {
		return nf, err
	}
	fields = []struct {
		dst  *uint64
		name string
	}{{&m.SmallestSeq, "smallest seqnum"}, {&m.LargestSeq, "largest seqnum"}, {&m.NumEntries, "entry count"},
		{&m.NumDeletions, "deletion count"}, {&m.NumRangeDels, "range deletion count"}}
	for _, f := range fields {
		if *f.dst, err = d.uvarint(f.name); err != nil {
			return nf, err
		}
	}
	if len(d.b)-d.off < 9 {
		return nf, d.errorf("new file %d: %d bytes left for checksum and type, need 9", m.FileNum, len(d.b)-d.off)
	}
	m.FileChecksum = binary.LittleEndian.Uint64(d.b[d.off:])
	code := d.b[d.off+8]
	m.ChecksumType = checksum.TypeFromCode(code)
	d.off += 9
	if !m.ChecksumType.Valid() {
		return nf, d.errorf("new file %d: unknown checksum type %d", m.FileNum, code)
	}
	if m.Size > math.MaxInt64 {
		return nf, d.errorf("new file %d: size %d out of range", m.FileNum, m.Size)
	}
	if tag == tagNewFile {
		return nf, nil
	}
	if m.GlobalSeqNum, err = d.uvarint("global seqnum"); err != nil {
		return nf, err
	}
	if gs := m.GlobalSeqNum; gs != 0 || tag == tagNewFileGlobalSeq {
		if err := d.checkGlobalSeq(m); err != nil {
			return nf, err
		}
	}
	if tag == tagNewFileIdentity {
		if len(d.b)-d.off < base.TableIdentityLen {
			return nf, d.errorf("new file %d: %d bytes left for its identity, need %d", m.FileNum, len(d.b)-d.off, base.TableIdentityLen)
		}
		m.Identity, _ = base.DecodeTableIdentity(d.b[d.off : d.off+base.TableIdentityLen])
		d.off += base.TableIdentityLen
		if m.Identity.IsZero() {
			return nf, d.errorf("new file %d: zero identity under the tag of a table with one", m.FileNum)
		}
	}
	return nf, nil
}

// checkGlobalSeq checks an ingested table's global seqnum against its
// bounds.
func (d *editDecoder) checkGlobalSeq(m *FileMetadata) error {
	gs := m.GlobalSeqNum
	switch {
	case gs == 0 || gs > base.SeqNumMax:
		return d.errorf("new file %d: global seqnum %d out of range", m.FileNum, gs)
	case m.SmallestSeq != gs || m.LargestSeq != gs:
		return d.errorf("new file %d: seqnums %d..%d differ from its global seqnum %d", m.FileNum, m.SmallestSeq, m.LargestSeq, gs)
	case m.Smallest.SeqNum() != gs || (m.Largest.SeqNum() != gs && !m.LargestIsExclusive()):
		return d.errorf("new file %d: bounds %s..%s do not carry its global seqnum %d", m.FileNum, m.Smallest, m.Largest, gs)
	}
	return nil
}
