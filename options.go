package vigil

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/memtable"
	"github.com/vigildb/vigil/sst"
	"github.com/vigildb/vigil/wal"
)

// ChecksumType selects the checksum guarding SST blocks, footers, WAL records
// and per-key-value protection. It is the checksum package's Type (one type
// for the concept). The zero value, ChecksumDefault, means XXH3: a zero
// Options must never mean "no checksums", so None has its own name. The
// numbers stored on disk and given on the command line (--checksum_type) are
// RocksDB's, a different numbering in which 0 is no checksum: convert with
// the type's Code method and checksum.TypeFromCode.
type ChecksumType = checksum.Type

// Checksum types.
const (
	ChecksumDefault  = checksum.Default  // XXH3
	ChecksumNone     = checksum.None     // no checksums at all
	ChecksumCRC32c   = checksum.CRC32c   // CRC-32C, masked
	ChecksumXXHash   = checksum.XXHash   // XXH32
	ChecksumXXHash64 = checksum.XXHash64 // XXH64, low 32 bits in trailers
	ChecksumXXH3     = checksum.XXH3     // XXH3-64, RocksDB's default since 7.8
	ChecksumCRC64    = checksum.CRC64    // CRC-64/Jones (Redis, Valkey)
)

const validChecksumTypes = "ChecksumDefault, ChecksumNone, ChecksumCRC32c, ChecksumXXHash, ChecksumXXHash64, ChecksumXXH3 or ChecksumCRC64"

// Compression selects the block compression of SST files. It is package
// sst's Compression (one type for the concept). The zero value,
// DefaultCompression, means Snappy, as in goleveldb. The byte stored in a
// block trailer is RocksDB's, a different numbering (0 is none): see the
// type's Code method.
type Compression = sst.Compression

// Compression values.
const (
	DefaultCompression = sst.DefaultCompression // Snappy
	NoCompression      = sst.NoCompression      // blocks stored as they are
	SnappyCompression  = sst.SnappyCompression  // Snappy's block format, when it saves 1/8
	ZstdCompression    = sst.ZstdCompression    // one zstd frame per block at ZstdLevel, when it saves 1/8
)

const validCompressions = "DefaultCompression, NoCompression, SnappyCompression or ZstdCompression"

// FormatVersionNewest is the newest DB format version this build writes
// and reads: MANIFEST, WAL, table and batch formats together. Version 1 is
// Vigil's first release's format.
const FormatVersionNewest = manifest.FormatVersion

// LevelOptions are the table options of one LSM level (Options.Levels).
type LevelOptions struct {
	// Compression of the level's tables; DefaultCompression (the zero
	// value) means Options.Compression.
	Compression Compression
	// ZstdLevel with ZstdCompression; 0 means Options.ZstdLevel.
	ZstdLevel int
}

// levelCompression is the compression and zstd level of tables written
// into level (flushes: 0).
func (o *Options) levelCompression(level int) (Compression, int) {
	c, z := o.Compression, o.ZstdLevel
	if n := len(o.Levels); n > 0 {
		lo := o.Levels[min(level, n-1)]
		if lo.Compression != DefaultCompression {
			c = lo.Compression
		}
		if lo.ZstdLevel != 0 {
			z = lo.ZstdLevel
		}
	}
	return c.Resolve(), z
}

// WALRecoveryMode says what Open does with a damaged WAL. It is the wal
// package's RecoveryMode (one type for the concept); the zero value is
// WALRecoverPointInTime, RocksDB's default. The numbers of the command line
// (--wal_recovery_mode) are RocksDB's 0-3, a different order: convert with
// WALRecoveryModeFromRocksDB and the mode's RocksDB method.
type WALRecoveryMode = wal.RecoveryMode

