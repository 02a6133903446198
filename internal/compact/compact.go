// Package compact holds the policy of one compaction, apart from its I/O:
// which entries of the merged inputs survive (Iter) and how the survivors
// are cut into output tables (Outputs). The DB opens the inputs, merges
// them, and supplies the table writers; this package decides.
//
// What survives. Snapshots cut the sequence numbers into stripes: stripe 0
// holds the seqnums at or below the oldest snapshot (every reader sees
// them), stripe i those above the i-th snapshot and at or below the next,
// and the last stripe those above every snapshot. Within a stripe only the
// newest version of each user key survives, since no reader can tell the
// older ones apart from it; a point under a range tombstone of its own
// stripe is dropped; and at the bottom (no older data for the key below the
// output level) a deletion of stripe 0 is dropped: every reader sees it and
// it has nothing left to delete. Range tombstones go through rangedel.Elide: the newest per stripe
// over each piece, none of stripe 0 at the bottom.
//
// How outputs are cut. An output table is finished once its estimated size
// reaches the target, but never between two versions of one user key, so
// each user key lives in exactly one table per level. Each output receives
// the kept tombstones clipped to its own key range, and the number of
// entries each table reports must equal the number given to it.
//
// Concurrency: an Iter or Outputs belongs to one goroutine.
package compact

import (
	"bytes"
	"fmt"
	"slices"
	"sort"

	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/rangedel"
)

// Stats counts what a compaction read and dropped.
type Stats struct {
	// Read is the point entries read from the inputs.
	Read uint64
	// Dropped is the point entries and tombstone pieces not written.
	Dropped uint64
	// Written is the entries (points and tombstones) given to outputs.
	Written uint64
}

// Filter decides which point entries survive, given in merged order (user
// key ascending, seqnum descending): a compaction's Iter, and a flush,
// which writes a memtable's entries in that order, use it alike.
//
// Concurrency: a Filter belongs to one goroutine.
type Filter struct {
	snaps   []uint64
	settled uint64
	stacks  []rangedel.Stack
	bottom  func(start, end []byte) bool

	prevKey    []byte
	havePrev   bool
	prevStripe int
}

// NewFilter makes the filter for snaps, the live snapshots' seqnums
// ascending, and tombs, every range tombstone of the input; bottom(start,
// end) reports whether no data for [start, end] lies below the output (nil:
// never). Versions above settled may not be visible to every reader yet (a
// batch applied but not published): each of them is a stripe of its own,
// so none is dropped and no tombstone above settled covers anything. It
// returns the range tombstones to write, in key order, and the number of
// tombstone pieces it dropped.
func NewFilter(snaps []uint64, settled uint64, tombs []rangedel.Tombstone, bottom func(start, end []byte) bool) (f *Filter, kept []rangedel.Tombstone, dropped uint64) {
	if bottom == nil {
		bottom = func(start, end []byte) bool { return false }
	}
	f = &Filter{snaps: snaps, settled: settled, bottom: bottom, stacks: rangedel.Stacks(tombs)}
	kept, dropped = rangedel.Elide(f.stacks, f.stripe, bottom)
	return f, kept, dropped
}

// stripe returns the snapshot stripe of seq.
func (f *Filter) stripe(seq uint64) int {
	if seq > f.settled {
		return len(f.snaps) + 1 + int(seq-f.settled) // its own
	}
	return sort.Search(len(f.snaps), func(i int) bool { return seq <= f.snaps[i] })
}

// Drop reports whether the entry k, the next in merged order, can be left
// out: a newer version of its key in the same stripe shadows it, a range
// tombstone of its stripe covers it, or it is a deletion every reader sees
// with nothing left to delete below.
func (f *Filter) Drop(k base.InternalKey) bool {
	s := f.stripe(k.SeqNum())
	if f.havePrev && bytes.Equal(k.UserKey, f.prevKey) {
		if s == f.prevStripe {
			return true // shadowed by a newer version the same snapshots see
		}
	} else {
		f.prevKey = append(f.prevKey[:0], k.UserKey...)
		f.havePrev = true
	}
	f.prevStripe = s
	if rangedel.CoveredInStripe(f.stacks, k.UserKey, k.SeqNum(), f.stripe) {
		return true
	}
	return k.Kind() == base.KindDelete && s == 0 && f.bottom(k.UserKey, k.UserKey)
}

// Iter yields the entries of a compaction's merged input that survive.
type Iter struct {
	in     base.InternalIterator
	filter *Filter
	// Kept are the range tombstones to write, in key order.
	Kept  []rangedel.Tombstone
	stats *Stats
}

