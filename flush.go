package vigil

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/bgsys"
	"github.com/vigildb/vigil/internal/compact"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/sst"
)

// Flushes turn the oldest immutable memtable into an L0 SST. One flush runs
// at a time, on the flush goroutine, oldest memtable first, so L0 files are
// created in sequence-number order.
//
// A flush re-validates everything it reads before any byte reaches the
// table: memtable.Validate checks key order, every per-KV checksum and the
// entry count; the copy loop reads through a validating iterator and the
// SST writer rejects keys out of order; and the number of entries written
// must equal the number of adds. Any corruption stops the flush, deletes the
// partial table, keeps the WAL, and turns the DB read-only: a corrupt
// memtable never becomes a corrupt SST.

// Flush writes the mutable memtable (and any waiting immutable ones) to L0
// and waits until they are durable in SSTs.
func (d *DB) Flush() error {
	if d.closed.Load() {
		return ErrClosed
	}
	if d.opts.ReadOnly {
		return fmt.Errorf("%w: opened with ReadOnly", ErrReadOnly)
	}
	return d.flushAndWait(false)
}

// flushAndWait rotates the memtable if it holds anything and waits for every
// memtable up to it to be flushed.
func (d *DB) flushAndWait(closing bool) error {
	d.commitMu.Lock()
	if !closing && d.closed.Load() {
		// Close may already have released the WAL and MANIFEST.
		d.commitMu.Unlock()
		return ErrClosed
	}
	d.mu.Lock()
	if d.bgErr != nil {
		err := d.bgErr
		d.mu.Unlock()
		d.commitMu.Unlock()
		return fmt.Errorf("%w: %w", ErrReadOnly, err)
	}
	var target *memTableEntry
	if !d.mem.mt.Empty() {
		target = d.mem
		if err := d.rotateMemtableLocked(0); err != nil {
			if !errors.Is(err, errNoSpareWAL) {
				d.setBackgroundErrorLocked(err, "memtable rotation")
				d.mu.Unlock()
				d.commitMu.Unlock()
				return err
			}
			// Wait for the next WAL without either lock, then start over.
			d.mu.Unlock()
			d.commitMu.Unlock()
			if err := d.waitForStall(); err != nil {
				return err
			}
			return d.flushAndWait(closing)
		}
	} else if len(d.imm) > 0 {
		target = d.imm[len(d.imm)-1]
	}
	d.commitMu.Unlock()
	defer d.mu.Unlock()
	if target == nil {
		return nil
	}
	return d.waitFlushedLocked(target, closing)
}

// waitFlushedLocked waits until memtable e is flushed, or a background
// error stops flushes, or (unless closing: Close itself waits here) Close
// begins. d.mu is held (the wait releases it).
func (d *DB) waitFlushedLocked(e *memTableEntry, closing bool) error {
	e.forceFlush = true
	d.maybeScheduleFlushLocked()
	for {
		select {
		case <-e.flushed:
			return nil
		default:
		}
		if d.bgErr != nil {
			return fmt.Errorf("%w: flush failed: %w", ErrReadOnly, d.bgErr)
		}
		select {
		case <-d.closing:
			if !closing {
				return ErrClosed
			}
		default:
		}
		d.stallCond.Wait()
	}
}

// maybeScheduleFlushLocked wakes the flush goroutine if a memtable is due
// (flushDueLocked).
func (d *DB) maybeScheduleFlushLocked() {
	if !d.flushDueLocked() || d.bgErr != nil {
		return
	}
	select {
	case d.flushPending <- struct{}{}:
	default:
	}
}