// WAL recovery modes, with RocksDB's semantics (see package wal for the
// details of each).
const (
	// WALRecoverPointInTime replays up to the first corrupted record and
	// opens with that consistent prefix. A torn tail is normal; damage
	// followed by intact records is not a torn tail, and fails Open.
	WALRecoverPointInTime = wal.PointInTime
	// WALTolerateCorruptedTail accepts an incomplete last record (a crash
	// mid-write) and fails Open on any other corruption.
	WALTolerateCorruptedTail = wal.TolerateCorruptedTailRecords
	// WALAbsoluteConsistency fails Open on any corruption, even at the tail.
	WALAbsoluteConsistency = wal.AbsoluteConsistency
	// WALSkipAnyCorrupted skips corrupted records and replays the rest: for
	// salvaging data, at the price of consistency. Skipped records are
	// counted in Metrics and the LOG.
	WALSkipAnyCorrupted = wal.SkipAnyCorruptedRecords
)

// WALRecoveryModeFromRocksDB maps RocksDB's numbering (0-3) to a mode.
func WALRecoveryModeFromRocksDB(n int) (WALRecoveryMode, error) {
	return wal.RecoveryModeFromRocksDB(n)
}

// Option defaults. A zero field in Options takes these values.
const (
	DefaultWriteBufferSize       = 64 << 20
	DefaultMaxImmutableMemtables = 2
	DefaultBlockSize             = 4096
	DefaultBlockRestartInterval  = 16
	DefaultBloomBitsPerKey       = 10
	DefaultBlockCacheSize        = 64 << 20
	DefaultL0CompactionTrigger   = 4
	DefaultL0StopWritesTrigger   = 12
	DefaultL0SlowdownTrigger     = 8
	DefaultDelayedWriteRate      = 16 << 20
	DefaultWALBytesPerSync       = 1 << 20
	DefaultLBaseMaxBytes         = 64 << 20
	DefaultLevelMultiplier       = 10
	DefaultTargetFileSize        = 4 << 20
	DefaultMaxOpenFiles          = 1000
	// DefaultMemtableFilterRatio: 512 KiB of filter for a 64 MiB memtable,
	// about 8 bits a key for entries of ~130 bytes (2-3 % false
	// positives).
	DefaultMemtableFilterRatio = 1.0 / 128
)

