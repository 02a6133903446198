package vigil

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/vigildb/vigil/internal/base"
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

// compaction is one picked unit of work.
type compaction struct {
	level       int // input level; output is level+1
	outputLevel int
	inputs      [2][]*manifest.FileMetadata // [0] from level, [1] from outputLevel
	reason      string
	// noMove forbids the trivial move of a lone input (manual compactions
	// rewrite, to drop what they can).
	noMove bool
	// smallest, largest user keys of all inputs (largest inclusive).
	smallest, largest []byte
}

func (c *compaction) String() string {
	nums := func(fs []*manifest.FileMetadata) []uint64 {
		var out []uint64
		for _, f := range fs {
			out = append(out, f.FileNum)
		}
		return out
	}
	return fmt.Sprintf("L%d %v + L%d %v (%s)", c.level, nums(c.inputs[0]), c.outputLevel, nums(c.inputs[1]), c.reason)
}

// levelMaxBytes is the target size of level (1..6).
func (d *DB) levelMaxBytes(level int) uint64 {
	m := uint64(d.opts.LBaseMaxBytes)
	for l := 1; l < level; l++ {
		m *= uint64(d.opts.LevelMultiplier)
	}
	return m
}

// levelScores returns the compaction score of each level: for L0 the file
// count over the trigger, for L1..L5 the size over the target. L6 has none.
func (d *DB) levelScores(v *manifest.Version) [manifest.NumLevels]float64 {
	var s [manifest.NumLevels]float64
	s[0] = float64(len(v.Levels[0])) / float64(d.opts.L0CompactionTrigger)
	for l := 1; l < manifest.NumLevels-1; l++ {
		s[l] = float64(v.LevelSize(l)) / float64(d.levelMaxBytes(l))
	}
	return s
}

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
		d.mu.Lock()
		d.deleteObsoleteFilesLocked()
		d.mu.Unlock()
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
				c = d.pickCompactionLocked()
			}
			d.mu.Unlock()
			if c == nil {
				d.compactionMu.Unlock()
				break
			}
			err := d.runCompaction(c)
			d.compactionMu.Unlock()
			if err != nil {
				break
			}
		}
	}
}

// pickCompactionLocked chooses the level with the highest score >= 1.
func (d *DB) pickCompactionLocked() *compaction {
	v := d.vs.current
	scores := d.levelScores(v)
	// The highest score >= 1 wins; on a tie the upper level does, so L0
	// (whose backlog stalls writes) goes first.
	best, bestScore := -1, 0.0
	for l := 0; l < manifest.NumLevels-1; l++ {
		if scores[l] >= 1 && scores[l] > bestScore && len(v.Levels[l]) > 0 {
			best, bestScore = l, scores[l]
		}
	}
	if best < 0 {
		return nil
	}
	reason := fmt.Sprintf("score %.2f", bestScore)
	if best == 0 {
		return d.newCompaction(v, 0, slices.Clone(v.Levels[0]), reason)
	}
	files := v.Levels[best]
	// Round-robin: the first file after the last compacted key.
	i := 0
	if ptr := d.compactPointer[best]; ptr != nil {
		i = sort.Search(len(files), func(i int) bool { return bytes.Compare(files[i].Smallest.UserKey, ptr) > 0 })
		if i == len(files) {
			i = 0
		}
	}
	d.compactPointer[best] = slices.Clone(files[i].Largest.UserKey)
	return d.newCompaction(v, best, []*manifest.FileMetadata{files[i]}, reason)
}

// newCompaction adds to level's inputs the overlapping files of the next
// level.
func (d *DB) newCompaction(v *manifest.Version, level int, inputs []*manifest.FileMetadata, reason string) *compaction {
	c := &compaction{level: level, outputLevel: level + 1, reason: reason}
	c.inputs[0] = inputs
	c.smallest, c.largest = keyRange(inputs)
	c.inputs[1] = v.Overlaps(c.outputLevel, c.smallest, c.largest)
	all := append(slices.Clone(c.inputs[0]), c.inputs[1]...)
	c.smallest, c.largest = keyRange(all)
	return c
}