// flushDueLocked reports whether the oldest immutable memtable is to be
// flushed now (immDueLocked). When the immutable memtables are due by
// their size, it marks the newest forceFlush, so that all of them flush,
// one after another.
//
// Why wait at all: the first three memtables after Open are a quarter, a
// quarter and a half of WriteBufferSize (scheduledMemtableSize). Flushing
// the small ones as they fill would put a young DB's data in small L0
// tables, which read slower than memtables do; so they wait until the
// three hold a WriteBufferSize, where one memtable would have rotated.
// Every later memtable is due as soon as it fills, as before. d.mu is
// held.
func (d *DB) flushDueLocked() bool {
	due, forced := d.immDueLocked()
	if due && !forced {
		d.imm[len(d.imm)-1].forceFlush = true
	}
	return due
}

// immDueLocked reports whether the immutable memtables are due for a
// flush: one is marked forceFlush (someone waits for it; forced), or their
// arenas add up to a WriteBufferSize, or a rotation now would stall writes
// (immFullLocked: with MaxImmutableMemtables = 1 the mutable memtable and
// the small first ones can reach that limit below a WriteBufferSize, and
// the stall needs them flushed). d.mu is held.
func (d *DB) immDueLocked() (due, forced bool) {
	if len(d.imm) == 0 {
		return false, false
	}
	bytes, forced := d.immArenasLocked()
	return forced || bytes >= int64(d.opts.WriteBufferSize) || d.immOverLimitLocked(bytes), forced
}

// flushLoop runs flushes until the DB closes.
func (d *DB) flushLoop() {
	defer d.bgWG.Done()
	for {
		select {
		case <-d.flushPending:
		case <-d.closing:
			return
		}
		for {
			did, err := d.flushOne()
			if err != nil || !did {
				break
			}
			select {
			case <-d.closing:
				return
			default:
			}
		}
	}
}