// Options configure a DB. The zero value is usable and means the defaults
// listed with each field; Open calls EnsureDefaults on a copy and Validate.
// A field whose zero value would be a legitimate setting different from the
// default (no bloom filter, no block cache) takes a negative value to mean
// "off".
type Options struct {
	// FS is the file system; default vfs.Default. Tests use vfs.NewMem() or
	// vfs.NewStrictMem().
	FS vfs.FS
	// ChecksumType guards SST blocks, footers, WAL records and per-KV
	// protection. Default XXH3. Files keep the type they were written with,
	// so a DB reopened with another type still reads its old files.
	ChecksumType ChecksumType
	// ParanoidMemoryChecks makes memtable Get/Seek/Next/Prev verify key order,
	// and the DB iterator verify that user keys come strictly ordered, so
	// memory corruption is an ErrCorruption at read time. Default false.
	ParanoidMemoryChecks bool

	// SkipReadChecksums makes Get and iterators read SST data blocks that
	// are not in the block cache without verifying their checksums, as
	// RocksDB's ReadOptions.verify_checksums = false (kvbench's
	// --verify_checksum=false) does: it is there to measure what the check
	// costs, and it gives up the promise that a damaged block is an error.
	// Bounds are still checked, so a damaged block returns wrong data but
	// never crashes. What stays verified: blocks so read are cached apart,
	// so no verifying read ever uses one; compactions, flushes, Verify,
	// Checksum, Checkpoint and backups verify every block. Default false.
	SkipReadChecksums bool
	// MemtableProtectionBytesPerKey stores 0, 1, 2, 4 or 8 bytes of a per-entry
	// checksum in the memtable, verified on every read of the entry and at
	// flush. Default 0. Needs a ChecksumType other than None.
	MemtableProtectionBytesPerKey int
	// BatchProtectionBytesPerKey makes writes carry 0, 1, 2, 4 or 8 bytes
	// of checksum per entry from the moment the entry enters a Batch (made
	// with NewBatch, or DB.Put, Delete and DeleteRange) to the memtable:
	// computed from the caller's key and value at Put, checked against the
	// batch's bytes just before they are written to the WAL, and again
	// against each entry's copy in the memtable, whose own protection
	// bytes are derived from it (RocksDB's protection_bytes_per_key on
	// write batches). A bit flipped in a batch's buffer between Put and
	// Apply makes Apply fail with ErrCorruption, writing nothing: the WAL
	// checksum alone would have made the flipped bytes durable. N bytes
	// miss a random corruption with probability 2^-8N; a batch keeps 8
	// bytes per entry in memory whatever N is. Cost: one hash of each
	// entry at Put and one more before the WAL write (and one at the
	// memtable insert unless MemtableProtectionBytesPerKey is on, which
	// hashes there anyway); see Batch for batches made without a DB.
	// Default 0 (off). Needs a ChecksumType other than None.
	BatchProtectionBytesPerKey int
	// WriteBufferSize is the memtable size before rotation. Default 64 MiB.
	// The first three memtables after Open are a quarter, a quarter and
	// a half of it (together one WriteBufferSize, flushed together), as
	// Pebble's grow from 256 KiB: random inserts into a smaller list are
	// faster. (Under 1 MiB, all are WriteBufferSize.)
	WriteBufferSize int
	// MemtableFilterRatio sizes a bloom filter over each memtable's keys, in
	// bytes per byte of WriteBufferSize (RocksDB's
	// memtable_prefix_bloom_size_ratio with memtable_whole_key_filtering).
	// A Get of a key the memtable does not hold, nearly every Get after a
	// fill of random keys, then costs a cache line instead of a search of
	// the skiplist (twenty levels or so for a full 64 MiB memtable, each a
	// cache miss). A memtable builds its filter once Gets of keys it does
	// not hold come (1024 of them), not from its first write: keeping one
	// up to date costs an insert 10-15 %, which a bulk load would pay for
	// nothing, and a Get that finds its key pays a cache line for nothing.
	// Default DefaultMemtableFilterRatio (1/128); negative disables it; at
	// most 1/4. ParanoidMemoryChecks turns it off: a bit lost in RAM could
	// hide a key there, and no check could tell.
	MemtableFilterRatio float64
	// MaxImmutableMemtables: writes stall while this many memtables wait to be
	// flushed, and they hold this many WriteBufferSizes (the small first
	// memtables count by their size). Default 2.
	MaxImmutableMemtables int
	// BlockSize is the target uncompressed size of SST data blocks. Default 4096.
	BlockSize int
	// BlockRestartInterval is the number of keys between restart points in a
	// block. Default 16.
	BlockRestartInterval int
	// BloomBitsPerKey sizes the per-table bloom filter; default 10 (about 1 %
	// false positives); negative disables filters.
	BloomBitsPerKey int
	// Compression of SST blocks. Default Snappy.
	Compression Compression
	// ZstdLevel is zstd's level with ZstdCompression (RocksDB's
	// compression_opts.level): 1 (fastest) to 22 (smallest); 0 means 3,
	// zstd's default. Ignored by the other compressions.
	ZstdLevel int
	// ScrubInterval, if positive, runs the background scrubber: one pass
	// over every live table per interval, re-reading it from disk and
	// checking every block checksum and the whole-file checksum (see
	// DB.Scrub, Metrics.Scrub). A table found damaged is reported
	// (EventListener.CorruptionFound, the LOG) and left out of compactions.
	// 0: off.
	ScrubInterval time.Duration
	// ScrubBytesPerSec paces the scrubber's reads; 0 means
	// DefaultScrubBytesPerSec (4 MiB/s), negative no limit.
	ScrubBytesPerSec int64
	// HealFrom, if set, is a backup directory (package backup) the
	// scrubber heals from: a table it finds damaged is replaced by the
	// backup's identical copy, after verifying it (see HealFromBackup),
	// instead of being left out of compactions.
	HealFrom string
	// FormatVersion is the format version a new DB is created with (see
	// FormatVersionNewest): 0 means the newest this build writes. An
	// existing DB keeps the version its MANIFEST records; one newer than
	// this build's is refused (ErrInvalidArgument naming both).
	FormatVersion int
	// Comparer orders the keys (see Comparer); nil means DefaultComparer,
	// bytewise. A DB records its comparer's name when it is created and
	// then opens only with a comparer of that name.
	Comparer *Comparer
	// Merger combines merge operands (DB.Merge, Batch.Merge; see Merger).
	// nil: merges are refused, unless the DB records a built-in merger
	// (BuiltinMerger), which it then uses. A DB records the name of the
	// Merger it first opens with (raising its format version to 2 if it
	// was 1) and then opens only with a Merger of that name.
	Merger *Merger
	// Levels sets the compression of the tables written into each LSM
	// level (flushes write L0, compactions their output level), as
	// Pebble's Options.Levels and RocksDB's compression_per_level do:
	// Levels[i] applies to level i, and the last element to every level
	// past the slice (so {{NoCompression}, {ZstdCompression}} is none in
	// L0 and zstd below). A zero LevelOptions, or nil Levels, means
	// Compression and ZstdLevel above.
	Levels []LevelOptions
	// BlockCacheSize is the byte capacity of the block cache shared by all
	// tables. Default 64 MiB; negative disables the cache.
	BlockCacheSize int64
	// MemoryBudget, if positive, is one limit for the memtables and the
	// block cache together (RocksDB's WriteBufferManager charging the
	// cache): the block cache gets what the memtables' arenas leave of it,
	// and BlockCacheSize is ignored (but a negative one still disables the
	// cache). The memtables themselves are bounded by WriteBufferSize and
	// MaxImmutableMemtables, so choose MemoryBudget above
	// (1 + MaxImmutableMemtables) * WriteBufferSize to leave room for
	// blocks. Metrics.Memory shows the split. Default 0: no shared limit.
	MemoryBudget int64
	// MaxOpenFiles bounds the table cache (open SST files). Default 1000.
	MaxOpenFiles int
	// L0CompactionTrigger is the number of L0 files that starts a compaction
	// into Lbase. Default 4.
	L0CompactionTrigger int
	// L0StopWritesTrigger is the number of L0 files at which writes stall
	// until compaction catches up. Default 12.
	L0StopWritesTrigger int
	// L0SlowdownWritesTrigger is the number of L0 files from which writes
	// are slowed to DelayedWriteRate (less as L0 nears the stop trigger),
	// so that compaction catches up before writes must stop: writers slow
	// down smoothly instead of stalling at the stop trigger. It must lie
	// between L0CompactionTrigger and L0StopWritesTrigger (equal to the
	// stop trigger: no slowdown). Default 8, or L0CompactionTrigger if
	// larger, or L0StopWritesTrigger if smaller (RocksDB's
	// level0_slowdown_writes_trigger).
	L0SlowdownWritesTrigger int
	// DelayedWriteRate is the write rate, in bytes per second, at the
	// slowdown trigger. Default 16 MiB/s (RocksDB's delayed_write_rate).
	DelayedWriteRate int64
	// LBaseMaxBytes is the target size of the first level below L0. Default 64 MiB.
	LBaseMaxBytes int64
	// LevelMultiplier is the size ratio between adjacent levels. Default 10.
	LevelMultiplier int
	// TargetFileSize is the size at which compaction outputs are split. Default 4 MiB.
	TargetFileSize int64
	// WALRecoveryMode says what Open does with a damaged WAL. Default point in time.
	WALRecoveryMode WALRecoveryMode
	// DisableWAL skips the write-ahead log: unflushed writes are lost on a crash.
	DisableWAL bool
	// WALRecycleFiles is how many obsolete WAL files the DB keeps to write
	// its next WALs over (RocksDB's recycle_log_file_num; 0, the default:
	// none). Overwriting a file's allocated, durable blocks makes each
	// synced write an fdatasync, with no zeros written ahead and no file
	// created and deleted per WAL: for a stream of synced writes, as a
	// raft log's, fewer writes to the disk. It needs a ChecksumType other
	// than None and WALRecoverPointInTime or WALSkipAnyCorrupted: the end
	// of a recycled WAL is where its fragments stop verifying, so damage
	// to its last record looks like its end (see package wal, Recycling).
	WALRecycleFiles int
	// WALBytesPerSync makes the WAL's background flusher fsync every this
	// many bytes even when no write asks for it (RocksDB's
	// wal_bytes_per_sync). It bounds what an fsync must write later: a
	// synced write after many unsynced ones, and the final sync of a WAL at
	// rotation (which the next WAL waits for). Default 1 MiB; negative
	// turns it off (sync only when asked).
	WALBytesPerSync int64
	// ReadOnly opens the DB without writing anything to it.
	ReadOnly bool
	// ErrorIfExists makes Open fail if the DB already exists.
	ErrorIfExists bool
	// DisableAutomaticCompactions turns background compactions off; Compact
	// still works. For tests and benchmarks that control the LSM shape.
	DisableAutomaticCompactions bool
	// SeekCompactionBytes makes seeks compact what they read too much of:
	// a seek (SeekGE, SeekLT, SeekPrefixGE) that leaves tables of two or
	// more levels (or L0 tables) positioned is charged to the newest, and
	// a table charged once per SeekCompactionBytes of its size (at least
	// 100 times) is compacted into the next level when no level's score
	// calls for a compaction, so that later seeks read one table less.
	// LevelDB's allowed_seeks; Pebble's read-triggered compactions do the
	// same. Default 16 KiB (DefaultSeekCompactionBytes); negative: no seek
	// compactions (the LSM then changes with writes only).
	SeekCompactionBytes int64
	// Logger receives the info log instead of the LOG file. Default: the
	// LOG file of the DB directory (none when ReadOnly).
	Logger Logger
	// EventListener is told about flushes, compactions, WAL switches,
	// write stalls, background errors and corruptions (see EventListener).
	EventListener *EventListener
}

