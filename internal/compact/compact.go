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
// Merges. A merge operand at the head of its stripe (the newest version
// of its key there) is not simply kept: the older versions of the same
// stripe, which no reader can see apart from it, are merged into it,
// newest first (the operator is associative). Another operand extends the
// chain; a Set, a deletion or a version under a range tombstone of the
// stripe ends it, and the chain is written as a Set of the merged value.
// A chain the stripe does not end stays an operand, unless the key has
// nothing older anywhere (no older stripe in the input, nothing below the
// output): then it is merged into nothing and written as a Set. A merge
// that fails writes the chain so far and starts a new one, so operands are
// never lost; the read that needs them reports the error.
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
// which writes a memtable's entries in that order, use it alike. With a
// merge function it also combines merge operands (see Merges in the
// package comment).
//
// Concurrency: a Filter belongs to one goroutine.
type Filter struct {
	cmp     *base.Comparer
	snaps   []uint64
	settled uint64
	stacks  []rangedel.Stack
	// at is the first of stacks ending after the last key covered was
	// asked about: keys come in ascending order (see covered).
	at     int
	bottom func(start, end []byte) bool
	merge  MergeFunc

	prevKey    []byte
	havePrev   bool
	prevStripe int
	dropped    uint64

	// The pending merge chain: the newest operand of prevKey in
	// prevStripe with the older operands of that stripe merged into it,
	// held until the entry after it shows whether the chain ends. Emitted
	// chains alternate between two buffers each for key and value, so
	// that what emit received stays valid until the next Add or Finish.
	pend        bool
	pendTrailer uint64
	pendKey     [2][]byte
	pendVal     [2][]byte
	pendBuf     int
}

// MergeFunc is a merge operator's combining function (vigil.Merger.Merge):
// existing is the older operand or value (nil: none), operand the newer.
type MergeFunc func(key, existing, operand []byte) ([]byte, error)