// flushOne flushes the oldest immutable memtable if it is due
// (flushDueLocked). did is false if there was nothing to flush.
func (d *DB) flushOne() (did bool, err error) {
	d.mu.Lock()
	if !d.flushDueLocked() || d.bgErr != nil {
		d.mu.Unlock()
		return false, nil
	}
	e := d.imm[0]
	d.flushing.Store(true)
	d.mu.Unlock()

	start := time.Now()
	// Wait for batches still being inserted into the memtable, and only
	// then ask whether it is empty: a memtable can reach the immutable list
	// with a batch assigned to it and not yet applied (applyFlushable puts
	// it there rather than drop it), and judged empty before that batch
	// lands it would be flushed as nothing, its WAL then obsolete.
	e.writers.wait()
	var fileNum uint64
	var keep flushKeep
	if !e.t.Empty() {
		d.mu.Lock()
		fileNum = d.vs.allocFileNum()
		keep = d.flushKeepLocked(e)
		d.mu.Unlock()
	}
	if h := d.testingHooks; h != nil && h.beforeFlush != nil {
		h.beforeFlush(e.t)
	}
	var meta *manifest.FileMetadata
	if err = e.readable(); err == nil && fileNum != 0 {
		meta, err = d.writeMemtableTable(e.t, fileNum, keep, "flush")
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	// Data newer than a pending ingestion must not reach the LSM before the
	// ingestion's tables, or they could be placed below it (ingest.go).
	for err == nil && d.ingestSeq != 0 && e.lastSeq.Load() >= d.ingestSeq {
		d.stallCond.Wait()
	}
	d.flushing.Store(false)
	if err != nil {
		d.setBackgroundErrorLocked(err, "flush")
		d.emitFlush(FlushInfo{LogNum: e.logNum, FileNum: fileNum, Duration: time.Since(start), Err: err})
		return false, err
	}
	if err := d.vs.logAndApply(d.flushEditLocked(e, meta)); err != nil {
		// The edit may or may not be durable (a failed sync says nothing
		// about what reached the disk), so the new table stays: if the
		// edit is lost, the next Open deletes it as an orphan.
		d.setBackgroundErrorLocked(err, "flush: MANIFEST update")
		return false, err
	}
	d.imm = d.imm[1:]
	d.updateReadStateLocked()
	e.unref() // the list's reference: readers still holding it keep it
	close(e.flushed)
	d.flushedLocked(e, meta, time.Since(start))
	// The old WAL and any tables freed by the new read state go now, but
	// not under d.mu (Flush waiters wake on the broadcast below, after it).
	d.mu.Unlock()
	d.deleteObsoleteFiles()
	d.mu.Lock()
	d.maybeScheduleFlushLocked()
	d.maybeScheduleCompactionLocked()
	d.stallCond.Broadcast()
	return true, nil
}

// flushEditLocked is the MANIFEST edit that installs the flush of e (into
// table meta, nil if it held nothing): the log number moves past e's WAL
// and the last seqnum up to e's. d.mu is held.
func (d *DB) flushEditLocked(e *memTableEntry, meta *manifest.FileMetadata) *manifest.VersionEdit {
	edit := &manifest.VersionEdit{}
	if !d.opts.DisableWAL {
		next := d.mem.logNum
		if len(d.imm) > 1 {
			next = d.imm[1].logNum
		}
		edit.SetLogNumber(next)
	}
	if meta != nil {
		edit.Added = append(edit.Added, manifest.NewFile{Level: 0, Meta: meta})
	}
	// The memtable's last seqnum, not the table's: entries dropped at flush
	// (empty range tombstones) must not leave a gap the next WAL's batches
	// would seem to start after.
	last := e.lastSeq.Load()
	if meta != nil {
		last = max(last, meta.LargestSeq)
	}
	if last > 0 {
		edit.SetLastSeq(last)
	}
	return edit
}

// flushedLocked counts, reports (EventListener) and logs the flush of e
// into meta (nil: it held nothing) that took dur. d.mu is held.
func (d *DB) flushedLocked(e *memTableEntry, meta *manifest.FileMetadata, dur time.Duration) {
	d.stats.flushes.Add(1)
	d.stats.flushNanos.Add(int64(dur))
	info := FlushInfo{LogNum: e.logNum, Duration: dur}
	if meta != nil {
		info.FileNum, info.Entries, info.Bytes = meta.FileNum, meta.NumEntries+meta.NumRangeDels, meta.Size
	}
	d.emitFlush(info)
	if meta == nil {
		d.log.Infof("flushed empty memtable (WAL %06d)", e.logNum)
		return
	}
	d.stats.flushBytes.Add(int64(meta.Size))
	d.log.Infof("flushed memtable (WAL %06d) to %06d.sst: %d entries, %d bytes, %v; L0 has %d files",
		e.logNum, meta.FileNum, meta.NumEntries+meta.NumRangeDels, meta.Size, dur, len(d.vs.current.Levels[0]))
}

// sstWriterOptions are the table options for new files that go into
// level (flushes: 0; see Options.Levels).
func (d *DB) sstWriterOptions(fileNum uint64, level int) sst.WriterOptions {
	c, z := d.opts.levelCompression(level)
	return sst.WriterOptions{
		ChecksumType:         d.cksum,
		Compression:          c,
		ZstdLevel:            z,
		BlockSize:            d.opts.BlockSize,
		BlockRestartInterval: d.opts.BlockRestartInterval,
		BloomBitsPerKey:      max(d.opts.BloomBitsPerKey, 0),
		FileNum:              fileNum,
		Comparer:             d.cmp,
		Identity:             sst.Identity{DB: d.vs.dbID, Session: d.session, FileNum: fileNum},
	}
}

// flushKeep says which point entries of a memtable a flush must write.
// With elide set it leaves out those no reader can see: a version shadowed
// by a newer one of its key, or covered by a range tombstone of the
// memtable, with no snapshot between the two (compact.Filter, the
// compaction's rule). Range tombstones are all written, so older data below
// stays deleted.
type flushKeep struct {
	elide bool
	snaps []uint64 // the live snapshots' seqnums, ascending
}

// flushKeepLocked is the flushKeep for flushing e. Entries are left out only
// when every batch of e is visible: a reader at the visible seqnum reads no
// snapshot, and a version it sees must not be dropped for a newer one it
// does not see yet (compactions count the visible seqnum as a snapshot for
// the same reason). d.mu is held.
func (d *DB) flushKeepLocked(e *memTableEntry) flushKeep {
	if d.visibleSeq.Load() < e.lastSeq.Load() {
		return flushKeep{}
	}
	return flushKeep{elide: true, snaps: d.snapshots.seqs()}
}

// writeMemtableTable validates mt and writes it to table fileNum (leaving
// out what keep allows), returning its metadata, or nil for an empty
// memtable. On any error the partial file is removed.
func (d *DB) writeMemtableTable(mt flushable, fileNum uint64, keep flushKeep, why string) (meta *manifest.FileMetadata, err error) {
	if mt.Empty() {
		// Nothing to write, but an empty skiplist can still be damaged.
		if err := mt.Validate(); err != nil {
			return nil, d.validationFailed(err, fileNum, why)
		}
		return nil, nil
	}
	name := makeFilename(d.fs, d.dirname, fileTypeTable, fileNum)
	f, err := d.fs.Create(name)
	if err != nil {
		return nil, fmt.Errorf("%s: creating %s: %w", why, name, err)
	}
	w := sst.NewWriter(f, d.sstWriterOptions(fileNum, 0))
	defer func() {
		if err != nil {
			w.Abort()
			_ = d.fs.Remove(name)
		}
	}()
	// One pass: the validation walk hands each entry to the writer as its
	// checks pass; if a check fails, even after the last entry, the table
	// is removed, never installed.
	if meta, err = d.writeValidated(mt, w, name, fileNum, keep, why); err == nil && meta == nil {
		// Nothing but empty tombstones: no table.
		w.Abort()
		_ = d.fs.Remove(name)
	}
	return meta, err
}

// writeValidated writes mt to w from its validation walk (ValidateEach: a
// memtable far larger than the CPU caches costs a cache miss per entry and
// pass, so it is read once, not validated and then read again). On error
// the caller aborts w and removes the file.
func (d *DB) writeValidated(mt flushable, w *sst.Writer, name string, fileNum uint64, keep flushKeep, why string) (*manifest.FileMetadata, error) {
	var filter *compact.Filter
	if keep.elide {
		tombs, err := mt.RangeDels(base.SeqNumMax)
		if err != nil {
			return nil, d.validationFailed(err, fileNum, why)
		}
		filter, _, _ = compact.NewFilter(d.cmp, keep.snaps, base.SeqNumMax, tombs, nil, d.mergeFunc()) // every batch is visible (flushKeepLocked)
	}
	var n, dropped uint64
	var werr error // the writer's error, not the memtable's
	add := func(ik base.InternalKey, value []byte) error {
		if werr = w.Add(ik, value); werr != nil {
			return werr
		}
		n++
		return nil
	}
	var visited uint64
	err := mt.ValidateEach(func(ik base.InternalKey, value []byte) error {
		if visited++; visited%backgroundYieldEvery == 0 {
			runtime.Gosched() // see backgroundYieldEvery
		}
		if filter != nil {
			return filter.Add(ik, value, add) // what it leaves out is validated like the rest, and counted below
		}
		return add(ik, value)
	}, func(ik base.InternalKey, end []byte) error {
		if d.dropEmptyTombstone(ik, end, fileNum, why) {
			dropped++
			return nil
		}
		if werr = w.AddRangeDel(ik.UserKey, end, ik.SeqNum()); werr != nil {
			return werr
		}
		n++
		return nil
	})
	if err == nil && filter != nil {
		err = filter.Finish(add)
	}
	var elided uint64
	if filter != nil {
		elided = filter.Dropped()
	}
	switch {
	case werr != nil:
		return nil, fmt.Errorf("%s of table %06d: %w", why, fileNum, werr)
	case err != nil:
		return nil, d.validationFailed(err, fileNum, why)
	case n+dropped+elided != mt.Count():
		return nil, base.CorruptionErrorf("%s of table %06d: read %d entries from a memtable that took %d adds", why, fileNum, n+dropped+elided, mt.Count())
	case n == 0:
		return nil, nil // nothing but empty tombstones: the caller drops the file
	}
	if elided > 0 {
		d.stats.flushElided.Add(elided)
	}
	return d.finishMemtableTable(w, name, fileNum, n, why)
}

// validationFailed counts and reports a memtable (or flushable batch) that
// failed the flush's validation: the flush writes no table from it.
func (d *DB) validationFailed(err error, fileNum uint64, why string) error {
	d.stats.memCorruptions.Add(1)
	return fmt.Errorf("%s refused to write table %06d: memtable failed validation: %w", why, fileNum, base.MarkCorruption(err))
}

// dropEmptyTombstone reports whether the range tombstone [k.UserKey, end)
// is empty or inverted, and logs that the flush drops it. Such a range
// deletes nothing. Batch refuses them now, but a WAL written before it did
// may hold one, and a table cannot: dropping it beats failing every flush.
func (d *DB) dropEmptyTombstone(k base.InternalKey, end []byte, fileNum uint64, why string) bool {
	if d.cmp.Cmp(k.UserKey, end) < 0 {
		return false
	}
	d.log.Infof("%s of table %06d: dropped the empty range tombstone [%s, %s)#%d",
		why, fileNum, base.HexKey(k.UserKey), base.HexKey(end), k.SeqNum())
	return true
}

// finishMemtableTable closes the table a flush wrote n entries to, syncs
// the directory and checks the table. On error the caller removes the file
// (w is closed or aborted by then).
func (d *DB) finishMemtableTable(w *sst.Writer, name string, fileNum, n uint64, why string) (*manifest.FileMetadata, error) {
	sm, err := w.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: finishing %s: %w", why, name, err)
	}
	if got := sm.NumEntries + sm.NumRangeDels; got != n {
		return nil, base.CorruptionErrorf("%s: table %06d holds %d entries, %d were written", why, fileNum, got, n)
	}
	if err := bgsys.Sync(d.dataDir); err != nil {
		return nil, fmt.Errorf("%s: syncing directory after %s: %w", why, name, err)
	}
	meta := metaFromSST(fileNum, sm)
	if err := d.checkNewTable(meta); err != nil {
		return nil, fmt.Errorf("%s: %w", why, err)
	}
	return meta, nil
}