// EnsureDefaults fills every zero field with its default and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.FormatVersion == 0 {
		o.FormatVersion = FormatVersionNewest
	}
	if o.ScrubBytesPerSec == 0 {
		o.ScrubBytesPerSec = DefaultScrubBytesPerSec
	}
	if o.WriteBufferSize == 0 {
		o.WriteBufferSize = DefaultWriteBufferSize
	}
	if o.MaxImmutableMemtables == 0 {
		o.MaxImmutableMemtables = DefaultMaxImmutableMemtables
	}
	if o.MemtableFilterRatio == 0 {
		o.MemtableFilterRatio = DefaultMemtableFilterRatio
	}
	tableDefaults(&o.BlockSize, &o.BlockRestartInterval, &o.BloomBitsPerKey)
	if o.BlockCacheSize == 0 {
		o.BlockCacheSize = DefaultBlockCacheSize
	}
	if o.MaxOpenFiles == 0 {
		o.MaxOpenFiles = DefaultMaxOpenFiles
	}
	if o.L0CompactionTrigger == 0 {
		o.L0CompactionTrigger = DefaultL0CompactionTrigger
	}
	if o.L0StopWritesTrigger == 0 {
		o.L0StopWritesTrigger = DefaultL0StopWritesTrigger
	}
	if o.L0SlowdownWritesTrigger == 0 {
		o.L0SlowdownWritesTrigger = min(max(DefaultL0SlowdownTrigger, o.L0CompactionTrigger), o.L0StopWritesTrigger)
	}
	if o.WALBytesPerSync == 0 {
		o.WALBytesPerSync = DefaultWALBytesPerSync
	}
	if o.DelayedWriteRate == 0 {
		o.DelayedWriteRate = DefaultDelayedWriteRate
	}
	if o.LBaseMaxBytes == 0 {
		o.LBaseMaxBytes = DefaultLBaseMaxBytes
	}
	if o.SeekCompactionBytes == 0 {
		o.SeekCompactionBytes = DefaultSeekCompactionBytes
	}
	if o.LevelMultiplier == 0 {
		o.LevelMultiplier = DefaultLevelMultiplier
	}
	if o.TargetFileSize == 0 {
		o.TargetFileSize = DefaultTargetFileSize
	}
	return o
}

