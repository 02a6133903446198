package vigil

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

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
const (
	tagLogNumber   = 1
	tagNextFileNum = 2
	tagLastSeq     = 3
	tagDeletedFile = 4
	tagNewFile     = 5
	tagComparer    = 6
)

// numLevels is the number of LSM levels, L0 to L6.
const numLevels = 7

const comparerName = "bytewise"

// deletedFileEntry names a file leaving a level.
type deletedFileEntry struct {
	level   int
	fileNum uint64
}

// newFileEntry is a file entering a level.
type newFileEntry struct {
	level int
	meta  *fileMetadata
}

// versionEdit is one atomic change to the LSM shape.
type versionEdit struct {
	comparer       string
	logNumber      uint64
	hasLogNumber   bool
	nextFileNum    uint64
	hasNextFileNum bool
	lastSeq        uint64
	hasLastSeq     bool
	deleted        []deletedFileEntry
	added          []newFileEntry
}

func (e *versionEdit) setLogNumber(n uint64)   { e.logNumber, e.hasLogNumber = n, true }
func (e *versionEdit) setNextFileNum(n uint64) { e.nextFileNum, e.hasNextFileNum = n, true }
func (e *versionEdit) setLastSeq(n uint64)     { e.lastSeq, e.hasLastSeq = n, true }

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// encode appends the edit's encoding to dst.
func (e *versionEdit) encode(dst []byte) []byte {
	if e.comparer != "" {
		dst = binary.AppendUvarint(dst, tagComparer)
		dst = appendBytes(dst, []byte(e.comparer))
	}
	if e.hasLogNumber {
		dst = binary.AppendUvarint(dst, tagLogNumber)
		dst = binary.AppendUvarint(dst, e.logNumber)
	}
	if e.hasNextFileNum {
		dst = binary.AppendUvarint(dst, tagNextFileNum)
		dst = binary.AppendUvarint(dst, e.nextFileNum)
	}
	if e.hasLastSeq {
		dst = binary.AppendUvarint(dst, tagLastSeq)
		dst = binary.AppendUvarint(dst, e.lastSeq)
	}
	for _, d := range e.deleted {
		dst = binary.AppendUvarint(dst, tagDeletedFile)
		dst = binary.AppendUvarint(dst, uint64(d.level))
		dst = binary.AppendUvarint(dst, d.fileNum)
	}
	for _, a := range e.added {
		m := a.meta
		dst = binary.AppendUvarint(dst, tagNewFile)
		dst = binary.AppendUvarint(dst, uint64(a.level))
		dst = binary.AppendUvarint(dst, m.fileNum)
		dst = binary.AppendUvarint(dst, m.size)
		dst = appendBytes(dst, m.smallest.Append(nil))
		dst = appendBytes(dst, m.largest.Append(nil))
		dst = binary.AppendUvarint(dst, m.smallestSeq)
		dst = binary.AppendUvarint(dst, m.largestSeq)
		dst = binary.AppendUvarint(dst, m.numEntries)
		dst = binary.AppendUvarint(dst, m.numDeletions)
		dst = binary.AppendUvarint(dst, m.numRangeDels)
		dst = binary.LittleEndian.AppendUint64(dst, m.fileChecksum)
		dst = append(dst, byte(m.checksumType))
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
	if l >= numLevels {
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

// decodeVersionEdit parses one MANIFEST record. where names the file for
// errors. Every length is checked against the record; nothing is trusted.
func decodeVersionEdit(b []byte, where string) (*versionEdit, error) {
	d := &editDecoder{b: b, where: where}
	e := &versionEdit{}
	for d.off < len(b) {
		tagOff := d.off
		tag, err := d.uvarint("tag")
		if err != nil {
			return nil, err
		}
		switch tag {
		case tagComparer:
			name, err := d.bytes("comparer name")
			if err != nil {
				return nil, err
			}
			e.comparer = string(name)
		case tagLogNumber:
			if e.logNumber, err = d.uvarint("log number"); err != nil {
				return nil, err
			}
			e.hasLogNumber = true
		case tagNextFileNum:
			if e.nextFileNum, err = d.uvarint("next file number"); err != nil {
				return nil, err
			}
			e.hasNextFileNum = true
		case tagLastSeq:
			if e.lastSeq, err = d.uvarint("last seqnum"); err != nil {
				return nil, err
			}
			if e.lastSeq > base.SeqNumMax {
				return nil, d.errorf("last seqnum %d exceeds the maximum", e.lastSeq)
			}
			e.hasLastSeq = true
		case tagDeletedFile:
			var df deletedFileEntry
			if df.level, err = d.level(); err != nil {
				return nil, err
			}
			if df.fileNum, err = d.uvarint("deleted file number"); err != nil {
				return nil, err
			}
			e.deleted = append(e.deleted, df)
		case tagNewFile:
			nf := newFileEntry{meta: &fileMetadata{}}
			m := nf.meta
			if nf.level, err = d.level(); err != nil {
				return nil, err
			}
			fields := []struct {
				dst  *uint64
				name string
			}{{&m.fileNum, "file number"}, {&m.size, "file size"}}
			for _, f := range fields {
				if *f.dst, err = d.uvarint(f.name); err != nil {
					return nil, err
				}
			}
			if m.smallest, err = d.ikey("smallest key"); err != nil {
				return nil, err
			}
			if m.largest, err = d.ikey("largest key"); err != nil {
				return nil, err
			}
			fields = []struct {
				dst  *uint64
				name string
			}{{&m.smallestSeq, "smallest seqnum"}, {&m.largestSeq, "largest seqnum"}, {&m.numEntries, "entry count"},
				{&m.numDeletions, "deletion count"}, {&m.numRangeDels, "range deletion count"}}
			for _, f := range fields {
				if *f.dst, err = d.uvarint(f.name); err != nil {
					return nil, err
				}
			}
			if len(b)-d.off < 9 {
				return nil, d.errorf("new file %d: %d bytes left for checksum and type, need 9", m.fileNum, len(b)-d.off)
			}
			m.fileChecksum = binary.LittleEndian.Uint64(b[d.off:])
			m.checksumType = checksum.Type(b[d.off+8])
			d.off += 9
			if !m.checksumType.Valid() {
				return nil, d.errorf("new file %d: unknown checksum type %d", m.fileNum, m.checksumType)
			}
			if m.size > math.MaxInt64 {
				return nil, d.errorf("new file %d: size %d out of range", m.fileNum, m.size)
			}
			e.added = append(e.added, nf)
		default:
			d.off = tagOff
			return nil, d.errorf("unknown tag %d", tag)
		}
	}
	return e, nil
}

// sortedFileNums returns the numbers of files added by e, for logging.
func (e *versionEdit) addedFileNums() []uint64 {
	nums := make([]uint64, 0, len(e.added))
	for _, a := range e.added {
		nums = append(nums, a.meta.fileNum)
	}
	sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
	return nums
}
