package bench

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/checksum"
)

// OpenVigil opens Vigil as a kvbench engine.
func OpenVigil(o EngineOptions) (Engine, error) {
	opts, err := VigilOptions(o)
	if err != nil {
		return nil, err
	}
	db, err := vigil.Open(o.Dir, opts)
	if err != nil {
		return nil, err
	}
	return &vigilEngine{db: db}, nil
}

// unlimitedOpenFiles is what --open_files=-1 (keep every table open, as
// RocksDB does) becomes: Vigil's table cache only holds what it is given.
const unlimitedOpenFiles = math.MaxInt32

// VigilOptions maps engine options to vigil.Options.
func VigilOptions(o EngineOptions) (*vigil.Options, error) {
	// EngineOptions.ChecksumType is RocksDB's number, as --checksum_type
	// takes it: parsed the same way, with the same error.
	ct, err := checksum.ParseType(strconv.Itoa(o.ChecksumType))
	if err != nil {
		return nil, err
	}
	opts := &vigil.Options{
		WriteBufferSize:               o.WriteBufferSize,
		ChecksumType:                  ct,
		ParanoidMemoryChecks:          o.ParanoidMemoryChecks,
		ScrubInterval:                 o.ScrubInterval,
		SkipReadChecksums:             o.SkipReadChecksums,
		MemtableProtectionBytesPerKey: o.MemtableProtectionBytesPerKey,
		BatchProtectionBytesPerKey:    o.BatchProtectionBytesPerKey,
		BlockSize:                     o.BlockSize,
		BlockRestartInterval:          o.BlockRestartInterval,
		BlockCacheSize:                o.CacheSize,
		MemtableFilterRatio:           o.MemtableFilterRatio,
		BloomBitsPerKey:               o.BloomBits,
		DisableWAL:                    o.DisableWAL,
		DisableAutomaticCompactions:   o.DisableAutomaticCompactions,
		MaxImmutableMemtables:         o.MaxImmutableMemtables,
		L0CompactionTrigger:           o.L0CompactionTrigger,
		L0StopWritesTrigger:           o.L0StopWritesTrigger,
		DelayedWriteRate:              o.DelayedWriteRate,
		LBaseMaxBytes:                 o.LBaseMaxBytes,
		LevelMultiplier:               int(math.Round(o.LevelMultiplier)),
		TargetFileSize:                o.TargetFileSize,
		MaxOpenFiles:                  o.MaxOpenFiles,
		ReadOnly:                      o.ReadOnly,
	}
	if o.MaxOpenFiles < 0 {
		opts.MaxOpenFiles = unlimitedOpenFiles
	}
	if o.PrefixSize > 0 {
		opts.Comparer = vigil.FixedPrefixComparer(o.PrefixSize)
	}
	if o.CacheSize <= 0 {
		opts.BlockCacheSize = -1
	} else if o.CostWriteBufferToCache {
		opts.MemoryBudget = o.CacheSize
	}
	if o.BloomBits <= 0 {
		opts.BloomBitsPerKey = -1
	}
	if o.WALRecoveryModeSet {
		m, err := vigil.WALRecoveryModeFromRocksDB(o.WALRecoveryMode)
		if err != nil {
			return nil, err
		}
		opts.WALRecoveryMode = m
	}
	// Vigil's trigger defaults differ from RocksDB's; a stop trigger given
	// alone below Vigil's default compaction trigger (or the reverse) is
	// still a consistent pair once the other takes the engine default.
	if opts.L0StopWritesTrigger > 0 && opts.L0CompactionTrigger == 0 && opts.L0StopWritesTrigger < vigil.DefaultL0CompactionTrigger {
		opts.L0CompactionTrigger = opts.L0StopWritesTrigger
	}
	if opts.L0CompactionTrigger > 0 && opts.L0StopWritesTrigger == 0 && opts.L0CompactionTrigger > vigil.DefaultL0StopWritesTrigger {
		opts.L0StopWritesTrigger = opts.L0CompactionTrigger
	}
	if s := o.L0SlowdownWritesTrigger; s > 0 {
		// Kept between the triggers, as RocksDB sanitizes it.
		lo, hi := opts.L0CompactionTrigger, opts.L0StopWritesTrigger
		if lo == 0 {
			lo = vigil.DefaultL0CompactionTrigger
		}
		if hi == 0 {
			hi = vigil.DefaultL0StopWritesTrigger
		}
		opts.L0SlowdownWritesTrigger = min(max(s, lo), max(hi, lo))
	}
	m, err := vigilMerger(o.MergeOperator)
	if err != nil {
		return nil, err
	}
	opts.Merger = m
	c, ok := parseCompression(o.Compression)
	if !ok {
		return nil, fmt.Errorf("%w: unknown compression %q (none, snappy or zstd)", vigil.ErrInvalidArgument, o.Compression)
	}
	opts.Compression = c
	opts.ZstdLevel = o.ZstdLevel
	if m := o.MinLevelToCompress; m > 0 {
		// db_bench's --min_level_to_compress: levels below m uncompressed.
		opts.Levels = make([]vigil.LevelOptions, min(m+1, 7))
		for i := range min(m, 7) {
			opts.Levels[i].Compression = vigil.NoCompression
		}
	}
	return opts, nil
}