// Clone returns a shallow copy of o (FS is shared).
func (o *Options) Clone() *Options {
	c := *o
	return &c
}

// minWriteBufferSize keeps a memtable big enough for its own bookkeeping.
const minWriteBufferSize = 64 << 10

// maxMemtableFilterRatio: a filter of more bits than 2 a byte of memtable
// cuts no false positive that matters.
const maxMemtableFilterRatio = 0.25

// maxWriteBufferSize: arena offsets are 32-bit (and int may be too).
const maxWriteBufferSize = min(3<<30, memtable.MaxSize)

// tableDefaults fills in the defaults of the options that shape a table,
// for the DB's options and an ExternalWriter's alike.
func tableDefaults(blockSize, restartInterval, bloomBits *int) {
	if *blockSize == 0 {
		*blockSize = DefaultBlockSize
	}
	if *restartInterval == 0 {
		*restartInterval = DefaultBlockRestartInterval
	}
	if *bloomBits == 0 {
		*bloomBits = DefaultBloomBitsPerKey
	}
}

// validateTableOptions reports, through add, the problems of the options
// that shape a table (the DB's and an ExternalWriter's, defaults applied):
// one set of rules, so that a table the DB would refuse to write is not
// written for it to ingest either.
func validateTableOptions(add func(format string, args ...any), c Compression, zstdLevel, blockSize, restartInterval, bloomBits int) {
	if zstdLevel < 0 || zstdLevel > sst.MaxZstdLevel {
		add("ZstdLevel = %d: must be in [0, %d] (0: zstd's default, 3)", zstdLevel, sst.MaxZstdLevel)
	}
	if blockSize < 64 || blockSize > 64<<20 {
		add("BlockSize = %d: must be in [64, %d]", blockSize, 64<<20)
	}
	if restartInterval < 1 || restartInterval > 1<<16 {
		add("BlockRestartInterval = %d: must be in [1, 65536]", restartInterval)
	}
	if bloomBits > 64 {
		add("BloomBitsPerKey = %d: must be at most 64 (negative disables filters)", bloomBits)
	}
	if !c.Valid() {
		add("Compression = %v: unknown; valid: %s", c, validCompressions)
	}
}

