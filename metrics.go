package vigil

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vigildb/vigil/internal/cache"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/sst"
)

// LevelMetrics describes one LSM level.
type LevelMetrics struct {
	NumFiles int
	Size     uint64
	// Score is the compaction score: for L0 files/L0CompactionTrigger, for
	// L1..L5 size/target; >= 1 means the level wants compaction.
	Score float64
}

// NumLevels is the number of LSM levels (L0 to L6), as in RocksDB and Pebble.
const NumLevels = manifest.NumLevels

// CacheMetrics are the block cache's counters since Open.
type CacheMetrics struct {
	Capacity int64 // bytes: the cache's limit now (see Options.MemoryBudget)
	Size     int64 // bytes charged now (buffer sizes plus a per-block overhead)
	Count    int64 // blocks cached now
	Hits     int64 // lookups that found the block
	Misses   int64 // lookups that did not
	// Rejected counts the blocks read but not cached: the cache was full
	// and had not been offered them lately (a block read once does not
	// evict one that may be read again).
	Rejected int64
	// Mapped is the memory the cache has mapped outside the Go heap: cached
	// blocks, evicted blocks still read by iterators, and free slots.
	Mapped int64
	// InUse is the part of Mapped in live blocks (cached or held).
	InUse int64
}

// String renders the counters on one line.
func (m CacheMetrics) String() string {
	return cache.Metrics(m).String()
}

// Metrics is a point-in-time report of the DB's state and activity. String
// renders it as a table.
type Metrics struct {
	Levels [NumLevels]LevelMetrics

	MemTable struct {
		// Size is the bytes used by the mutable memtable's arena.
		Size int
		// Count is the number of memtables (mutable + immutable).
		Count int
		// Entries in the mutable memtable.
		Entries uint64
		// Corruptions found in memtables (reads, flush validation, and
		// inserts, where a batch's protection disagrees with its copy).
		Corruptions int64
	}
	// BatchCorruptions counts the batches Apply refused, writing nothing of
	// them, because their bytes changed after their entries were added
	// (Options.BatchProtectionBytesPerKey) or do not decode.
	BatchCorruptions int64

	// Filter counts what the tables' bloom filters saved reads since Open
	// (db_bench --statistics shows them under RocksDB's names).
	Filter struct {
		// Checked counts the tables a point read (Get, Has) asked the
		// filter of; Useful those it answered "absent", which were not
		// read (rocksdb.bloom.filter.useful).
		Checked, Useful int64
		// PrefixChecked and PrefixUseful are the same for the tables a
		// prefix scan (IterOptions.Prefix) opened
		// (rocksdb.bloom.filter.prefix.checked and .useful).
		PrefixChecked, PrefixUseful int64
	}

	WAL struct {
		// Number of the live WAL (0 when disabled).
		LogNumber uint64
		// BytesWritten and Records since Open.
		BytesWritten int64
		Records      int64
		// Syncs counts the WAL fsyncs since Open: the live WAL's and
		// those of the WALs closed since (a WAL being closed after a
		// rotation counts once it is closed). Records/Syncs under
		// concurrent synced writers is how well group commit shares them.
		Syncs int64
		// Recycled counts the WALs written over an obsolete one's file
		// since Open (Options.WALRecycleFiles).
		Recycled int64
	}
	// Recovery is what Open's WAL replay did.
	Recovery struct {
		// WALs replayed, Batches applied from them, Records read.
		WALs, Batches, Records int64
		// DroppedRecords and DroppedBytes were dropped by the WAL readers:
		// torn tails, and with WALSkipAnyCorrupted damaged records.
		DroppedRecords, DroppedBytes int64
		// TornTails counts WALs whose end was torn by a crash.
		TornTails int64
		// Skipped counts damage WALSkipAnyCorrupted stepped over: damaged
		// records, missing batches, missing WALs. Always 0 in other modes,
		// where such damage fails Open.
		Skipped int64
	}
	Flush struct {
		Count    int64
		Bytes    int64
		Duration time.Duration
		// Elided is the point entries flushes left out: versions
		// shadowed by a newer one, or covered by a range tombstone, that
		// no snapshot can see.
		Elided uint64
	}
	Compact struct {
		Count int64
		// Seeks counts the compactions (of Count) that seeks asked for
		// (Options.SeekCompactionBytes).
		Seeks      int64
		ReadBytes  int64
		WriteBytes int64
		Duration   time.Duration
	}
	// Scrub is what the background scrubber (Options.ScrubInterval) and
	// DB.Scrub read and found: complete passes, tables and bytes verified,
	// corruptions found (each table so found is marked damaged), and when
	// the last pass ended (zero: none yet).
	Scrub struct {
		Passes, Files, Bytes, Corruptions int64
		// Healed counts the damaged tables replaced from Options.HealFrom.
		Healed   int64
		LastPass time.Time
	}
	Stall struct {
		// Count and Duration are of stalls that ended.
		Count    int64
		Duration time.Duration
		// Waiting is the number of writers stalled right now.
		Waiting int64
		// Slowdowns counts the waits of writes slowed down at or above
		// L0SlowdownWritesTrigger, and SlowdownDuration their total.
		Slowdowns        int64
		SlowdownDuration time.Duration
		// LastReason is the reason of the most recent stall.
		LastReason string
		// Reasons counts stalls by reason.
		Reasons map[string]int64
	}
	// Memory is what the DB holds, by component.
	Memory struct {
		// Memtables is the memory of every memtable not yet freed, arena
		// and filter (outside the Go heap); MemtablesPinned is the part of it held
		// only by readers and iterators (memtables already flushed).
		Memtables, MemtablesPinned int64
		// BlockCache is what the block cache holds now (blocks plus their
		// overhead) and BlockCacheCapacity its limit, which follows the
		// budget when there is one.
		BlockCache, BlockCacheCapacity int64
		// BlockCacheMapped is the memory the block cache's allocator has
		// mapped outside the Go heap: cached blocks, evicted blocks still
		// read by iterators, and the allocator's free slots.
		BlockCacheMapped int64
		// TableIndexes is the memory the open tables' readers keep outside
		// the Go heap: their index blocks (decompressed) and filter blocks.
		TableIndexes int64
		// TableIndexesMapped is the memory the process's allocator of
		// index and filter blocks has mapped: the TableIndexes of every
		// open DB in the process (they share it), plus the free slots and
		// spare chunks it keeps for the next tables.
		TableIndexesMapped int64
		// WALBuffers is the live WAL's in-memory blocks (outside the Go
		// heap): records not yet handed to the file and the free blocks
		// kept for reuse (at most 16 MiB; 128 KiB once writes pause).
		WALBuffers int64
		// Budget is Options.MemoryBudget (0: none).
		Budget int64
	}
	BlockCache CacheMetrics
	TableCache struct {
		Open         int
		Hits, Misses int64
	}
	Snapshots int
	// VisibleSeq is the sequence number of the newest visible write.
	VisibleSeq uint64
	// BackgroundError is the error that stopped writes, or nil.
	BackgroundError error
}

