package wal

import (
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// Format constants. They are part of the on-disk format.
const (
	// BlockSize is the size of a block: fragments never cross a multiple of
	// BlockSize, so a reader can resynchronise at the next block after
	// damage, and a length field can never legitimately exceed it.
	BlockSize = 32 << 10
	// FragmentHeaderSize is the size of a fragment header: checksum (4),
	// length (2), type (1).
	FragmentHeaderSize = 7
	// FileHeaderSize is the size of the file header at offset 0.
	FileHeaderSize = 24
	// FormatVersion is the version written in the file header. Version 2
	// (this one) checksums every fragment header byte after the checksum
	// field; version 1, whose checksums covered only the type and the
	// payload, is refused.
	FormatVersion = 2
	// MaxFragmentPayload is the largest payload a fragment can carry.
	MaxFragmentPayload = BlockSize - FragmentHeaderSize
)

// fileMagic identifies a Vigil record log.
const fileMagic = "VIGLRLOG"

// ctxSeed is mixed into every fragment's context value; see the package
// documentation.
const ctxSeed = 0x76676c31

// Fragment types. Zero is reserved: it is what unwritten (zeroed) bytes read as.
const (
	fragZero   byte = 0
	fragFull   byte = 1
	fragFirst  byte = 2
	fragMiddle byte = 3
	fragLast   byte = 4
)

func fragTypeName(t byte) string {
	switch t {
	case fragFull:
		return "FULL"
	case fragFirst:
		return "FIRST"
	case fragMiddle:
		return "MIDDLE"
	case fragLast:
		return "LAST"
	}
	return "type " + strconv.Itoa(int(t))
}

// logBase is the per-log part of a fragment's context value. It is the log
// number itself (folded to 32 bits) rather than a hash of it, so that two
// logs with nearby numbers can never share a base, and so a mismatch can be
// traced back to the log a stale fragment came from.
func logBase(logNum uint64) uint32 {
	return uint32(logNum) ^ uint32(logNum>>32) ^ ctxSeed
}

// offsetTerm folds a file offset to 32 bits, as checksum.ContextModifier does.
func offsetTerm(off int64) uint32 {
	return uint32(off) + uint32(uint64(off)>>32)
}

// fragmentContext is the value added to a fragment's checksum: it binds the
// fragment to its log and its file offset. Unlike checksum.ContextModifier it
// is never disabled.
func fragmentContext(logNum uint64, off int64) uint32 {
	return logBase(logNum) ^ offsetTerm(off)
}

// checksumSize is the size of the checksum field at the start of a fragment
// header. Everything after it, the length and type fields and the payload,
// is covered by the checksum: frag[checksumSize:] is one contiguous slice.
const checksumSize = 4

// rawChecksum is lo32 of the log's checksum of covered (masked for CRC-32C),
// before the context value is added.
func rawChecksum(t checksum.Type, covered []byte) uint32 {
	s := uint32(checksum.Sum64(t, covered))
	if t == checksum.CRC32c {
		s = checksum.MaskCRC32c(s)
	}
	return s
}

// fragmentChecksum is the stored checksum of a fragment whose header is at
// file offset off and whose bytes after the checksum field (length, type,
// payload: frag[checksumSize:], contiguous) are covered. It is 0 for None.
func fragmentChecksum(t checksum.Type, logNum uint64, off int64, covered []byte) uint32 {
	if t == checksum.None {
		return 0
	}
	return rawChecksum(t, covered) + fragmentContext(logNum, off)
}

// headerRecycled is the flag (byte 10 of the file header) of a log written
// over the blocks of an older one: what follows the log's end may be that
// log's fragments (see Recycling in the package documentation).
const headerRecycled = 0x01

// encodeFileHeader writes the file header into dst[:FileHeaderSize].
func encodeFileHeader(dst []byte, logNum uint64, t checksum.Type, recycled bool) {
	_ = dst[FileHeaderSize-1]
	copy(dst[0:8], fileMagic)
	dst[8] = FormatVersion
	dst[9] = t.Code()
	dst[10], dst[11] = 0, 0
	if recycled {
		dst[10] = headerRecycled
	}
	binary.LittleEndian.PutUint64(dst[12:20], logNum)
	binary.LittleEndian.PutUint32(dst[20:24], headerChecksum(dst[:20]))
}

func headerChecksum(b []byte) uint32 {
	return checksum.MaskCRC32c(uint32(checksum.Sum64(checksum.CRC32c, b)))
}

// decodeFileHeader checks a complete FileHeaderSize-byte header. Errors wrap
// base.ErrCorruption.
func decodeFileHeader(name string, h []byte) (logNum uint64, t checksum.Type, recycled bool, err error) {
	if len(h) < FileHeaderSize {
		return 0, 0, false, base.CorruptionErrorf("wal: %s: file header is %d bytes, want %d", name, len(h), FileHeaderSize)
	}
	if string(h[0:8]) != fileMagic {
		return 0, 0, false, base.CorruptionErrorf("wal: %s: offset 0: bad magic %q, want %q: not a Vigil record log", name, h[0:8], fileMagic)
	}
	stored := binary.LittleEndian.Uint32(h[20:24])
	if computed := headerChecksum(h[:20]); stored != computed {
		return 0, 0, false, base.CorruptionErrorf("wal: %s: offset 0: file header checksum mismatch (stored %#08x, computed %#08x)", name, stored, computed)
	}
	if h[8] != FormatVersion {
		why := ""
		if h[8] == 1 {
			why = "; version 1, whose fragment checksums do not cover the fragment header, is no longer read"
		}
		return 0, 0, false, base.CorruptionErrorf("wal: %s: offset 8: unsupported record log format version %d (this build reads version %d)%s", name, h[8], FormatVersion, why)
	}
	t = checksum.TypeFromCode(h[9])
	if !t.Valid() {
		return 0, 0, false, base.CorruptionErrorf("wal: %s: offset 9: unknown checksum type %d", name, h[9])
	}
	if h[10]&^headerRecycled != 0 || h[11] != 0 {
		return 0, 0, false, base.CorruptionErrorf("wal: %s: offset 10: reserved header bytes %#02x %#02x hold unknown flags (written by a newer format?)", name, h[10], h[11])
	}
	recycled = h[10]&headerRecycled != 0
	if recycled && t == checksum.None {
		return 0, 0, false, base.CorruptionErrorf("wal: %s: offset 10: a recycled log without checksums (no writer makes one: its end could not be told from an older log's fragments)", name)
	}
	return binary.LittleEndian.Uint64(h[12:20]), t, recycled, nil
}

// isTornHeader reports whether h, shorter than a header, could be the start
// of one that a crash cut short: zeros, or a prefix of the magic (the bytes
// after the magic cannot be checked without the header CRC).
func isTornHeader(h []byte) bool {
	if allZero(h) {
		return true
	}
	n := min(len(h), len(fileMagic))
	return string(h[:n]) == fileMagic[:n]
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// RecoveryMode says how a Reader treats damaged bytes: the one type for the
// concept (the root package's Options.WALRecoveryMode is an alias of it). Its
// zero value is PointInTime, RocksDB's default, so a zero Options means the
// default. The numbers of the command line (--wal_recovery_mode) and of
// RocksDB's enum are different (RocksDB's 2 is PointInTime); convert with
// RocksDB and RecoveryModeFromRocksDB. See the package documentation for the
// table.
type RecoveryMode uint8

// The recovery modes.
const (
	// PointInTime, the default, returns the intact prefix up to the first
	// corruption. If a fragment that verifies follows the damage anywhere
	// later in the file, the damage cannot be a torn write and Next returns
	// it as an error, as TolerateCorruptedTailRecords does, so synced writes
	// are never dropped silently; otherwise (nothing verifiable to end of
	// file, or checksum type None) reading stops there without an error and
	// Reader.Stopped tells what stopped it, so the DB opens in a consistent
	// state as of some point in time.
	PointInTime RecoveryMode = iota
	// TolerateCorruptedTailRecords accepts a torn tail (an incomplete last
	// record, zeroed trailing bytes); any other corruption is an error. It
	// guarantees acknowledged synced writes are never silently rolled back.
	TolerateCorruptedTailRecords
	// AbsoluteConsistency treats every anomaly, a torn tail included, as an
	// error. For tests and for users who prefer failing to losing a byte.
	AbsoluteConsistency
	// SkipAnyCorruptedRecords drops damaged records and goes on: salvage
	// mode, for when losing records in the middle is better than not opening.
	// The records dropped are counted (the DB's Metrics and LOG).
	SkipAnyCorruptedRecords
)

var modeNames = [...]string{"PointInTime", "TolerateCorruptedTailRecords", "AbsoluteConsistency", "SkipAnyCorruptedRecords"}

// rocksModeNames are RocksDB's enumerator names, accepted by ParseRecoveryMode.
var rocksModeNames = [...]string{"kPointInTimeRecovery", "kTolerateCorruptedTailRecords", "kAbsoluteConsistency", "kSkipAnyCorruptedRecords"}

// rocksModeNumbers are RocksDB's numbers of the modes, in RecoveryMode order.
var rocksModeNumbers = [...]int{2, 0, 1, 3}

// Valid reports whether m is one of the four modes.
func (m RecoveryMode) Valid() bool { return int(m) < len(modeNames) }

// String returns the mode's name ("PointInTime"), or "RecoveryMode(N)".
func (m RecoveryMode) String() string {
	if m.Valid() {
		return modeNames[m]
	}
	return "RecoveryMode(" + strconv.Itoa(int(m)) + ")"
}

// RocksDB returns RocksDB's number for the mode (kTolerateCorruptedTailRecords
// = 0, kAbsoluteConsistency = 1, kPointInTimeRecovery = 2,
// kSkipAnyCorruptedRecords = 3), or -1 for an invalid mode.
func (m RecoveryMode) RocksDB() int {
	if !m.Valid() {
		return -1
	}
	return rocksModeNumbers[m]
}

// RecoveryModeFromRocksDB maps RocksDB's numbering (db_bench's
// --wal_recovery_mode) to a mode; other numbers are an error wrapping
// base.ErrInvalidArgument that lists the valid ones.
func RecoveryModeFromRocksDB(n int) (RecoveryMode, error) {
	for m := range rocksModeNumbers {
		if rocksModeNumbers[m] == n {
			return RecoveryMode(m), nil
		}
	}
	return 0, base.InvalidArgumentErrorf("unknown WAL recovery mode %d; %s", n, validModes)
}

const validModes = "valid modes are 0 (TolerateCorruptedTailRecords), 1 (AbsoluteConsistency), 2 (PointInTime), 3 (SkipAnyCorruptedRecords)"

// ParseRecoveryMode accepts RocksDB's number ("2"), a name ("PointInTime")
// or RocksDB's name ("kPointInTimeRecovery"), case-insensitively. An unknown
// value is an error wrapping base.ErrInvalidArgument.
func ParseRecoveryMode(s string) (RecoveryMode, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.Atoi(s); err == nil {
		return RecoveryModeFromRocksDB(n)
	}
	for i := range modeNames {
		if strings.EqualFold(s, modeNames[i]) || strings.EqualFold(s, rocksModeNames[i]) {
			return RecoveryMode(i), nil
		}
	}
	return 0, base.InvalidArgumentErrorf("wal: unknown recovery mode %q; %s", s, validModes)
}

// checkMode validates a mode given by a caller.
func checkMode(m RecoveryMode) error {
	if m.Valid() {
		return nil
	}
	return base.InvalidArgumentErrorf("wal: %s is not a valid recovery mode", m)
}
