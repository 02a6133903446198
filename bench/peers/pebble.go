// Package peers runs Vigil's kvbench workloads against peer engines, so
// that Vigil's numbers can be read next to a known store measured on the
// same machine, with the same keys, values and settings, through the very
// same workload code (package bench).
//
// It is a separate Go module because the peers are full storage engines:
// the main module may depend on Pebble's vfs package only, never on Pebble
// the database. Nothing in Vigil imports this module.
//
// Today the only peer is Pebble (v1.1.5): [OpenPebble] adapts it to
// [bench.Engine], [PebbleOptions] maps kvbench's [bench.EngineOptions] onto
// pebble.Options as fairly as the two designs allow, and [Compare] runs the
// side-by-side scenarios behind the `vs` command.
package peers

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/bench"
)

// PebbleChecksum names the only block checksum Pebble's DB writes. Pebble's
// sstable package can also write XXH64 but the DB never asks for it, and it
// cannot write XXH3 at all, so a Vigil-versus-Pebble comparison always pits
// Vigil's configured checksum (XXH3 by default) against CRC-32C; the vs
// output says so.
const PebbleChecksum = "crc32c"

// pebbleNumLevels is Pebble's LSM depth (L0..L6); every level gets its own
// LevelOptions so that no level falls back to Pebble's per-level defaults.
const pebbleNumLevels = 7

// PebbleMemtableCacheCredit is how many write-buffer-sized memtables
// [PebbleOptions] adds to Pebble's block cache capacity by default.
//
// Why: Pebble charges every memtable arena against its block cache
// (Cache.Reserve), Vigil does not. Once the memtables have grown to
// MemTableSize, Pebble holds two of them at rest: the mutable one and one
// flushed arena kept for recycling. With a 64 MiB cache and 64 MiB
// memtables, Pebble would have no room left for a single data block, and
// every on-disk read would miss. Adding 2×WriteBufferSize leaves Pebble the
// same CacheSize bytes for blocks that Vigil gets while reads run. (During
// fills, queued immutable memtables still eat into it, which does not
// matter there: fills do not read the cache.)
const PebbleMemtableCacheCredit = 2