// metaFromSST converts the SST writer's metadata.
func metaFromSST(fileNum uint64, sm *sst.Meta) *manifest.FileMetadata {
	return &manifest.FileMetadata{
		FileNum:      fileNum,
		Size:         sm.Size,
		Smallest:     sm.Smallest.Clone(),
		Largest:      sm.Largest.Clone(),
		SmallestSeq:  sm.SmallestSeq,
		LargestSeq:   sm.LargestSeq,
		NumEntries:   sm.NumEntries,
		NumDeletions: sm.NumDeletions,
		NumRangeDels: sm.NumRangeDels,
		FileChecksum: sm.FileChecksum,
		ChecksumType: sm.ChecksumType,
		Identity:     sm.Identity,
	}
}

// backgroundYieldEvery is how many entries a flush reads (whether it
// writes them or leaves them out) or a compaction writes between yields of
// its processor (runtime.Gosched). With GOMAXPROCS as small as 2, a flush
// and a compaction can hold every processor, and a foreground write that
// becomes runnable would wait for the scheduler's 10 ms preemption; a
// yield every ~1024 entries (some 100-300 µs of work) bounds that wait at
// little cost. A flush counts what it reads: a raft log's memtable is
// mostly entries its own range deletions cover, some 180k of them left
// out for 14k written, so counting the written ones let the flush run some
// 25 ms between yields.
const backgroundYieldEvery = 1024
