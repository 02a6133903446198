package vigil

import (
	"fmt"
	"slices"
	"sort"

	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manifest"
)

// Compaction picking: what to compact next (the level with the highest
// score), what each step of a manual Compact of a key range compacts, and
// the trivial move that needs no merging. compaction.go runs what is
// picked here; nothing here touches the DB.

// compaction is one picked unit of work.
type compaction struct {
	level       int                         // input level
	outputLevel int                         // level+1; level itself for a manual bottom-level rewrite; deeper for settle's move
	inputs      [2][]*manifest.FileMetadata // [0] from level, [1] from outputLevel
	reason      string
	// noMove forbids the trivial move of a lone input (manual compactions
	// rewrite, to drop what they can).
	noMove bool
	// smallest, largest user keys of all inputs (largest inclusive).
	smallest, largest []byte
	// cmp is the order of the keys (the version's).
	cmp *base.Comparer
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

// compactionPolicy decides what to compact: the seam a new policy plugs
// into. The DB calls it under d.mu with the current version; it may keep
// state of its own between calls (round-robin pointers), and must not do
// I/O.
type compactionPolicy interface {
	// scores returns each level's compaction score (>= 1: due).
	scores(v *manifest.Version) [manifest.NumLevels]float64
	// pick returns the next background compaction, or nil.
	pick(v *manifest.Version) *compaction
	// manual returns the step of a manual compaction of [start, end] at
	// level, prevOutput being the previous step's output level (-1 for
	// none): the compaction to run, or nil to go on to the next level;
	// done once no level below holds data.
	manual(v *manifest.Version, level int, start, end []byte, prevOutput int) (c *compaction, done bool)
	// settle returns the step that ends a manual compaction, run after
	// the others (nil: none).
	settle(v *manifest.Version) *compaction
}

// pickerOptions are the options the leveled picker reads.
type pickerOptions struct {
	l0Trigger       int
	lbaseMaxBytes   int64
	levelMultiplier int
}

// leveledPicker is Vigil's policy, RocksDB's leveled compaction: L0 by
// file count, L1..L5 by size over a target that grows by LevelMultiplier
// per level; within a level the files are taken round-robin.
//
// Concurrency: not safe for concurrent use (the DB calls it under d.mu).
// Invariant: pointer[l] is nil or the largest user key of the last file
// picked from level l.
type leveledPicker struct {
	o       pickerOptions
	pointer [manifest.NumLevels][]byte
}

func newLeveledPicker(o *Options) *leveledPicker {
	return &leveledPicker{o: pickerOptions{l0Trigger: o.L0CompactionTrigger, lbaseMaxBytes: o.LBaseMaxBytes, levelMultiplier: o.LevelMultiplier}}
}

// levelMaxBytes is the target size of level (1..6).
func (p *leveledPicker) levelMaxBytes(level int) uint64 {
	m := uint64(p.o.lbaseMaxBytes)
	for l := 1; l < level; l++ {
		m *= uint64(p.o.levelMultiplier)
	}
	return m
}

// scores: for L0 the file count over the trigger, for L1..L5 the size over
// the target. L6 has none.
func (p *leveledPicker) scores(v *manifest.Version) [manifest.NumLevels]float64 {
	var s [manifest.NumLevels]float64
	s[0] = float64(len(v.Levels[0])) / float64(p.o.l0Trigger)
	for l := 1; l < manifest.NumLevels-1; l++ {
		s[l] = float64(v.LevelSize(l)) / float64(p.levelMaxBytes(l))
	}
	return s
}

// pick chooses the level with the highest score >= 1.
func (p *leveledPicker) pick(v *manifest.Version) *compaction {
	scores := p.scores(v)
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
		// A damaged file among them holds L0 back (writes stall at the
		// stop trigger) until it is repaired: compacting it would fail,
		// stopping the DB, or spread what it holds.
		return undamaged(newCompaction(v, 0, slices.Clone(v.Levels[0]), reason))
	}
	files := v.Levels[best]
	// Round-robin: the first file after the last compacted key whose
	// compaction reads no damaged file.
	i := 0
	if ptr := p.pointer[best]; ptr != nil {
		i = sort.Search(len(files), func(i int) bool { return v.Cmp.Cmp(files[i].Smallest.UserKey, ptr) > 0 })
		if i == len(files) {
			i = 0
		}
	}
	for range files {
		p.pointer[best] = slices.Clone(files[i].Largest.UserKey)
		if c := undamaged(newCompaction(v, best, []*manifest.FileMetadata{files[i]}, reason)); c != nil {
			return c
		}
		i = (i + 1) % len(files)
	}
	return nil
}