// keyRange returns the smallest and largest user keys of files.
func keyRange(files []*manifest.FileMetadata) (smallest, largest []byte) {
	for i, f := range files {
		if i == 0 || bytes.Compare(f.Smallest.UserKey, smallest) < 0 {
			smallest = f.Smallest.UserKey
		}
		if i == 0 || bytes.Compare(f.Largest.UserKey, largest) > 0 {
			largest = f.Largest.UserKey
		}
	}
	return smallest, largest
}

// Compact compacts every level's files overlapping [start, end] (nil for
// unbounded) down to the bottom-most level that holds data, rewrites that
// level's files in the range in place (dropping versions no snapshot needs
// and tombstones with nothing below them), and waits. It flushes the
// memtable first, so all data in the range ends up compacted.
func (d *DB) Compact(start, end []byte) error {
	if d.closed.Load() {
		return ErrClosed
	}
	if start != nil && end != nil && bytes.Compare(start, end) > 0 {
		return base.InvalidArgumentErrorf("Compact: start %s > end %s", base.HexKey(start), base.HexKey(end))
	}
	if err := d.Flush(); err != nil {
		return err
	}
	d.compactionMu.Lock()
	defer d.compactionMu.Unlock()
	if d.closed.Load() {
		return ErrClosed
	}
	prevOutput := -1 // output level of the previous step
	for level := 0; level < manifest.NumLevels; level++ {
		d.mu.Lock()
		if d.bgErr != nil {
			err := d.bgErr
			d.mu.Unlock()
			return fmt.Errorf("%w: %w", ErrReadOnly, err)
		}
		v := d.vs.current
		last := 0 // the deepest level holding data
		for l := manifest.NumLevels - 1; l > 0; l-- {
			if len(v.Levels[l]) > 0 {
				last = l
				break
			}
		}
		if level > last && !(level == 1 && last == 0) {
			d.mu.Unlock()
			break
		}
		inputs := v.Overlaps(level, start, end)
		if len(inputs) == 0 {
			d.mu.Unlock()
			continue
		}
		var c *compaction
		switch {
		case level == 0:
			// L0 files overlap one another: take all that overlap the
			// range's closure, to keep newer-over-older order.
			c = d.newCompaction(v, 0, expandL0(v.Levels[0], inputs), "manual")
			c.noMove = true
		case level < last:
			c = d.newCompaction(v, level, inputs, "manual")
			c.noMove = true
		case prevOutput == level:
			// The previous step merged everything in range into this
			// bottom level already.
			d.mu.Unlock()
			continue
		default:
			// The bottom level: rewrite it in place, which drops what no
			// snapshot needs and the tombstones.
			c = &compaction{level: level, outputLevel: level, reason: "manual, bottom level in place", noMove: true}
			c.inputs[0] = inputs
			c.smallest, c.largest = keyRange(inputs)
		}
		d.mu.Unlock()
		if err := d.runCompaction(c); err != nil {
			return err
		}
		prevOutput = c.outputLevel
	}
	return nil
}

// disjoint reports whether no two files' key ranges overlap.
func disjoint(files []*manifest.FileMetadata) bool {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b *manifest.FileMetadata) int { return base.CompareInternal(a.Smallest, b.Smallest) })
	for i := 1; i < len(sorted); i++ {
		p, f := sorted[i-1], sorted[i]
		c := bytes.Compare(p.Largest.UserKey, f.Smallest.UserKey)
		if c > 0 || (c == 0 && !p.LargestIsExclusive()) {
			return false
		}
	}
	return true
}

// expandL0 grows a set of L0 files until no other L0 file overlaps its key
// range.
func expandL0(all, inputs []*manifest.FileMetadata) []*manifest.FileMetadata {
	for {
		s, l := keyRange(inputs)
		grown := 0
		var out []*manifest.FileMetadata
		for _, f := range all {
			if f.OverlapsUserRange(s, l) {
				out = append(out, f)
			}
		}
		grown = len(out)
		if grown == len(inputs) {
			return out
		}
		inputs = out
	}
}