// Metrics returns the DB's current metrics.
func (d *DB) Metrics() *Metrics {
	m := &Metrics{}
	d.mu.Lock()
	v := d.vs.current
	scores := d.picker.scores(v)
	for l := range m.Levels {
		m.Levels[l] = LevelMetrics{NumFiles: len(v.Levels[l]), Size: v.LevelSize(l), Score: scores[l]}
	}
	var listed int64
	if d.mem != nil {
		m.MemTable.Size = d.mem.mt.ApproximateSize()
		m.MemTable.Entries = d.mem.mt.Count()
		listed += int64(d.mem.mt.Capacity())
	}
	for _, e := range d.imm {
		listed += int64(e.t.Capacity())
	}
	m.MemTable.Count = 1 + len(d.imm)
	m.WAL.LogNumber = d.wal.liveNum
	if d.wal.live != nil {
		ws := d.wal.live.Stats()
		m.WAL.Syncs = ws.Syncs
		m.Memory.WALBuffers = ws.BufferBytes
	}
	m.Snapshots = d.snapshots.count
	m.BackgroundError = d.bgErr
	d.mu.Unlock()

	s := &d.stats
	m.MemTable.Corruptions = s.memCorruptions.Load()
	m.BatchCorruptions = s.batchCorruptions.Load()
	if f := d.userReads.Filter; f != nil {
		m.Filter.Checked, m.Filter.Useful, m.Filter.PrefixChecked, m.Filter.PrefixUseful = f.Totals()
	}
	m.WAL.BytesWritten = d.wal.bytes.Load()
	m.WAL.Records = d.wal.records.Load()
	m.WAL.Syncs += d.wal.closedSyncs.Load()
	m.WAL.Recycled = d.stats.walRecycled.Load()
	r := &s.recovery
	m.Recovery.WALs, m.Recovery.Batches, m.Recovery.Records = r.wals, r.batches, r.records
	m.Recovery.DroppedRecords, m.Recovery.DroppedBytes = r.droppedRecords, r.droppedBytes
	m.Recovery.TornTails, m.Recovery.Skipped = r.tornTails, r.skipped
	m.Flush.Count = s.flushes.Load()
	m.Flush.Bytes = s.flushBytes.Load()
	m.Flush.Duration = time.Duration(s.flushNanos.Load())
	m.Flush.Elided = s.flushElided.Load()
	m.Scrub.Passes, m.Scrub.Files = s.scrubPasses.Load(), s.scrubFiles.Load()
	m.Scrub.Bytes, m.Scrub.Corruptions = s.scrubBytes.Load(), s.scrubCorruptions.Load()
	m.Scrub.Healed = s.scrubHealed.Load()
	if t := s.scrubLastPass.Load(); t != 0 {
		m.Scrub.LastPass = time.Unix(0, t)
	}
	m.Compact.Count = s.compactions.Load()
	m.Compact.Seeks = s.seekCompactions.Load()
	m.Compact.ReadBytes = s.compactReadBytes.Load()
	m.Compact.WriteBytes = s.compactWriteBytes.Load()
	m.Compact.Duration = time.Duration(s.compactNanos.Load())
	m.Stall.Count = s.writeStalls.Load()
	m.Stall.Duration = time.Duration(s.stallNanos.Load())
	m.Stall.Waiting = s.stalledWriters.Load()
	m.Stall.Slowdowns = s.slowdowns.Load()
	m.Stall.SlowdownDuration = time.Duration(s.slowdownNanos.Load())
	if r := s.lastStallReason.Load(); r != nil {
		m.Stall.LastReason = *r
	}
	m.Stall.Reasons = make(map[string]int64)
	s.stallReasons.Range(func(k, v any) bool {
		m.Stall.Reasons[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	if d.blockCache != nil {
		m.BlockCache = CacheMetrics(d.blockCache.Metrics())
	}
	m.Memory.Memtables = s.memtableBytes.bytes.Load()
	m.Memory.MemtablesPinned = max(m.Memory.Memtables-listed, 0)
	m.Memory.BlockCache = m.BlockCache.Size
	m.Memory.BlockCacheCapacity = m.BlockCache.Capacity
	m.Memory.BlockCacheMapped = m.BlockCache.Mapped
	m.Memory.TableIndexes = d.tableCache.indexBytes()
	_, m.Memory.TableIndexesMapped = sst.TableMemory()
	m.Memory.Budget = d.opts.MemoryBudget
	m.TableCache.Open = d.tableCache.size()
	m.TableCache.Hits = d.tableCache.hits()
	m.TableCache.Misses = d.tableCache.misses.Load()
	m.VisibleSeq = d.visibleSeq.Load()
	return m
}

// ReadAmp is the number of sources a point read may consult: memtables, L0
// files and non-empty levels.
func (m *Metrics) ReadAmp() int {
	n := m.MemTable.Count + m.Levels[0].NumFiles
	for l := 1; l < manifest.NumLevels; l++ {
		if m.Levels[l].NumFiles > 0 {
			n++
		}
	}
	return n
}

func humanBytes(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}

// String renders the metrics: an LSM table, then one line per subsystem.
func (m *Metrics) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "level | files |       size | score\n")
	fmt.Fprintf(&b, "------+-------+------------+------\n")
	var files int
	var size uint64
	for l, lm := range m.Levels {
		fmt.Fprintf(&b, "  L%d  | %5d | %10s | %5.2f\n", l, lm.NumFiles, humanBytes(lm.Size), lm.Score)
		files += lm.NumFiles
		size += lm.Size
	}
	fmt.Fprintf(&b, "total | %5d | %10s |\n", files, humanBytes(size))
	fmt.Fprintf(&b, "memtables: %d (mutable: %s, %d entries); corruptions found: %d\n",
		m.MemTable.Count, humanBytes(uint64(m.MemTable.Size)), m.MemTable.Entries, m.MemTable.Corruptions)
	if m.BatchCorruptions > 0 {
		fmt.Fprintf(&b, "batches refused as corrupt: %d\n", m.BatchCorruptions)
	}
	fmt.Fprintf(&b, "WAL: log %06d, %s in %d records, %d syncs, %d recycled\n", m.WAL.LogNumber, humanBytes(uint64(m.WAL.BytesWritten)), m.WAL.Records, m.WAL.Syncs, m.WAL.Recycled)
	rc := m.Recovery
	fmt.Fprintf(&b, "recovery: %d WALs, %d batches; dropped %d records / %s (%d torn tails), %d damaged stretches skipped\n",
		rc.WALs, rc.Batches, rc.DroppedRecords, humanBytes(uint64(rc.DroppedBytes)), rc.TornTails, rc.Skipped)
	fmt.Fprintf(&b, "flushes: %d, %s written in %v, %d entries elided\n", m.Flush.Count, humanBytes(uint64(m.Flush.Bytes)), m.Flush.Duration.Round(time.Millisecond), m.Flush.Elided)
	if m.Scrub.Passes > 0 || m.Scrub.Bytes > 0 {
		fmt.Fprintf(&b, "scrub: %d passes, %d tables and %s verified, %d corruptions found, last pass %s\n",
			m.Scrub.Passes, m.Scrub.Files, humanBytes(uint64(m.Scrub.Bytes)), m.Scrub.Corruptions, m.Scrub.LastPass.Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "compactions: %d (%d for seeks), read %s, wrote %s in %v\n", m.Compact.Count, m.Compact.Seeks,
		humanBytes(uint64(m.Compact.ReadBytes)), humanBytes(uint64(m.Compact.WriteBytes)), m.Compact.Duration.Round(time.Millisecond))
	fmt.Fprintf(&b, "write stalls: %d, %v", m.Stall.Count, m.Stall.Duration.Round(time.Millisecond))
	if m.Stall.Waiting > 0 {
		fmt.Fprintf(&b, ", %d writer(s) stalled now", m.Stall.Waiting)
	}
	if len(m.Stall.Reasons) > 0 {
		reasons := make([]string, 0, len(m.Stall.Reasons))
		for r, n := range m.Stall.Reasons {
			reasons = append(reasons, fmt.Sprintf("%d × %s", n, r))
		}
		sort.Strings(reasons)
		fmt.Fprintf(&b, " (%s)", strings.Join(reasons, "; "))
	}
	b.WriteByte('\n')
	fmt.Fprintf(&b, "write slowdowns: %d, %v\n", m.Stall.Slowdowns, m.Stall.SlowdownDuration.Round(time.Millisecond))
	bc := m.BlockCache
	hitRate := 0.0
	if bc.Hits+bc.Misses > 0 {
		hitRate = 100 * float64(bc.Hits) / float64(bc.Hits+bc.Misses)
	}
	mem := m.Memory
	fmt.Fprintf(&b, "memory: memtables %s (%s pinned by readers), block cache %s of %s (%s mapped), table indexes and filters %s (%s mapped in the process), WAL buffers %s",
		humanBytes(uint64(mem.Memtables)), humanBytes(uint64(mem.MemtablesPinned)), humanBytes(uint64(mem.BlockCache)),
		humanBytes(uint64(mem.BlockCacheCapacity)), humanBytes(uint64(mem.BlockCacheMapped)), humanBytes(uint64(mem.TableIndexes)),
		humanBytes(uint64(mem.TableIndexesMapped)), humanBytes(uint64(mem.WALBuffers)))
	if mem.Budget > 0 {
		fmt.Fprintf(&b, "; budget %s", humanBytes(uint64(mem.Budget)))
	}
	b.WriteByte('\n')
	fmt.Fprintf(&b, "block cache: %s in %d blocks, %d hits, %d misses (%.1f%% hit), %d not admitted\n",
		humanBytes(uint64(max(bc.Size, 0))), bc.Count, bc.Hits, bc.Misses, hitRate, bc.Rejected)
	fmt.Fprintf(&b, "table cache: %d open, %d hits, %d misses\n", m.TableCache.Open, m.TableCache.Hits, m.TableCache.Misses)
	fmt.Fprintf(&b, "snapshots: %d; visible seq: %d; read amp: %d\n", m.Snapshots, m.VisibleSeq, m.ReadAmp())
	if m.BackgroundError != nil {
		fmt.Fprintf(&b, "background error (DB is read-only): %v\n", m.BackgroundError)
	}
	return b.String()
}