// NewIter filters in, the merged input iterator of a compaction. snaps are
// the live snapshots' seqnums, ascending; settled the seqnum every reader
// sees (see NewFilter); tombs every range tombstone of the inputs;
// bottom(start, end) reports whether no data for [start, end] lies below
// the output level. Counts go to stats.
func NewIter(in base.InternalIterator, snaps []uint64, settled uint64, tombs []rangedel.Tombstone, bottom func(start, end []byte) bool, stats *Stats) *Iter {
	it := &Iter{in: in, stats: stats}
	var dropped uint64
	it.filter, it.Kept, dropped = NewFilter(snaps, settled, tombs, bottom)
	stats.Dropped += dropped
	return it
}

// First positions at the first surviving entry.
func (it *Iter) First() bool { return it.skip(it.in.First()) }

// Next moves to the next surviving entry.
func (it *Iter) Next() bool { return it.skip(it.in.Next()) }

// Key and Value return the current entry; valid until the next move.
func (it *Iter) Key() base.InternalKey { return it.in.Key() }

// Value returns the current entry's value.
func (it *Iter) Value() []byte { return it.in.Value() }

// Error returns the input's error.
func (it *Iter) Error() error { return it.in.Error() }

// skip moves forward from the input's position to the first entry that
// survives.
func (it *Iter) skip(ok bool) bool {
	for ; ok; ok = it.in.Next() {
		it.stats.Read++
		if it.filter.Drop(it.in.Key()) {
			it.stats.Dropped++
			continue
		}
		return true
	}
	return false
}

// Writer is an output table being written.
type Writer interface {
	Add(k base.InternalKey, v []byte) error
	AddRangeDel(start, end []byte, seq uint64) error
	EstimatedSize() uint64
}

// Outputs cuts a compaction's surviving entries into output tables.
type Outputs struct {
	target uint64
	clip   *rangedel.Clipper
	// open starts the next output table; finish completes it and returns
	// the number of entries (points and tombstones) the table holds.
	open   func() (Writer, error)
	finish func(Writer) (uint64, error)
	stats  *Stats

	cur       Writer
	fileStart []byte // first user key of the current output; nil for the first
	lastKey   []byte
	written   uint64 // entries given to the current output
	clipped   []rangedel.Tombstone
}

// NewOutputs returns Outputs of about target bytes each, writing the kept
// tombstones clipped to each table's range. open and finish do the I/O.
func NewOutputs(target uint64, kept []rangedel.Tombstone, open func() (Writer, error), finish func(Writer) (uint64, error), stats *Stats) *Outputs {
	return &Outputs{target: target, clip: rangedel.NewClipper(kept), open: open, finish: finish, stats: stats}
}

// Add writes one surviving entry, finishing the current output first if it
// is full and k starts a new user key.
func (o *Outputs) Add(k base.InternalKey, v []byte) error {
	if o.cur != nil && o.cur.EstimatedSize() >= o.target && !bytes.Equal(k.UserKey, o.lastKey) {
		split := slices.Clone(k.UserKey)
		if err := o.finishCurrent(split); err != nil {
			return err
		}
		o.fileStart = split
	}
	if o.cur == nil {
		w, err := o.open()
		if err != nil {
			return err
		}
		o.cur, o.written = w, 0
	}
	if err := o.cur.Add(k, v); err != nil {
		return err
	}
	o.written++
	o.lastKey = append(o.lastKey[:0], k.UserKey...)
	return nil
}

// Finish completes the last output, opening one if tombstones remain that
// no output took yet.
func (o *Outputs) Finish() error {
	if o.cur == nil && o.clip.Pending() {
		w, err := o.open()
		if err != nil {
			return err
		}
		o.cur, o.written = w, 0
	}
	if o.cur != nil {
		return o.finishCurrent(nil)
	}
	return nil
}

// Current returns the output being written, or nil.
func (o *Outputs) Current() Writer { return o.cur }

// finishCurrent adds the tombstones within [fileStart, end) and completes
// the current output, checking its entry count.
func (o *Outputs) finishCurrent(end []byte) error {
	o.clipped = o.clip.Clip(o.clipped[:0], o.fileStart, end)
	for _, t := range o.clipped {
		if err := o.cur.AddRangeDel(t.Start, t.End, t.Seq); err != nil {
			return err
		}
		o.written++
	}
	w := o.cur
	o.cur = nil
	got, err := o.finish(w)
	if err != nil {
		return err
	}
	if got != o.written {
		return base.CorruptionErrorf("compaction output holds %d entries, %d were written", got, o.written)
	}
	o.stats.Written += o.written
	return nil
}

// CheckRead verifies that the compaction read every point entry its inputs'
// properties count: fewer means an input iterator skipped entries.
func CheckRead(stats *Stats, expect uint64) error {
	if stats.Read != expect {
		return base.CorruptionErrorf("compaction read %d point entries from inputs whose properties count %d", stats.Read, expect)
	}
	return nil
}

// String renders the stats for the LOG.
func (s Stats) String() string {
	return fmt.Sprintf("read %d, wrote %d, dropped %d", s.Read, s.Written, s.Dropped)
}
