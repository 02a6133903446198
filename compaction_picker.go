package vigil

import (
	"bytes"
	"fmt"
	"slices"
	"sort"

	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manifest"
)

// Compaction picking: what to compact next (the level with the highest
// score), what a manual Compact of a key range compacts, and the trivial
// move that needs no merging. compaction.go runs what is picked here.

// compaction is one picked unit of work.
type compaction struct {
	level       int                         // input level
	outputLevel int                         // level+1, or level itself for a manual bottom-level rewrite
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
		var out []*manifest.FileMetadata
		for _, f := range all {
			if f.OverlapsUserRange(s, l) {
				out = append(out, f)
			}
		}
		if len(out) == len(inputs) {
			return out
		}
		inputs = out
	}
}

// fileNums returns the numbers of c's input files.
func (c *compaction) fileNums() []uint64 {
	var nums []uint64
	for _, files := range c.inputs {
		for _, f := range files {
			nums = append(nums, f.FileNum)
		}
	}
	return nums
}

// trivialMove reports whether c can move its inputs down as they are:
// nothing to merge with below, and the inputs do not overlap one another
// (one file of a sorted level, or L0 files from a sequential load).
func (c *compaction) trivialMove() bool {
	return len(c.inputs[1]) == 0 && !c.noMove && c.outputLevel > c.level && disjoint(c.inputs[0])
}

// moveFiles installs a trivial move: one MANIFEST edit moves c's inputs to
// the output level. compactionMu is held.
func (d *DB) moveFiles(c *compaction) error {
	e := &manifest.VersionEdit{}
	var nums []uint64
	for _, f := range c.inputs[0] {
		e.Deleted = append(e.Deleted, manifest.DeletedFile{Level: c.level, FileNum: f.FileNum})
		e.Added = append(e.Added, manifest.NewFile{Level: c.outputLevel, Meta: f})
		nums = append(nums, f.FileNum)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.installCompactionLocked(e); err != nil {
		return err
	}
	d.log.Infof("compaction moved %v from L%d to L%d", nums, c.level, c.outputLevel)
	d.emitCompaction(CompactionInfo{Level: c.level, OutputLevel: c.outputLevel, Inputs: nums, Outputs: nums, TrivialMove: true})
	return nil
}