// NewFilter makes the filter for keys in c's order (resolved; nil: the
// default), snaps, the live snapshots' seqnums
// ascending, and tombs, every range tombstone of the input; bottom(start,
// end) reports whether no data for [start, end] lies below the output (nil:
// never); merge combines merge operands (nil: operands are kept as they
// are). Versions above settled may not be visible to every reader yet (a
// batch applied but not published): each of them is a stripe of its own,
// so none is dropped and no tombstone above settled covers anything. It
// returns the range tombstones to write, in key order, and the number of
// tombstone pieces it dropped.
func NewFilter(c *base.Comparer, snaps []uint64, settled uint64, tombs []rangedel.Tombstone, bottom func(start, end []byte) bool, merge MergeFunc) (f *Filter, kept []rangedel.Tombstone, dropped uint64) {
	if bottom == nil {
		bottom = func(start, end []byte) bool { return false }
	}
	if c == nil {
		c = base.DefaultComparer
	}
	f = &Filter{cmp: c, snaps: snaps, settled: settled, bottom: bottom, merge: merge, stacks: rangedel.Stacks(c, tombs)}
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

// Dropped returns the number of point entries the filter left out or
// merged into another.
func (f *Filter) Dropped() uint64 { return f.dropped }

// Add takes k, the next entry in merged order, with its value v, and
// passes what survives to emit, in order: k itself, unless a newer
// version of its key in the same stripe shadows it, a range tombstone of
// its stripe covers it, or it is a deletion every reader sees with
// nothing left to delete below; or, for merge operands, the chain they
// combine into (emitted once the entry after it shows where it ends). The
// slices emit receives stay valid until the next Add or Finish. An error
// is emit's.
func (f *Filter) Add(k base.InternalKey, v []byte, emit func(base.InternalKey, []byte) error) error {
	s := f.stripe(k.SeqNum())
	sameKey := f.havePrev && f.cmp.Eq(k.UserKey, f.prevKey)
	if f.pend {
		if sameKey && s == f.prevStripe {
			return f.absorb(k, v, s, emit)
		}
		if err := f.endChain(!sameKey, emit); err != nil {
			return err
		}
	}
	if sameKey {
		if s == f.prevStripe {
			f.dropped++ // shadowed by a newer version the same snapshots see
			return nil
		}
	} else {
		f.prevKey = append(f.prevKey[:0], k.UserKey...)
		f.havePrev = true
	}
	return f.head(k, v, s, emit)
}

// covered reports whether a range tombstone of its snapshot stripe
// deletes the version (key, seq): rangedel.CoveredInStripe, with a cursor
// for its binary search, since Add takes keys in ascending order. Why: a
// flush of a raft log's memtable looks up some 180k keys among a few
// dozen stacks, and the search's compares were a fifth of its time.
// The cursor only moves forward, to the first stack ending after key, so a
// key below an earlier one (which Add's order rules out) is judged by that
// stack alone: it may be kept where an earlier stack covers it, and is
// never left out where none does.
func (f *Filter) covered(key []byte, seq uint64) bool {
	for f.at < len(f.stacks) && f.cmp.Cmp(f.stacks[f.at].End, key) <= 0 {
		f.at++
	}
	if f.at == len(f.stacks) || f.cmp.Cmp(f.stacks[f.at].Start, key) > 0 {
		return false
	}
	return f.stacks[f.at].CoversInStripe(seq, f.stripe)
}

// head handles k, the newest version of its key in stripe s.
func (f *Filter) head(k base.InternalKey, v []byte, s int, emit func(base.InternalKey, []byte) error) error {
	f.prevStripe = s
	switch {
	case f.covered(k.UserKey, k.SeqNum()):
		f.dropped++
		return nil
	case k.Kind() == base.KindDelete && s == 0 && f.bottom(k.UserKey, k.UserKey):
		f.dropped++
		return nil
	case k.Kind() == base.KindMerge && f.merge != nil:
		b := f.pendBuf
		f.pendKey[b] = append(f.pendKey[b][:0], k.UserKey...)
		f.pendVal[b] = append(f.pendVal[b][:0], v...)
		f.pend, f.pendTrailer = true, k.Trailer
		return nil
	}
	return emit(k, v)
}

// absorb merges k, an older version in the pending chain's stripe, into
// the chain: an operand extends it; a Set, a deletion or a version under
// a range tombstone of the stripe ends it, as a Set of the merged value
// (nothing older in the stripe is visible to anyone). If the merge
// fails, the chain goes out as it is and k as the head of a new one.
func (f *Filter) absorb(k base.InternalKey, v []byte, s int, emit func(base.InternalKey, []byte) error) error {
	var below []byte
	operand := false
	if !f.covered(k.UserKey, k.SeqNum()) && k.Kind() != base.KindDelete {
		below, operand = base.NonNil(v), k.Kind() == base.KindMerge
	}
	if !f.mergeInto(below) {
		if err := f.emitPending(emit); err != nil {
			return err
		}
		return f.head(k, v, s, emit)
	}
	f.dropped++
	if operand {
		return nil
	}
	f.pendTrailer = base.MakeTrailer(base.TrailerSeqNum(f.pendTrailer), base.KindSet)
	return f.emitPending(emit)
}

// endChain emits the pending chain, which no older version in its stripe
// continues. If the key has no older version at all (nextKey: the next
// entry is another key's) and nothing of it lies below the output, the
// chain is complete: it is merged into nothing and written as a Set.
func (f *Filter) endChain(nextKey bool, emit func(base.InternalKey, []byte) error) error {
	b := f.pendBuf
	if nextKey && f.bottom(f.pendKey[b], f.pendKey[b]) && f.mergeInto(nil) {
		f.pendTrailer = base.MakeTrailer(base.TrailerSeqNum(f.pendTrailer), base.KindSet)
	}
	return f.emitPending(emit)
}

// mergeInto merges the pending chain into below (the older version's
// value, nil for none), reporting whether the merge succeeded.
func (f *Filter) mergeInto(below []byte) bool {
	b := f.pendBuf
	res, err := f.merge(f.pendKey[b], base.Clip(below), base.Clip(base.NonNil(f.pendVal[b])))
	if err != nil {
		return false
	}
	o := 1 - b // res may alias pendVal[b]: copy it to the other buffer
	f.pendVal[o] = append(f.pendVal[o][:0], res...)
	f.pendKey[o] = append(f.pendKey[o][:0], f.pendKey[b]...)
	f.pendBuf = o
	return true
}

// emitPending writes the pending chain and leaves its buffers to emit's
// receiver until the next Add or Finish.
func (f *Filter) emitPending(emit func(base.InternalKey, []byte) error) error {
	b := f.pendBuf
	f.pend, f.pendBuf = false, 1-b
	return emit(base.InternalKey{UserKey: f.pendKey[b], Trailer: f.pendTrailer}, f.pendVal[b])
}

// Finish emits the pending chain, if any, after the last entry.
func (f *Filter) Finish(emit func(base.InternalKey, []byte) error) error {
	if !f.pend {
		return nil
	}
	return f.endChain(true, emit)
}

// Iter yields the entries of a compaction's merged input that survive.
type Iter struct {
	in     base.InternalIterator
	filter *Filter
	// Kept are the range tombstones to write, in key order.
	Kept        []rangedel.Tombstone
	stats       *Stats
	baseDropped uint64
	finished    bool
	q           [2]qEntry // what the filter emitted for the last entry fed
	qn, qi      int
}

type qEntry struct {
	k base.InternalKey
	v []byte
}

// NewIter filters in, the merged input iterator of a compaction, whose keys
// are in c's order (see NewFilter). snaps are
// the live snapshots' seqnums, ascending; settled the seqnum every reader
// sees (see NewFilter); tombs every range tombstone of the inputs;
// bottom(start, end) reports whether no data for [start, end] lies below
// the output level; merge combines merge operands (nil: none are).
// Counts go to stats.
func NewIter(c *base.Comparer, in base.InternalIterator, snaps []uint64, settled uint64, tombs []rangedel.Tombstone, bottom func(start, end []byte) bool, merge MergeFunc, stats *Stats) *Iter {
	it := &Iter{in: in, stats: stats}
	var dropped uint64
	it.filter, it.Kept, dropped = NewFilter(c, snaps, settled, tombs, bottom, merge)
	stats.Dropped += dropped
	it.baseDropped = stats.Dropped
	return it
}

// First positions at the first surviving entry.
func (it *Iter) First() bool {
	it.finished = false
	return it.fill(it.in.First())
}

// Next moves to the next surviving entry.
func (it *Iter) Next() bool {
	if it.qi+1 < it.qn {
		it.qi++
		return true
	}
	return it.fill(it.in.Next())
}

// Key and Value return the current entry; valid until the next move.
func (it *Iter) Key() base.InternalKey { return it.q[it.qi].k }

// Value returns the current entry's value.
func (it *Iter) Value() []byte { return it.q[it.qi].v }

// Error returns the input's error.
func (it *Iter) Error() error { return it.in.Error() }

func (it *Iter) push(k base.InternalKey, v []byte) error {
	it.q[it.qn] = qEntry{k, v}
	it.qn++
	return nil
}

// fill feeds the filter from the input's position until it emits
// something, then at the end of the input finishes it.
func (it *Iter) fill(ok bool) bool {
	it.qn, it.qi = 0, 0
	for ; ok && it.qn == 0; ok = it.qn == 0 && it.in.Next() {
		it.stats.Read++
		_ = it.filter.Add(it.in.Key(), it.in.Value(), it.push) // push never fails
	}
	if it.qn == 0 && !it.finished && it.in.Error() == nil {
		it.finished = true
		_ = it.filter.Finish(it.push)
	}
	it.stats.Dropped = it.baseDropped + it.filter.Dropped()
	return it.qn > 0
}

// Writer is an output table being written.
type Writer interface {
	Add(k base.InternalKey, v []byte) error
	AddRangeDel(start, end []byte, seq uint64) error
	EstimatedSize() uint64
}

// Outputs cuts a compaction's surviving entries into output tables.
type Outputs struct {
	cmp    *base.Comparer
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
// tombstones clipped to each table's range, keys in c's order (resolved;
// nil: the default). open and finish do the I/O.
func NewOutputs(c *base.Comparer, target uint64, kept []rangedel.Tombstone, open func() (Writer, error), finish func(Writer) (uint64, error), stats *Stats) *Outputs {
	if c == nil {
		c = base.DefaultComparer
	}
	return &Outputs{cmp: c, target: target, clip: rangedel.NewClipper(c, kept), open: open, finish: finish, stats: stats}
}

// Add writes one surviving entry, finishing the current output first if it
// is full and k starts a new user key.
func (o *Outputs) Add(k base.InternalKey, v []byte) error {
	if o.cur != nil && o.cur.EstimatedSize() >= o.target && !o.cmp.Eq(k.UserKey, o.lastKey) {
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