// PebbleOptions maps kvbench's engine options onto Pebble's, setting every
// knob that shapes the comparison to what Vigil uses, with the reason next
// to each. The result is ready for pebble.Open; the caller owns the
// returned cache reference (opts.Cache) and must Unref it once the DB is
// open (or on failure). cacheCredit is the number of write buffers added to
// the cache capacity (see [PebbleMemtableCacheCredit]; 0 gives Pebble
// exactly CacheSize bytes, memtables included).
//
// Options Pebble lacks are ignored: ChecksumType (Pebble always writes
// CRC-32C, see [PebbleChecksum]), ParanoidMemoryChecks,
// MemtableProtectionBytesPerKey and BatchProtectionBytesPerKey (Pebble has
// none of them).
func PebbleOptions(o bench.EngineOptions, cacheCredit int) (*pebble.Options, error) {
	// Start from Vigil's own view of the options, defaults applied, so the
	// two engines cannot drift apart when a kvbench default changes.
	vo, err := bench.VigilOptions(o)
	if err != nil {
		return nil, err
	}
	vo.EnsureDefaults()
	if err := vo.Validate(); err != nil {
		return nil, err
	}
	if cacheCredit < 0 {
		return nil, fmt.Errorf("%w: negative cache credit %d", vigil.ErrInvalidArgument, cacheCredit)
	}

	levels, err := pebbleLevels(vo)
	if err != nil {
		return nil, err
	}
	cacheBytes := creditedCache(vo.BlockCacheSize, cacheCredit, vo.WriteBufferSize) // negative BlockCacheSize = Vigil's "no cache"

	opts := &pebble.Options{
		// FS: Pebble's default vfs.Default, the same real file system Vigil
		// uses.

		// A fresh store today would use the newest on-disk format; the
		// older formats exist only to read old stores.
		FormatMajorVersion: pebble.FormatNewest,

		// Same memtable size as Vigil's WriteBufferSize. Pebble starts its
		// first memtable at 256 KiB and doubles it at each rotation up to
		// this size (no option turns that off), and flushes only once the
		// queued immutable ones add up to this size. So a fresh store's
		// first MemTableSize bytes sit in a chain of growing memtables
		// (8 of them, 256 KiB to 32 MiB, for the 34 MB of the memtable
		// scenario) that every Get and scan must consult, where Vigil has
		// one. That is how Pebble behaves, not a setting of ours.
		MemTableSize: uint64(vo.WriteBufferSize),
		// Writes stall once this many memtables' worth is queued; 2 is
		// Pebble's default and Vigil's MaxImmutableMemtables.
		MemTableStopWritesThreshold: vo.MaxImmutableMemtables,

		// Vigil starts an L0 compaction at L0CompactionTrigger files.
		// Pebble counts overlapping sublevels (L0CompactionThreshold) and,
		// separately, files (L0CompactionFileThreshold, default 500);
		// sequential fills make non-overlapping files, one sublevel, so
		// only the file threshold mirrors Vigil's trigger. Set both.
		L0CompactionThreshold:     vo.L0CompactionTrigger,
		L0CompactionFileThreshold: vo.L0CompactionTrigger,
		// Writes stop at this L0 depth (Pebble: sublevels, Vigil: files).
		L0StopWritesThreshold: vo.L0StopWritesTrigger,
		// Target size of the level L0 compacts into; both engines grow
		// deeper levels by a factor of 10 (fixed in Pebble).
		LBaseMaxBytes: vo.LBaseMaxBytes,
		// Same table cache bound as Vigil (Pebble's default is also 1000).
		MaxOpenFiles: vo.MaxOpenFiles,

		// The WAL is on (unless asked otherwise) and never fsynced except
		// for pebble.Sync writes: WALBytesPerSync stays 0 and writes use
		// pebble.NoSync, like Vigil with nil WriteOptions.
		DisableWAL:                  vo.DisableWAL,
		DisableAutomaticCompactions: vo.DisableAutomaticCompactions,

		// Pebble's informational log lines would interleave with the
		// benchmark output; fatal errors still reach stderr.
		Logger: quietLogger{},
	}
	opts.Levels = levels
	// Block cache: the same capacity for blocks as Vigil's, plus the
	// memtable credit explained at PebbleMemtableCacheCredit.
	opts.Cache = pebble.NewCache(cacheBytes)
	return opts, nil
}

// pebbleLevels are Pebble's per-level table options matching Vigil's vo:
// block size and restart interval, one single-level index, compression
// and bloom filter, target file size.
func pebbleLevels(vo *vigil.Options) ([]pebble.LevelOptions, error) {
	var compression pebble.Compression
	switch vo.Compression {
	case vigil.NoCompression:
		compression = pebble.NoCompression
	case vigil.SnappyCompression, vigil.DefaultCompression:
		compression = pebble.SnappyCompression
	default:
		return nil, fmt.Errorf("%w: compression %v has no Pebble equivalent", vigil.ErrInvalidArgument, vo.Compression)
	}
	var filter pebble.FilterPolicy
	if vo.BloomBitsPerKey > 0 {
		// Same bits per key as Vigil's table filter, hence about the same
		// false-positive rate (10 bits ≈ 1 %).
		filter = bloom.FilterPolicy(vo.BloomBitsPerKey)
	}
	levels := make([]pebble.LevelOptions, pebbleNumLevels)
	for i := range levels {
		levels[i] = pebble.LevelOptions{
			// Same data block size and restart interval as Vigil's SSTs.
			BlockSize:            vo.BlockSize,
			BlockRestartInterval: vo.BlockRestartInterval,
			// Vigil writes a single-level index; Pebble would switch to a
			// two-level index once the index block outgrows BlockSize (it
			// does for 4 MiB files of 4 KiB blocks), adding a lookup per
			// read. Disable that so both search one index block.
			IndexBlockSize: math.MaxInt32,
			// Same compression (snappy or none).
			Compression: compression,
			// One bloom filter per table, like Vigil's.
			FilterPolicy: filter,
			FilterType:   pebble.TableFilter,
			// Vigil splits compaction outputs at TargetFileSize on every
			// level; Pebble would otherwise double it per level.
			TargetFileSize: vo.TargetFileSize,
		}
	}
	return levels, nil
}