// seekCompaction is the compaction of f, at level, that its seeks call
// for (see seek_compaction.go): f with what overlaps it in the next level;
// for an L0 table, with every L0 table overlapping it too (expandL0), to
// keep newer over older. nil if an input is damaged.
func seekCompaction(v *manifest.Version, level int, f *manifest.FileMetadata) *compaction {
	inputs := []*manifest.FileMetadata{f}
	if level == 0 {
		inputs = expandL0(v.Cmp, v.Levels[0], inputs)
	}
	return undamaged(newCompaction(v, level, inputs, reasonSeeks))
}

// undamaged returns c, or nil if one of its inputs was found damaged (see
// scrub.go).
func undamaged(c *compaction) *compaction {
	for _, files := range c.inputs {
		for _, f := range files {
			if f.Damaged() {
				return nil
			}
		}
	}
	return c
}

// manual: every level's files overlapping the range go down to the
// deepest level that holds data, which is then rewritten in place
// (dropping versions no snapshot needs and tombstones with nothing below).
func (p *leveledPicker) manual(v *manifest.Version, level int, start, end []byte, prevOutput int) (*compaction, bool) {
	last := bottomLevel(v)
	if level > last && !(level == 1 && last == 0) {
		return nil, true
	}
	inputs := v.Overlaps(level, start, end)
	if len(inputs) == 0 {
		return nil, false
	}
	var c *compaction
	switch {
	case level == 0:
		// L0 files overlap one another: take all that overlap the
		// range's closure, to keep newer-over-older order.
		c = newCompaction(v, 0, expandL0(v.Cmp, v.Levels[0], inputs), "manual")
		c.noMove = true
	case level < last:
		c = newCompaction(v, level, inputs, "manual")
		c.noMove = true
	case prevOutput == level:
		// The previous step merged everything in range into this
		// bottom level already (see wholeBottom).
		return nil, false
	default:
		// The bottom level: rewrite it in place, which drops what no
		// snapshot needs and the tombstones.
		c = &compaction{level: level, outputLevel: level, reason: "manual, bottom level in place", noMove: true, cmp: v.Cmp}
		c.inputs[0] = inputs
		c.smallest, c.largest = keyRange(v.Cmp, inputs)
	}
	if c.outputLevel == last && c.level < last {
		wholeBottom(v, c, start, end)
	}
	return c, false
}

// bottomLevel is the deepest level holding data (0 if only L0 does, or
// none).
func bottomLevel(v *manifest.Version) int {
	for l := manifest.NumLevels - 1; l > 0; l-- {
		if len(v.Levels[l]) > 0 {
			return l
		}
	}
	return 0
}

// settle returns, after a manual compaction, the trivial move of the
// whole bottom level (the deepest holding data, in the compaction's range
// or not) to the shallowest level below it whose target holds it; nil if
// the bottom level is within its target, is the last level, or holds a
// damaged file. (Where Options.Levels gives the two levels different
// compression, the move runs as a rewrite: see DB.movable.)
//
// Why: a manual compaction writes the bottom level, which is L1 when all
// the data was in L0, and may leave it several times its target. The
// picker would then move its files down one at a time until the level is
// back under it, leaving the keys split between two levels that every
// scan merges entry by entry and every read probes. One MANIFEST edit
// leaves one sorted level where the data's size puts it instead, as
// RocksDB's dynamic level sizes and Pebble's base level do. The levels
// below the bottom are empty, so the move keeps newer above older.
func (p *leveledPicker) settle(v *manifest.Version) *compaction {
	last := bottomLevel(v)
	size := v.LevelSize(last)
	if last == 0 || last == manifest.NumLevels-1 || size <= p.levelMaxBytes(last) {
		return nil
	}
	out := last + 1
	for out < manifest.NumLevels-1 && size > p.levelMaxBytes(out) {
		out++
	}
	c := &compaction{level: last, outputLevel: out, reason: "manual, bottom level over its target", cmp: v.Cmp}
	c.inputs[0] = slices.Clone(v.Levels[last])
	c.smallest, c.largest = keyRange(v.Cmp, c.inputs[0])
	return undamaged(c)
}