// Validate reports every problem with o at once, as one error wrapping
// ErrInvalidArgument. It does not apply defaults: call EnsureDefaults first
// to validate what Open will use.
func (o *Options) Validate() error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	if !o.ChecksumType.Valid() {
		add("ChecksumType = %v: unknown; valid: %s", o.ChecksumType, validChecksumTypes)
	}
	checkProtection := func(name, what string, n int) {
		switch n {
		case 0, 1, 2, 4, 8:
			if n > 0 && o.ChecksumType == ChecksumNone {
				add("%s = %d needs a checksum type, but ChecksumType is None", name, n)
			}
		default:
			add("%s = %d: %s per key-value protection supports only 0, 1, 2, 4 or 8 bytes per key", name, n, what)
		}
	}
	checkProtection("MemtableProtectionBytesPerKey", "memtable", o.MemtableProtectionBytesPerKey)
	checkProtection("BatchProtectionBytesPerKey", "write batch", o.BatchProtectionBytesPerKey)
	if o.WriteBufferSize < minWriteBufferSize || o.WriteBufferSize > maxWriteBufferSize {
		add("WriteBufferSize = %d: must be in [%d, %d]", o.WriteBufferSize, minWriteBufferSize, maxWriteBufferSize)
	}
	if o.MaxImmutableMemtables < 1 {
		add("MaxImmutableMemtables = %d: must be at least 1", o.MaxImmutableMemtables)
	}
	if r := o.MemtableFilterRatio; !(r <= maxMemtableFilterRatio) {
		add("MemtableFilterRatio = %v: must be at most %v (negative: no memtable filter)", r, maxMemtableFilterRatio)
	}
	validateTableOptions(add, o.Compression, o.ZstdLevel, o.BlockSize, o.BlockRestartInterval, o.BloomBitsPerKey)
	if o.ScrubInterval < 0 {
		add("ScrubInterval = %v: must not be negative (0: no scrubber)", o.ScrubInterval)
	}
	if o.FormatVersion < 1 || o.FormatVersion > FormatVersionNewest {
		add("FormatVersion = %d: this build writes versions 1 to %d (0: the newest)", o.FormatVersion, FormatVersionNewest)
	}
	o.validateMerger(add)
	o.validateComparer(add)
	if len(o.Levels) > manifest.NumLevels {
		add("Levels has %d elements: the LSM has %d levels", len(o.Levels), manifest.NumLevels)
	}
	for i, lo := range o.Levels {
		if !lo.Compression.Valid() {
			add("Levels[%d].Compression = %v: unknown; valid: %s", i, lo.Compression, validCompressions)
		}
		if lo.ZstdLevel < 0 || lo.ZstdLevel > sst.MaxZstdLevel {
			add("Levels[%d].ZstdLevel = %d: must be in [0, %d] (0: ZstdLevel's)", i, lo.ZstdLevel, sst.MaxZstdLevel)
		}
	}
	if o.MaxOpenFiles < 16 {
		add("MaxOpenFiles = %d: must be at least 16", o.MaxOpenFiles)
	}
	if o.L0CompactionTrigger < 1 {
		add("L0CompactionTrigger = %d: must be at least 1", o.L0CompactionTrigger)
	}
	if o.L0StopWritesTrigger < o.L0CompactionTrigger {
		add("L0StopWritesTrigger = %d: must be at least L0CompactionTrigger (%d)", o.L0StopWritesTrigger, o.L0CompactionTrigger)
	}
	if o.L0SlowdownWritesTrigger < o.L0CompactionTrigger || o.L0SlowdownWritesTrigger > o.L0StopWritesTrigger {
		add("L0SlowdownWritesTrigger = %d: must lie between L0CompactionTrigger (%d) and L0StopWritesTrigger (%d)",
			o.L0SlowdownWritesTrigger, o.L0CompactionTrigger, o.L0StopWritesTrigger)
	}
	if o.MemoryBudget < 0 {
		add("MemoryBudget = %d: must be positive (bytes), or 0 for none", o.MemoryBudget)
	}
	if o.DelayedWriteRate < 1 {
		add("DelayedWriteRate = %d: must be positive (bytes per second)", o.DelayedWriteRate)
	}
	if o.LBaseMaxBytes < 1 {
		add("LBaseMaxBytes = %d: must be positive", o.LBaseMaxBytes)
	}
	if o.LevelMultiplier < 2 {
		add("LevelMultiplier = %d: must be at least 2", o.LevelMultiplier)
	}
	if o.TargetFileSize < 1 {
		add("TargetFileSize = %d: must be positive", o.TargetFileSize)
	}
	o.validateWAL(add)
	if o.ReadOnly && o.ErrorIfExists {
		add("ReadOnly and ErrorIfExists: a read-only open needs an existing DB")
	}
	if len(problems) == 0 {
		return nil
	}
	return base.InvalidArgumentErrorf("invalid options: %s", strings.Join(problems, "; "))
}