// quietLogger drops Pebble's Infof lines. Fatalf must not return (Pebble's
// default logger exits); panicking keeps the message and adds the stack.
type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{}) {}

func (quietLogger) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}

// OpenPebble opens Pebble in o.Dir as a kvbench engine, with the options of
// [PebbleOptions] and the default [PebbleMemtableCacheCredit].
func OpenPebble(o bench.EngineOptions) (bench.Engine, error) {
	return OpenPebbleWithCredit(o, PebbleMemtableCacheCredit)
}

// OpenPebbleWithCredit is [OpenPebble] with an explicit memtable cache
// credit (0 = give Pebble exactly CacheSize bytes, memtables included).
func OpenPebbleWithCredit(o bench.EngineOptions, cacheCredit int) (bench.Engine, error) {
	opts, err := PebbleOptions(o, cacheCredit)
	if err != nil {
		return nil, err
	}
	// The DB takes its own reference on the cache; drop ours either way.
	defer opts.Cache.Unref()
	db, err := pebble.Open(o.Dir, opts)
	if err != nil {
		return nil, fmt.Errorf("pebble: open %s: %w", o.Dir, err)
	}
	return &PebbleEngine{db: db}, nil
}

// PebbleEngine is a Pebble DB behind the [bench.Engine] interface.
//
// Concurrency: like the DB it wraps, it is safe for concurrent use, so
// kvbench's --threads and readwhilewriting work; Close must come last.
type PebbleEngine struct {
	db *pebble.DB
}

// DB exposes the Pebble DB, for tests that inspect it directly.
func (e *PebbleEngine) DB() *pebble.DB { return e.db }

func pebbleWriteOpts(sync bool) *pebble.WriteOptions {
	if sync {
		return pebble.Sync
	}
	return pebble.NoSync
}

// Put writes key=value, fsyncing the WAL when sync is set.
func (e *PebbleEngine) Put(key, value []byte, sync bool) error {
	return e.db.Set(key, value, pebbleWriteOpts(sync))
}

// Delete writes a tombstone for key.
func (e *PebbleEngine) Delete(key []byte, sync bool) error {
	return e.db.Delete(key, pebbleWriteOpts(sync))
}

// Get looks key up. Pebble returns a view of the value pinned until the
// closer is closed (no copy), whereas Vigil's Get returns a copy: each
// engine is measured through its own public API.
func (e *PebbleEngine) Get(key []byte, _ *[]byte) (bool, int, error) {
	v, closer, err := e.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	n := len(v)
	if err := closer.Close(); err != nil {
		return false, 0, err
	}
	return true, n, nil
}

// NewIter returns an iterator over the whole store; *pebble.Iterator has
// exactly the methods bench.Iter needs.
func (e *PebbleEngine) NewIter() (bench.Iter, error) {
	return e.db.NewIter(nil)
}

// Flush writes the memtable to L0 and waits for it.
func (e *PebbleEngine) Flush() error { return e.db.Flush() }