// wholeBottom makes a manual step into the bottom level take every bottom
// file in [start, end], not only those under its inputs: the next step,
// seeing that this one wrote the bottom level, does not rewrite it in
// place, and a bottom file in range beside the inputs' keys would keep its
// tombstones and its old compression.
func wholeBottom(v *manifest.Version, c *compaction, start, end []byte) {
	lo, hi := c.smallest, c.largest
	if start == nil || v.Cmp.Cmp(start, lo) < 0 {
		lo = start
	}
	if end == nil || v.Cmp.Cmp(end, hi) > 0 {
		hi = end
	}
	c.takeOutputs(v, lo, hi)
}

// newCompaction adds to level's inputs the overlapping files of the next
// level.
func newCompaction(v *manifest.Version, level int, inputs []*manifest.FileMetadata, reason string) *compaction {
	c := &compaction{level: level, outputLevel: level + 1, reason: reason, cmp: v.Cmp}
	c.inputs[0] = inputs
	c.smallest, c.largest = keyRange(v.Cmp, inputs)
	c.takeOutputs(v, c.smallest, c.largest)
	return c
}

// takeOutputs makes the output level's files overlapping [lo, hi] (nil:
// unbounded) c's second inputs, and c's key range that of all its inputs.
func (c *compaction) takeOutputs(v *manifest.Version, lo, hi []byte) {
	c.inputs[1] = v.Overlaps(c.outputLevel, lo, hi)
	all := append(slices.Clone(c.inputs[0]), c.inputs[1]...)
	c.smallest, c.largest = keyRange(v.Cmp, all)
}

// keyRange returns the smallest and largest user keys of files under c.
func keyRange(c *base.Comparer, files []*manifest.FileMetadata) (smallest, largest []byte) {
	for i, f := range files {
		if i == 0 || c.Cmp(f.Smallest.UserKey, smallest) < 0 {
			smallest = f.Smallest.UserKey
		}
		if i == 0 || c.Cmp(f.Largest.UserKey, largest) > 0 {
			largest = f.Largest.UserKey
		}
	}
	return smallest, largest
}

// disjoint reports whether no two files' key ranges overlap under c.
func disjoint(c *base.Comparer, files []*manifest.FileMetadata) bool {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b *manifest.FileMetadata) int { return c.CompareInternal(a.Smallest, b.Smallest) })
	for i := 1; i < len(sorted); i++ {
		p, f := sorted[i-1], sorted[i]
		r := c.Cmp(p.Largest.UserKey, f.Smallest.UserKey)
		if r > 0 || (r == 0 && !p.LargestIsExclusive()) {
			return false
		}
	}
	return true
}

// expandL0 grows a set of L0 files until no other L0 file overlaps its key
// range.
func expandL0(c *base.Comparer, all, inputs []*manifest.FileMetadata) []*manifest.FileMetadata {
	for {
		s, l := keyRange(c, inputs)
		var out []*manifest.FileMetadata
		for _, f := range all {
			if f.OverlapsUserRange(c, s, l) {
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
	return len(c.inputs[1]) == 0 && !c.noMove && c.outputLevel > c.level && disjoint(c.cmp, c.inputs[0])
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
	if err := d.installCompactionLocked(c, e); err != nil {
		return err
	}
	for _, f := range c.inputs[0] {
		f.ResetSeeks() // its seeks now charge it at its new level
	}
	d.log.Infof("compaction moved %v from L%d to L%d", nums, c.level, c.outputLevel)
	d.emitCompaction(CompactionInfo{Level: c.level, OutputLevel: c.outputLevel, Reason: c.reason, Inputs: nums, Outputs: nums, TrivialMove: true})
	return nil
}