// parseCompression is the one reading of a compression name (db_bench's
// --compression_type values and RocksDB's enum names, any case; "" is the
// default, snappy) into what Vigil runs; ok is false for a name Vigil does
// not run (db_bench's other algorithms: the CLI runs those as snappy and
// says so).
func parseCompression(name string) (c vigil.Compression, ok bool) {
	switch strings.ToLower(name) {
	case "none", "no", "knocompression":
		return vigil.NoCompression, true
	case "snappy", "ksnappycompression", "":
		return vigil.SnappyCompression, true
	case "zstd", "kzstd":
		return vigil.ZstdCompression, true
	}
	return 0, false
}

// vigilMerger is the vigil.Merger of a --merge_operator name (nil for "").
func vigilMerger(name string) (*vigil.Merger, error) {
	op, err := parseMergeOperator(name)
	if err != nil {
		return nil, fmt.Errorf("%w: --merge_operator %v", vigil.ErrInvalidArgument, err)
	}
	switch op {
	case mergeUint64Add:
		return vigil.Uint64AddMerger, nil
	case mergePut:
		return vigil.PutMerger, nil
	}
	return nil, nil
}

type vigilEngine struct {
	db *vigil.DB
}

// DB exposes the underlying DB (for tests and the stress runner).
func (e *vigilEngine) DB() *vigil.DB { return e.db }

func writeOpts(sync bool) *vigil.WriteOptions {
	if sync {
		return vigil.Sync
	}
	return nil
}

func (e *vigilEngine) Put(key, value []byte, sync bool) error {
	return e.db.Put(key, value, writeOpts(sync))
}

func (e *vigilEngine) Delete(key []byte, sync bool) error {
	return e.db.Delete(key, writeOpts(sync))
}

// Merge implements MergeEngine with DB.Merge.
func (e *vigilEngine) Merge(key, operand []byte, sync bool) error {
	return e.db.Merge(key, operand, writeOpts(sync))
}

func (e *vigilEngine) Get(key []byte, buf *[]byte) (bool, int, error) {
	var v []byte
	var err error
	if buf != nil {
		v, err = e.db.GetAppend((*buf)[:0], key)
		*buf = v
	} else {
		v, err = e.db.Get(key)
	}
	if errors.Is(err, vigil.ErrNotFound) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	return true, len(v), nil
}

// NewIter returns a *vigil.Iterator, a ReverseSeeker and (under a prefix
// extractor) a PrefixSeeker.
func (e *vigilEngine) NewIter() (Iter, error) { return e.db.NewIter(nil) }

// NewPrefixIter implements PrefixEngine with IterOptions.Prefix.
func (e *vigilEngine) NewPrefixIter(prefix []byte) (Iter, error) {
	return e.db.NewIter(&vigil.IterOptions{Prefix: prefix})
}

func (e *vigilEngine) Flush() error { return e.db.Flush() }

func (e *vigilEngine) Compact() error { return e.db.Compact(nil, nil) }

func (e *vigilEngine) Metrics() string { return e.db.Metrics().String() }

func (e *vigilEngine) Close() error { return e.db.Close() }

// NewWriteBatch implements BatchEngine with a vigil.Batch.
func (e *vigilEngine) NewWriteBatch() WriteBatch { return &vigilBatch{db: e.db, b: e.db.NewBatch()} }

type vigilBatch struct {
	db *vigil.DB
	b  *vigil.Batch
}

func (b *vigilBatch) Put(key, value []byte) { b.b.Put(key, value) }
func (b *vigilBatch) Delete(key []byte)     { b.b.Delete(key) }

func (b *vigilBatch) Commit(sync bool) error {
	err := b.db.Apply(b.b, writeOpts(sync))
	b.b.Reset()
	return err
}

// Tickers implements TickerEngine: Vigil's metrics under the RocksDB
// statistics names of the same meaning.
func (e *vigilEngine) Tickers() map[string]int64 {
	m := e.db.Metrics()
	return map[string]int64{
		"rocksdb.block.cache.miss": m.BlockCache.Misses,
		"rocksdb.block.cache.hit":  m.BlockCache.Hits,
		// RocksDB counts a point read's filter check as useful when the
		// filter answers "absent" and as full.positive otherwise.
		"rocksdb.bloom.filter.useful":         m.Filter.Useful,
		"rocksdb.bloom.filter.full.positive":  m.Filter.Checked - m.Filter.Useful,
		"rocksdb.bloom.filter.prefix.checked": m.Filter.PrefixChecked,
		"rocksdb.bloom.filter.prefix.useful":  m.Filter.PrefixUseful,
		"rocksdb.no.file.opens":               m.TableCache.Misses,
		"rocksdb.stall.micros":                m.Stall.Duration.Microseconds(),
		"rocksdb.wal.bytes":                   m.WAL.BytesWritten,
		"rocksdb.write.wal":                   m.WAL.Records,
		"rocksdb.compact.read.bytes":          m.Compact.ReadBytes,
		"rocksdb.compact.write.bytes":         m.Compact.WriteBytes,
		"rocksdb.flush.write.bytes":           m.Flush.Bytes,
	}
}