// validateMerger is Validate's part for Merger.
func (o *Options) validateMerger(add func(format string, args ...any)) {
	if o.Merger == nil {
		return
	}
	if o.Merger.Name == "" || o.Merger.Merge == nil {
		add("Merger needs both a Name and a Merge function")
	}
	if o.FormatVersion >= 1 && o.FormatVersion < manifest.FormatVersionMerges {
		add("Merger needs FormatVersion %d or newer, not %d", manifest.FormatVersionMerges, o.FormatVersion)
	}
}

// validateWAL is Validate's part for the WAL's recovery mode and
// recycling.
func (o *Options) validateWAL(add func(format string, args ...any)) {
	if !o.WALRecoveryMode.Valid() {
		add("WALRecoveryMode = WALRecoveryMode(%d): unknown; valid: WALRecoverPointInTime, WALTolerateCorruptedTail, WALAbsoluteConsistency or WALSkipAnyCorrupted",
			uint8(o.WALRecoveryMode))
	}
	switch {
	case o.WALRecycleFiles < 0:
		add("WALRecycleFiles = %d: must not be negative (0: none)", o.WALRecycleFiles)
	case o.WALRecycleFiles > 0:
		if o.ChecksumType == ChecksumNone {
			add("WALRecycleFiles = %d needs a checksum type, but ChecksumType is None", o.WALRecycleFiles)
		}
		if o.WALRecoveryMode != WALRecoverPointInTime && o.WALRecoveryMode != WALSkipAnyCorrupted {
			add("WALRecycleFiles = %d needs WALRecoveryMode WALRecoverPointInTime or WALSkipAnyCorrupted, not %v", o.WALRecycleFiles, o.WALRecoveryMode)
		}
	}
}

