package vigil

import (
	"fmt"
	"runtime"
	"time"

	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/bgsys"
	"github.com/vigildb/vigil/internal/compact"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/internal/rangedel"
	"github.com/vigildb/vigil/sst"
)

// Leveled compaction.
//
// L0 holds flushed memtables, possibly overlapping, newest first. L1..L6
// each hold non-overlapping files sorted by key, and each level may hold
// LevelMultiplier times the bytes of the one above (L1 holds LBaseMaxBytes).
// A compaction merges files of one level with the overlapping files of the
// next and writes the result into the next level:
//
//   - L0 -> L1 when L0CompactionTrigger files wait (all of L0, plus the L1
//     files they overlap);
//   - Ln -> Ln+1 when Ln's size score (bytes / target) is the highest one
//     >= 1, one file at a time, round-robin through the level's key space.
//
// Outputs are split at TargetFileSize, but never between two versions of
// one user key, so every user key lives in one file per level. Versions no
// live snapshot can see are dropped (within each snapshot stripe only the
// newest version survives), and so are points under a range tombstone of
// the same stripe; deletions and range tombstones are dropped at the bottom
// (when no older data for their keys exists below the output level and no
// snapshot predates them).
//
// Integrity: inputs are read from disk, bypassing the block cache, through
// the table readers, which verify every block checksum (so a bit flip in a
// cached block cannot slip into an output under a fresh checksum); the
// output writer rejects keys out of order; and the
// entries written must equal the entries read minus those dropped. Any
// error stops the compaction, deletes its outputs, keeps its inputs, and
// (for corruption) turns the DB read-only with the error reported in the
// LOG, Metrics and later writes. Nothing is lost: inputs are only removed by
// the MANIFEST edit that adds the outputs.
//
// One compaction runs at a time (compactionMu), background or manual.

// maybeScheduleCompactionLocked wakes the compaction goroutine. d.mu is held.
func (d *DB) maybeScheduleCompactionLocked() {
	select {
	case d.compactKick <- struct{}{}:
	default:
	}
}

// compactionLoop deletes obsolete files and runs background compactions
// until the DB closes.
func (d *DB) compactionLoop() {
	defer d.bgWG.Done()
	for {
		select {
		case <-d.compactKick:
		case <-d.closing:
			return
		}
		d.deleteObsoleteFiles()
		for {
			select {
			case <-d.closing:
				return
			default:
			}
			d.compactionMu.Lock()
			d.mu.Lock()
			var c *compaction
			if d.bgErr == nil && !d.opts.DisableAutomaticCompactions {
				c = d.picker.pick(d.vs.current)
				if c == nil && d.seekAllowance > 0 {
					c = d.pickSeekCompactionLocked(d.vs.current)
				}
			}
			d.mu.Unlock()
			if c == nil {
				d.compactionMu.Unlock()
				break
			}
			err := d.runCompaction(c)
			d.compactionMu.Unlock()
			// Its inputs now, not when the run of compactions ends: until
			// deleted, an obsolete table stays open in the table cache,
			// its index and filter in memory, and its file on disk. The
			// cascade of L1 -> L2 compactions after a 10M-key fill held
			// 22 MiB of them (36 MiB open against 14 after).
			d.deleteObsoleteFiles()
			if err != nil {
				break
			}
		}
	}
}

// Compact compacts every level's files overlapping [start, end] (nil for
// unbounded) down to the bottom-most level that holds data, rewrites that
// level's files in the range in place (dropping versions no snapshot needs
// and tombstones with nothing below them), and waits. It flushes the
// memtable first, so all data in the range ends up compacted. The steps
// are the policy's (compactionPolicy.manual), and so is the move that
// ends them: a bottom level left over its target goes down, whole, to the
// level its size belongs in (settle).
func (d *DB) Compact(start, end []byte) error {
	if d.closed.Load() {
		return ErrClosed
	}
	if start != nil && end != nil && d.cmp.Cmp(start, end) > 0 {
		return base.InvalidArgumentErrorf("Compact: start %s > end %s", base.HexKey(start), base.HexKey(end))
	}
	if d.opts.ReadOnly {
		return fmt.Errorf("%w: opened with ReadOnly", ErrReadOnly)
	}
	if err := d.flushAndWait(false); err != nil {
		return err
	}
	d.compactionMu.Lock()
	defer d.compactionMu.Unlock()
	if d.closed.Load() {
		return ErrClosed
	}
	prevOutput := -1 // output level of the previous step
	for level := 0; level < manifest.NumLevels; level++ {
		var done bool
		c, err := d.pickManual(func(v *manifest.Version) (c *compaction) {
			c, done = d.picker.manual(v, level, start, end, prevOutput)
			return c
		})
		if err != nil {
			return err
		}
		if done {
			break
		}
		if c == nil {
			continue
		}
		if err := d.runCompaction(c); err != nil {
			return err
		}
		prevOutput = c.outputLevel
	}
	c, err := d.pickManual(d.picker.settle)
	if err != nil || c == nil {
		return err
	}
	return d.runCompaction(c)
}

