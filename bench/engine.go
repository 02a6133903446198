package bench

import "time"

// Engine is the store kvbench drives. Vigil's is in this package; the
// bench/peers module adds Pebble's, so both run the very same workload code.
// An engine may also implement BatchEngine (atomic multi-key writes, for
// --batch_size and fillbatch), MergeEngine (merge operands, for
// mergerandom and readrandommergerandom) and TickerEngine (engine counters
// for --statistics); its iterators may implement ReverseSeeker.
type Engine interface {
	// Put writes key=value; sync asks for a durable write.
	Put(key, value []byte, sync bool) error
	// Delete removes key.
	Delete(key []byte, sync bool) error
	// Get reads key; found reports presence, n the value's length. buf is
	// the calling thread's scratch buffer, which an engine may use to read
	// without allocating (as db_bench reuses its value string); nil is
	// allowed.
	Get(key []byte, buf *[]byte) (found bool, n int, err error)
	// NewIter returns an iterator over the whole store.
	NewIter() (Iter, error)
	// Flush writes memtables to disk and waits.
	Flush() error
	// Compact compacts the whole key space and waits.
	Compact() error
	// Metrics renders engine statistics (--stats).
	Metrics() string
	Close() error
}

// Iter is the iterator kvbench needs.
type Iter interface {
	First() bool
	Last() bool
	Next() bool
	Prev() bool
	SeekGE(key []byte) bool
	Valid() bool
	Key() []byte
	Value() []byte
	Close() error
}

// ReverseSeeker is an Iter that can position at the last key before a
// given one, for --reverse_iterator (db_bench's SeekForPrev).
type ReverseSeeker interface {
	SeekLT(key []byte) bool
}

// PrefixSeeker is an Iter of a PrefixEngine that can seek within the
// prefix of the key sought: to the first key >= key of that prefix (false
// if there is none), skipping tables whose prefix filter excludes it, as
// RocksDB's Seek does in prefix mode (total_order_seek=false). Where
// iteration goes on from there is the engine's choice, as it is RocksDB's.
// kvbench uses it on a PrefixEngine's iterators only; others seek with
// SeekGE and find no key outside the prefix.
type PrefixSeeker interface {
	SeekPrefixGE(key []byte) bool
}

// PrefixEngine is an Engine that honours EngineOptions.PrefixSize (a
// prefix extractor) and makes iterators limited to the keys of one
// prefix, which skip tables whose prefix filter excludes it: RocksDB's
// iterators under prefix_same_as_start, or bounded at the prefix's end
// under auto_prefix_mode. Engines without it get total-order iterators,
// which kvbench stops at the prefix's edge.
type PrefixEngine interface {
	NewPrefixIter(prefix []byte) (Iter, error)
}

// BatchEngine is an Engine that commits several writes atomically, as
// db_bench's WriteBatch does for --batch_size > 1 and fillbatch. Engines
// without it get the writes one by one.
type BatchEngine interface {
	NewWriteBatch() WriteBatch
}

// WriteBatch collects writes for one atomic commit. Commit may be followed
// by more writes and another Commit: it empties the batch.
type WriteBatch interface {
	Put(key, value []byte)
	Delete(key []byte)
	Commit(sync bool) error
}

// MergeEngine is an Engine opened with a merge operator
// (EngineOptions.MergeOperator), as db_bench's mergerandom and
// readrandommergerandom need; Get returns the merged value.
type MergeEngine interface {
	// Merge adds operand to key's merge operands; sync asks for a durable
	// write.
	Merge(key, operand []byte, sync bool) error
}

// TickerEngine is an Engine that reports counters for --statistics, keyed
// by the RocksDB statistics name of the same meaning (for example
// "rocksdb.block.cache.hit"), counted since the engine was opened.
type TickerEngine interface {
	Tickers() map[string]int64
}

// EngineOptions are the engine settings kvbench passes on, named after
// db_bench's flags. A zero field means the engine's own default.
type EngineOptions struct {
	Dir                           string
	WriteBufferSize               int
	ChecksumType                  int // RocksDB numbering: 0 none ... 4 xxh3, 5 crc64
	ParanoidMemoryChecks          bool
	ScrubInterval                 time.Duration // the background scrubber's; 0: off
	SkipReadChecksums             bool          // --verify_checksum=false
	MemtableProtectionBytesPerKey int
	BatchProtectionBytesPerKey    int // --write_batch_protection_bytes_per_key
	BlockSize                     int
	CacheSize                     int64 // bytes; 0 disables
	// MemtableFilterRatio sizes each memtable's bloom filter in bytes per
	// byte of WriteBufferSize (--memtable_bloom_size_ratio;
	// vigil.Options.MemtableFilterRatio): 0 the engine's default, negative
	// none.
	MemtableFilterRatio float64
	// CostWriteBufferToCache charges the memtables' arenas to the block
	// cache (--cost_write_buffer_to_cache): CacheSize is then one limit for
	// blocks and memtables together (vigil.Options.MemoryBudget), as in
	// RocksDB with a WriteBufferManager on the block cache and as Pebble
	// always does.
	CostWriteBufferToCache bool
	BloomBits              int    // 0 disables
	Compression            string // "none", "snappy" or "zstd"
	ZstdLevel              int    // zstd's level; 0: its default
	MinLevelToCompress     int    // levels below it uncompressed; <= 0: all compressed
	DisableWAL             bool
	// Fresh says the benchmark wants an empty store (fillseq, fillrandom
	// without --use_existing_db): the engine's directory was removed.
	Fresh bool
	// DisableAutomaticCompactions keeps the LSM as the workload shaped it
	// (--disable_auto_compactions).
	DisableAutomaticCompactions bool

	// The LSM's shape, from db_bench's flags of the same meaning; 0 = the
	// engine's default.
	BlockRestartInterval  int // --block_restart_interval
	MaxImmutableMemtables int // --max_write_buffer_number minus the mutable one
	L0CompactionTrigger   int // --level0_file_num_compaction_trigger
	L0StopWritesTrigger   int // --level0_stop_writes_trigger
	// L0SlowdownWritesTrigger and DelayedWriteRate: --level0_slowdown_writes_trigger
	// and --delayed_write_rate (0 = the engine's default).
	L0SlowdownWritesTrigger int
	DelayedWriteRate        int64
	LBaseMaxBytes           int64   // --max_bytes_for_level_base
	LevelMultiplier         float64 // --max_bytes_for_level_multiplier
	TargetFileSize          int64   // --target_file_size_base
	MaxOpenFiles            int     // --open_files; -1 = unlimited
	// WALRecoveryMode is RocksDB's --wal_recovery_mode number (0 tolerate
	// a corrupted tail, 1 absolute consistency, 2 point in time, 3 skip any
	// corrupted record), used when WALRecoveryModeSet.
	WALRecoveryMode    int
	WALRecoveryModeSet bool
	// ReadOnly opens the store read-only (--readonly): writes fail.
	ReadOnly bool
	// MergeOperator is --merge_operator: "uint64add" (8-byte little-endian
	// counters, operands added), "put" (the newest operand wins), or ""
	// for none (merges fail). RocksDB's other names for the two
	// (UInt64AddOperator, PutOperator, put_v1) are taken too.
	MergeOperator string
	// PrefixSize is --prefix_size: keys' prefixes are their first
	// PrefixSize bytes (RocksDB's NewFixedPrefixTransform), and bloom
	// filters hold prefixes; 0: no prefix extractor.
	PrefixSize int
}

// Opener opens an engine.
type Opener func(o EngineOptions) (Engine, error)