// String renders the options as the OPTIONS file does: one "name=value" per line.
func (o *Options) String() string {
	var b strings.Builder
	p := func(name string, v any) { fmt.Fprintf(&b, "%s=%v\n", name, v) }
	b.WriteString("[Options]\n")
	p("checksum_type", fmt.Sprintf("%d (%s)", o.ChecksumType.Code(), o.ChecksumType.Resolve()))
	p("paranoid_memory_checks", o.ParanoidMemoryChecks)
	p("verify_checksums", !o.SkipReadChecksums)
	p("memtable_protection_bytes_per_key", o.MemtableProtectionBytesPerKey)
	p("batch_protection_bytes_per_key", o.BatchProtectionBytesPerKey)
	p("write_buffer_size", o.WriteBufferSize)
	p("max_immutable_memtables", o.MaxImmutableMemtables)
	p("block_size", o.BlockSize)
	p("block_restart_interval", o.BlockRestartInterval)
	p("bloom_bits_per_key", o.BloomBitsPerKey)
	p("compression", o.Compression)
	p("zstd_level", o.ZstdLevel)
	p("format_version", o.FormatVersion)
	p("comparator", cmp.Or(o.Comparer, DefaultComparer).Name)
	if o.Merger != nil {
		p("merge_operator", o.Merger.Name)
	}
	p("scrub_interval", o.ScrubInterval)
	p("scrub_bytes_per_sec", o.ScrubBytesPerSec)
	for i := range o.Levels {
		c, z := o.levelCompression(i)
		p(fmt.Sprintf("level_%d_compression", i), fmt.Sprintf("%v/%d", c, z))
	}
	p("block_cache_size", o.BlockCacheSize)
	p("memory_budget", o.MemoryBudget)
	p("max_open_files", o.MaxOpenFiles)
	p("l0_compaction_trigger", o.L0CompactionTrigger)
	p("l0_stop_writes_trigger", o.L0StopWritesTrigger)
	p("l0_slowdown_writes_trigger", o.L0SlowdownWritesTrigger)
	p("delayed_write_rate", o.DelayedWriteRate)
	p("lbase_max_bytes", o.LBaseMaxBytes)
	p("level_multiplier", o.LevelMultiplier)
	p("target_file_size", o.TargetFileSize)
	p("wal_recovery_mode", fmt.Sprintf("%d (%s)", o.WALRecoveryMode.RocksDB(), o.WALRecoveryMode))
	p("disable_wal", o.DisableWAL)
	p("wal_bytes_per_sync", o.WALBytesPerSync)
	p("recycle_log_file_num", o.WALRecycleFiles)
	p("disable_automatic_compactions", o.DisableAutomaticCompactions)
	p("seek_compaction_bytes", o.SeekCompactionBytes)
	return b.String()
}

// WriteOptions control a single write. A nil *WriteOptions means the
// defaults: no fsync per write, as in db_bench.
type WriteOptions struct {
	// Sync makes the write durable (WAL fsynced) before it returns.
	// Concurrent synced writers share one fsync (group commit).
	Sync bool
}

// Sync is a WriteOptions that syncs; NoSync one that doesn't.
var (
	Sync   = &WriteOptions{Sync: true}
	NoSync = &WriteOptions{Sync: false}
)

// IterOptions bound an iterator. A nil *IterOptions means no bounds.
type IterOptions struct {
	// LowerBound is the inclusive lower bound on user keys; nil = none.
	LowerBound []byte
	// UpperBound is the exclusive upper bound on user keys; nil = none.
	UpperBound []byte
	// Prefix, if set, limits the iterator to the keys whose prefix
	// (Comparer.Split) is Prefix, within the bounds; tables whose prefix
	// bloom filter excludes it are not read. Under a comparer without
	// Split it means the keys that begin with these bytes, which needs a
	// bytewise order. Indexed batches' iterators do not take it.
	Prefix []byte
}