// runCompaction executes c and installs its result. compactionMu is held.
func (d *DB) runCompaction(c *compaction) error {
	start := time.Now()
	d.log.Infof("compaction starting: %s", c)

	// Trivial move: nothing to merge with below, and the inputs do not
	// overlap one another (one file of a sorted level, or L0 files from a
	// sequential load): the files move down as they are.
	if len(c.inputs[1]) == 0 && !c.noMove && c.outputLevel > c.level && disjoint(c.inputs[0]) {
		e := &manifest.VersionEdit{}
		var nums []uint64
		for _, f := range c.inputs[0] {
			e.Deleted = append(e.Deleted, manifest.DeletedFile{Level: c.level, FileNum: f.FileNum})
			e.Added = append(e.Added, manifest.NewFile{Level: c.outputLevel, Meta: f})
			nums = append(nums, f.FileNum)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if err := d.vs.logAndApply(e); err != nil {
			d.setBackgroundErrorLocked(err, "compaction: MANIFEST update")
			return err
		}
		d.updateReadStateLocked()
		d.stats.compactions.Add(1)
		d.log.Infof("compaction moved %v from L%d to L%d", nums, c.level, c.outputLevel)
		d.stallCond.Broadcast()
		d.maybeScheduleCompactionLocked()
		return nil
	}

	d.mu.Lock()
	snaps := d.snapshots.seqs()
	v := d.vs.current
	v.Ref()
	d.mu.Unlock()
	defer v.Unref()

	outputs, stats, err := d.compactFiles(c, v, snaps)
	if err != nil {
		for _, m := range outputs {
			_ = d.fs.Remove(makeFilename(d.fs, d.dirname, fileTypeTable, m.FileNum))
		}
		d.mu.Lock()
		d.setBackgroundErrorLocked(err, "compaction "+c.String())
		d.mu.Unlock()
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
	if err := d.vs.logAndApply(e); err != nil {
		// Outputs stay: the edit may be durable despite the error (see
		// flushOne); orphans are deleted at the next Open.
		d.setBackgroundErrorLocked(err, "compaction: MANIFEST update")
		return err
	}
	d.updateReadStateLocked()
	dur := time.Since(start)
	d.stats.compactions.Add(1)
	d.stats.compactReadBytes.Add(int64(readBytes))
	d.stats.compactWriteBytes.Add(int64(writeBytes))
	d.stats.compactNanos.Add(int64(dur))
	d.log.Infof("compaction finished in %v: %s -> %d files at L%d; read %d entries / %d bytes, wrote %d entries / %d bytes, dropped %d",
		dur, c, len(outputs), c.outputLevel, stats.Read, readBytes, stats.Written, writeBytes, stats.Dropped)
	d.stallCond.Broadcast()
	d.maybeScheduleCompactionLocked()
	return nil
}

// compactFiles merges c's inputs into new tables at the output level:
// package compact decides what survives and where outputs split; this
// opens the inputs (bypassing the block cache), creates and finishes the
// tables, and checks every count.
func (d *DB) compactFiles(c *compaction, v *manifest.Version, snaps []uint64) (outputs []*manifest.FileMetadata, st compact.Stats, err error) {
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
	iter := compact.NewIter(newMergingIter(children), snaps, tombs, bottom, &st)

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
		return sst.NewWriter(f, d.sstWriterOptions(wNum)), nil
	}
	finish := func(w compact.Writer) (uint64, error) {
		sm, err := w.(*sst.Writer).Close()
		if err != nil {
			return 0, fmt.Errorf("finishing table %06d: %w", wNum, err)
		}
		outputs = append(outputs, metaFromSST(wNum, sm))
		return sm.NumEntries + sm.NumRangeDels, nil
	}
	out := compact.NewOutputs(uint64(d.opts.TargetFileSize), iter.Kept, open, finish, &st)
	defer func() {
		if w := out.Current(); w != nil {
			w.(*sst.Writer).Abort()
			_ = d.fs.Remove(makeFilename(d.fs, d.dirname, fileTypeTable, wNum))
		}
	}()
	for ok := iter.First(); ok; ok = iter.Next() {
		if err := out.Add(iter.Key(), iter.Value()); err != nil {
			return outputs, st, fmt.Errorf("compaction output %06d: %w", wNum, err)
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
	if err := d.dataDir.Sync(); err != nil {
		return outputs, st, fmt.Errorf("syncing directory after compaction outputs: %w", err)
	}
	for _, m := range outputs {
		if err := d.checkNewTable(m); err != nil {
			return outputs, st, fmt.Errorf("compaction output: %w", err)
		}
	}
	return outputs, st, nil
}