// pickManual returns what pick picks from the current version, under
// d.mu, for Compact's next step; or the background error that stopped
// writes, which ends a manual compaction.
func (d *DB) pickManual(pick func(*manifest.Version) *compaction) (*compaction, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.bgErr; err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReadOnly, err)
	}
	return pick(d.vs.current), nil
}

// movable reports whether c runs as a trivial move: it can (trivialMove),
// and its output level's tables take the compression its input level's
// do (Options.Levels). A move does not recompress, so across a change of
// compression the tables are rewritten instead, as RocksDB does; else the
// data would keep the compression of the level it was written to.
func (d *DB) movable(c *compaction) bool {
	if !c.trivialMove() {
		return false
	}
	ic, iz := d.opts.levelCompression(c.level)
	oc, oz := d.opts.levelCompression(c.outputLevel)
	return ic == oc && (ic != ZstdCompression || iz == oz)
}

// runCompaction executes c and installs its result. compactionMu is held.
func (d *DB) runCompaction(c *compaction) error {
	start := time.Now()
	d.log.Infof("compaction starting: %s", c)

	if d.movable(c) {
		return d.moveFiles(c)
	}

	d.mu.Lock()
	// The readers of the current state read at visibleSeq without a
	// snapshot, and batches above it may be applied but not yet published
	// (a synced batch waits for its fsync; a flush takes a memtable once its
	// inserts are done): visibleSeq is a snapshot too, or an unpublished
	// version would shadow the version readers see, and every version above
	// it is settled by nobody yet, so none of them is dropped (compact's
	// settled): a reader may come to see one before the other.
	snaps := d.snapshots.seqs()
	vis := d.visibleSeq.Load()
	if len(snaps) == 0 || snaps[len(snaps)-1] < vis {
		snaps = append(snaps, vis)
	}
	v := d.vs.current
	v.Ref()
	d.mu.Unlock()
	defer v.Unref()

	outputs, stats, err := d.compactFiles(c, v, snaps, vis)
	if err != nil {
		for _, m := range outputs {
			_ = d.fs.Remove(makeFilename(d.fs, d.dirname, fileTypeTable, m.FileNum))
		}
		d.mu.Lock()
		d.setBackgroundErrorLocked(err, "compaction "+c.String())
		d.mu.Unlock()
		d.emitCompaction(CompactionInfo{Level: c.level, OutputLevel: c.outputLevel, Reason: c.reason, Inputs: c.fileNums(), Duration: time.Since(start), Err: err})
		return err
	}
	e := &manifest.VersionEdit{}
	var readBytes, writeBytes uint64
	for i, files := range c.inputs {
		lvl := c.level
		if i == 1 {
			lvl = c.outputLevel
		}
		for _, f := range files {
			e.Deleted = append(e.Deleted, manifest.DeletedFile{Level: lvl, FileNum: f.FileNum})
			readBytes += f.Size
		}
	}
	for _, m := range outputs {
		e.Added = append(e.Added, manifest.NewFile{Level: c.outputLevel, Meta: m})
		writeBytes += m.Size
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// Outputs stay if this fails: the edit may be durable despite the error
	// (see flushOne); orphans are deleted at the next Open.
	if err := d.installCompactionLocked(c, e); err != nil {
		return err
	}
	dur := time.Since(start)
	info := CompactionInfo{Level: c.level, OutputLevel: c.outputLevel, Reason: c.reason, Inputs: c.fileNums(), ReadBytes: readBytes, WriteBytes: writeBytes, Duration: dur}
	for _, m := range outputs {
		info.Outputs = append(info.Outputs, m.FileNum)
	}
	d.emitCompaction(info)
	d.stats.compactReadBytes.Add(int64(readBytes))
	d.stats.compactWriteBytes.Add(int64(writeBytes))
	d.stats.compactNanos.Add(int64(dur))
	d.log.Infof("compaction finished in %v: %s -> %d files at L%d; read %d entries / %d bytes, wrote %d entries / %d bytes, dropped %d",
		dur, c, len(outputs), c.outputLevel, stats.Read, readBytes, stats.Written, writeBytes, stats.Dropped)
	return nil
}

// installCompactionLocked makes the edit of compaction c durable and
// current, and wakes what waits for compactions: stalled writers, the next
// pick. A failure is a background error. d.mu is held.
func (d *DB) installCompactionLocked(c *compaction, e *manifest.VersionEdit) error {
	if err := d.vs.logAndApply(e); err != nil {
		d.setBackgroundErrorLocked(err, "compaction: MANIFEST update")
		return err
	}
	d.updateReadStateLocked()
	d.stats.compactions.Add(1)
	if c.reason == reasonSeeks {
		d.stats.seekCompactions.Add(1)
	}
	d.stallCond.Broadcast()
	d.maybeScheduleCompactionLocked()
	return nil
}

// compactFiles merges c's inputs into new tables at the output level:
// package compact decides what survives and where outputs split; this
// opens the inputs (bypassing the block cache), creates and finishes the
// tables, and checks every count.
func (d *DB) compactFiles(c *compaction, v *manifest.Version, snaps []uint64, settled uint64) (outputs []*manifest.FileMetadata, st compact.Stats, err error) {
	var children []base.InternalIterator
	var tombs []rangedel.Tombstone
	var expectEntries uint64
	defer func() {
		for _, ch := range children {
			if cerr := ch.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
	}()
	for _, files := range c.inputs {
		for _, f := range files {
			h, err := d.tableCache.get(f)
			if err != nil {
				return nil, st, err
			}
			tombs = append(tombs, h.reader.RangeDels()...)
			children = append(children, &tableIter{InternalIterator: h.reader.NewUncachedIter(), h: h})
			expectEntries += f.NumEntries
		}
	}
	bottom := func(start, end []byte) bool {
		// No older data for [start, end] below the output level.
		for l := c.outputLevel + 1; l < manifest.NumLevels; l++ {
			if len(v.Overlaps(l, start, end)) > 0 {
				return false
			}
		}
		return true
	}
	iter := compact.NewIter(d.cmp, newMergingIter(d.cmp, children), snaps, settled, tombs, bottom, d.mergeFunc(), &st)

	var wNum uint64
	open := func() (compact.Writer, error) {
		d.mu.Lock()
		wNum = d.vs.allocFileNum()
		d.mu.Unlock()
		name := makeFilename(d.fs, d.dirname, fileTypeTable, wNum)
		f, err := d.fs.Create(name)
		if err != nil {
			return nil, fmt.Errorf("creating %s: %w", name, err)
		}
		return sst.NewWriter(f, d.sstWriterOptions(wNum, c.outputLevel)), nil
	}
	finish := func(w compact.Writer) (uint64, error) {
		sm, err := w.(*sst.Writer).Close()
		if err != nil {
			return 0, fmt.Errorf("finishing table %06d: %w", wNum, err)
		}
		outputs = append(outputs, metaFromSST(wNum, sm))
		return sm.NumEntries + sm.NumRangeDels, nil
	}
	out := compact.NewOutputs(d.cmp, uint64(d.opts.TargetFileSize), iter.Kept, open, finish, &st)
	defer func() {
		if w := out.Current(); w != nil {
			w.(*sst.Writer).Abort()
			_ = d.fs.Remove(makeFilename(d.fs, d.dirname, fileTypeTable, wNum))
		}
	}()
	n := 0
	for ok := iter.First(); ok; ok = iter.Next() {
		if err := out.Add(iter.Key(), iter.Value()); err != nil {
			return outputs, st, fmt.Errorf("compaction output %06d: %w", wNum, err)
		}
		if n++; n%backgroundYieldEvery == 0 {
			// Let a writer or reader waiting for a processor run: the Go
			// scheduler would otherwise preempt this loop only after 10 ms,
			// which is what the slowest write then waited.
			runtime.Gosched()
		}
	}
	if err := iter.Error(); err != nil {
		return outputs, st, fmt.Errorf("reading compaction inputs: %w", err)
	}
	if err := out.Finish(); err != nil {
		return outputs, st, fmt.Errorf("compaction output %06d: %w", wNum, err)
	}
	if err := compact.CheckRead(&st, expectEntries); err != nil {
		return outputs, st, err
	}
	if err := bgsys.Sync(d.dataDir); err != nil {
		return outputs, st, fmt.Errorf("syncing directory after compaction outputs: %w", err)
	}
	for _, m := range outputs {
		if err := d.checkNewTable(m); err != nil {
			return outputs, st, fmt.Errorf("compaction output: %w", err)
		}
	}
	return outputs, st, nil
}