// Compact compacts the whole key space and waits. Pebble's Compact takes a
// [start, end) range with start < end, so the range is [first key,
// successor of the last key); an empty store has nothing to compact.
func (e *PebbleEngine) Compact() error {
	it, err := e.db.NewIter(nil)
	if err != nil {
		return err
	}
	var first, last []byte
	if it.First() {
		first = append([]byte(nil), it.Key()...)
		if it.Last() {
			last = append([]byte(nil), it.Key()...)
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	if first == nil || last == nil {
		return nil
	}
	// parallelize=false: Vigil runs one compaction at a time too, and this
	// step is not timed as part of any read benchmark.
	return e.db.Compact(first, append(last, 0), false)
}

// NewWriteBatch implements bench.BatchEngine with Pebble's own batches:
// writes go to a pebble.Batch, Commit applies it (DB.Apply) and closes it,
// and the next write starts a new one. A batch at least half a memtable
// big is queued by Apply as a flushable batch instead of being copied into
// the memtable.
func (e *PebbleEngine) NewWriteBatch() bench.WriteBatch { return &pebbleBatch{db: e.db} }

type pebbleBatch struct {
	db *pebble.DB
	b  *pebble.Batch
}

func (b *pebbleBatch) batch() *pebble.Batch {
	if b.b == nil {
		b.b = b.db.NewBatch()
	}
	return b.b
}

// Put and Delete cannot fail on a fresh, uncommitted batch (Pebble returns
// errors only for committed or read-only batches).
func (b *pebbleBatch) Put(key, value []byte) { _ = b.batch().Set(key, value, nil) }
func (b *pebbleBatch) Delete(key []byte)     { _ = b.batch().Delete(key, nil) }

func (b *pebbleBatch) Commit(sync bool) error {
	if b.b == nil {
		return nil
	}
	err := b.db.Apply(b.b, pebbleWriteOpts(sync))
	if cerr := b.b.Close(); err == nil {
		err = cerr
	}
	b.b = nil
	return err
}

// Metrics renders Pebble's LSM metrics table.
func (e *PebbleEngine) Metrics() string { return e.db.Metrics().String() }

// Close closes the DB.
func (e *PebbleEngine) Close() error { return e.db.Close() }

// Describe summarises how o is applied to both engines, for the header of
// the vs output: the settings they share, and where they differ.
func Describe(o bench.EngineOptions, cacheCredit int) (string, error) {
	vo, err := bench.VigilOptions(o)
	if err != nil {
		return "", err
	}
	vo.EnsureDefaults()
	if err := vo.Validate(); err != nil {
		return "", err
	}
	wal := "on, no fsync"
	if vo.DisableWAL {
		wal = "off"
	}
	cache := max(vo.BlockCacheSize, 0) >> 20
	var b strings.Builder
	fmt.Fprintf(&b, "Both:     block %d B, restart interval %d, compression %v, bloom %d bits/key (table filter), single-level index,\n",
		vo.BlockSize, vo.BlockRestartInterval, vo.Compression, max(vo.BloomBitsPerKey, 0))
	fmt.Fprintf(&b, "          L0 trigger %d, L0 stop %d, LBase %d MiB, target file %d MiB, max open files %d, WAL %s\n",
		vo.L0CompactionTrigger, vo.L0StopWritesTrigger, vo.LBaseMaxBytes>>20, vo.TargetFileSize>>20, vo.MaxOpenFiles, wal)
	fmt.Fprintf(&b, "Checksum: vigil %s; pebble %s (Pebble cannot write XXH3)\n", vo.ChecksumType.Resolve(), PebbleChecksum)
	if o.CostWriteBufferToCache && cache > 0 {
		fmt.Fprintf(&b, "Cache:    both %d MiB + %d x write buffer, memtables charged to it (Pebble always; Vigil's MemoryBudget)\n",
			cache, cacheCredit)
	} else {
		fmt.Fprintf(&b, "Cache:    vigil %d MiB of blocks; pebble %d MiB + %d x write buffer (Pebble charges its memtables to the block cache)\n",
			cache, cache, cacheCredit)
	}
	fmt.Fprintf(&b, "Vigil:    paranoid memory checks %v, memtable protection %d bytes/key, batch protection %d bytes/key (Pebble has none)\n",
		vo.ParanoidMemoryChecks, vo.MemtableProtectionBytesPerKey, vo.BatchProtectionBytesPerKey)
	fmt.Fprintf(&b, "Pebble:   format major version %v (newest); memtables start at 256 KiB and double up to the write buffer size,\n          so a fresh store's data is spread over several memtables until the first flush\n", pebble.FormatNewest)
	return b.String(), nil
}

var (
	_ bench.Engine      = (*PebbleEngine)(nil)
	_ bench.BatchEngine = (*PebbleEngine)(nil)
)
