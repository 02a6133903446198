// Package rangedel holds every piece of range-tombstone logic Vigil has, in
// one vocabulary: a Tombstone deletes the keys of [Start, End) whose
// sequence numbers are below its own; Fragments are tombstones cut at every
// start and end into non-overlapping pieces; a Stack is one such piece with
// every tombstone seqnum over it.
//
// Reads use Fragments (a binary search answers "is this version deleted?"),
// an Index per source (a memtable's or a table's tombstones fragmented once),
// a Cache for a memtable's growing set, and Sources/Set for an iterator's
// view over all its sources. Compactions use Stacks: Elide keeps the newest
// tombstone of each snapshot stripe (none at the bottom), CoveredInStripe
// tells which points they drop, and Clip cuts the kept pieces to each
// output table's bounds.
//
// Concurrency: Fragments, Index, Set and Stacks are immutable once built
// and safe to share. A Cache is safe for concurrent use. Sources belongs to
// one goroutine.
package rangedel

import (
	"cmp"
	"slices"
	"sort"

	"github.com/vigildb/vigil/internal/base"
)

// Tombstone is a range tombstone: [Start, End)#Seq.
type Tombstone = base.RangeTombstone

// Every function and type here orders keys by a *base.Comparer, resolved
// (see base.Comparer.Resolve); nil means base.DefaultComparer. Fragments
// keep theirs, so that what is built under one order is searched under it.

// orDefault returns c, or the default comparer for nil.
func orDefault(c *base.Comparer) *base.Comparer {
	if c == nil {
		return base.DefaultComparer
	}
	return c
}

// RaiseCover returns the larger of cover and the largest seq of a tombstone
// in ts that is visible at snap and covers key: the plain pass over a list.
func RaiseCover(c *base.Comparer, ts []Tombstone, key []byte, snap uint64, cover uint64) uint64 {
	c = orDefault(c)
	for _, t := range ts {
		if t.Seq <= snap && t.Seq > cover && c.Cmp(t.Start, key) <= 0 && c.Cmp(key, t.End) < 0 {
			cover = t.Seq
		}
	}
	return cover
}

// Fragments are range tombstones cut at every start and end into
// non-overlapping pieces, each with the largest sequence number covering it,
// so that "is this version deleted?" is one binary search.
type Fragments struct {
	cmp    *base.Comparer // the order they were built in
	starts [][]byte
	ends   [][]byte
	seqs   []uint64
}

// Len returns the number of fragments.
func (f *Fragments) Len() int { return len(f.starts) }

// At returns fragment i: [start, end) covered up to seq.
func (f *Fragments) At(i int) (start, end []byte, seq uint64) {
	return f.starts[i], f.ends[i], f.seqs[i]
}

// bounds returns the distinct starts and ends, sorted, of the non-empty
// tombstones in ts visible at snap: the cut points of their fragments.
func bounds(c *base.Comparer, ts []Tombstone, snap uint64) [][]byte {
	var b [][]byte
	for _, t := range ts {
		if t.Seq > snap || c.Cmp(t.Start, t.End) >= 0 {
			continue
		}
		b = append(b, t.Start, t.End)
	}
	if len(b) == 0 {
		return nil
	}
	slices.SortFunc(b, c.Cmp)
	uniq := b[:1]
	for _, x := range b[1:] {
		if !c.Eq(x, uniq[len(uniq)-1]) {
			uniq = append(uniq, x)
		}
	}
	return uniq
}

// Build fragments the tombstones of ts visible at snap. Empty and inverted
// tombstones delete nothing and are ignored.
func Build(c *base.Comparer, ts []Tombstone, snap uint64) Fragments {
	c = orDefault(c)
	f := Fragments{cmp: c}
	uniq := bounds(c, ts, snap)
	if len(uniq) == 0 {
		return f
	}
	seqs := make([]uint64, len(uniq)-1)
	for _, t := range ts {
		if t.Seq > snap || c.Cmp(t.Start, t.End) >= 0 {
			continue
		}
		i := sort.Search(len(uniq), func(i int) bool { return c.Cmp(uniq[i], t.Start) >= 0 })
		for ; i < len(seqs) && c.Cmp(uniq[i], t.End) < 0; i++ {
			if t.Seq > seqs[i] {
				seqs[i] = t.Seq
			}
		}
	}
	for i, s := range seqs {
		if s == 0 {
			continue
		}
		// Merge with the previous fragment when contiguous and equal.
		if n := len(f.seqs); n > 0 && f.seqs[n-1] == s && c.Eq(f.ends[n-1], uniq[i]) {
			f.ends[n-1] = uniq[i+1]
			continue
		}
		f.starts = append(f.starts, uniq[i])
		f.ends = append(f.ends, uniq[i+1])
		f.seqs = append(f.seqs, s)
	}
	return f
}

// CoverSeq returns the seq of the fragment covering key, or 0 if none does.
func (f *Fragments) CoverSeq(key []byte) uint64 {
	// The last fragment starting at or before key.
	if len(f.starts) == 0 {
		return 0
	}
	c := f.cmp
	i := sort.Search(len(f.starts), func(i int) bool { return c.Cmp(f.starts[i], key) > 0 }) - 1
	if i >= 0 && c.Cmp(key, f.ends[i]) < 0 {
		return f.seqs[i]
	}
	return 0
}

// Covers reports whether a tombstone deletes the version (key, seq).
func (f *Fragments) Covers(key []byte, seq uint64) bool {
	return seq < f.CoverSeq(key)
}

// Index is a source's tombstones (a memtable's or a table's) fragmented
// once, all of them. Fragments keep only the largest seq over each piece,
// so they answer for a snapshot at or above MaxSeq, the newest tombstone;
// older snapshots take the plain pass over the source's list. Immutable
// once built.
type Index struct {
	Frags  Fragments
	MaxSeq uint64
}

// NewIndex fragments every tombstone of ts under c.
func NewIndex(c *base.Comparer, ts []Tombstone) Index {
	var x Index
	for _, t := range ts {
		x.MaxSeq = max(x.MaxSeq, t.Seq)
	}
	x.Frags = Build(c, ts, base.SeqNumMax)
	return x
}

// Raise is RaiseCover over ts, the tombstones x was built from (under c):
// one binary search when snap sees all of them. A nil x is no index: the
// plain pass.
func (x *Index) Raise(c *base.Comparer, ts []Tombstone, key []byte, snap, cover uint64) uint64 {
	if x != nil && snap >= x.MaxSeq {
		return max(cover, x.Frags.CoverSeq(key))
	}
	return RaiseCover(c, ts, key, snap, cover)
}

// Set answers "is this version deleted?" for an iterator: one or more
// fragment lists, each holding every tombstone of its sources that the
// iterator's snapshot sees. A version is deleted if any list covers it.
type Set struct {
	parts []*Fragments
}

// Covers reports whether a tombstone of the set deletes (key, seq).
func (s *Set) Covers(key []byte, seq uint64) bool {
	for _, f := range s.parts {
		if f.Covers(key, seq) {
			return true
		}
	}
	return false
}

// MaxSeqIn returns the largest seqnum of a tombstone of the set that
// overlaps [lo, hi) (nil bounds: unbounded), 0 if none does: whether a
// range was deleted after a given seqnum (a transaction's validation).
func (s *Set) MaxSeqIn(lo, hi []byte) uint64 {
	var m uint64
	for _, f := range s.parts {
		c := f.cmp
		for i := range f.starts {
			if (hi == nil || c.Cmp(f.starts[i], hi) < 0) && (lo == nil || c.Cmp(f.ends[i], lo) > 0) {
				m = max(m, f.seqs[i])
			}
		}
	}
	return m
}

// maxSetParts bounds the fragment lists an iterator checks per step; with
// more sources than this their tombstones are merged into one list.
const maxSetParts = 4

// Sources collects an iterator's range tombstones source by source
// (memtables, tables). A source whose Index answers for the snapshot is
// used as it is, which saves re-fragmenting thousands of tombstones for
// every new iterator; the rest are fragmented together, once.
type Sources struct {
	// Cmp is the order of the sources' keys (nil: the default). Set it
	// before Set.
	Cmp      *base.Comparer
	raw      [][]Tombstone // every source's tombstones
	prebuilt []*Fragments  // the source's fragments if they answer for snap, else nil
	nPre     int           // non-nil entries of prebuilt
}

// Add records one source: its tombstones, and its index (nil if none).
func (t *Sources) Add(ts []Tombstone, x *Index, snap uint64) {
	if len(ts) == 0 {
		return
	}
	t.raw = append(t.raw, ts)
	var f *Fragments
	if x != nil && snap >= x.MaxSeq {
		f = &x.Frags
		t.nPre++
	}
	t.prebuilt = append(t.prebuilt, f)
}

// Set returns the Set for snap.
func (t *Sources) Set(snap uint64) Set {
	nRest := len(t.raw) - t.nPre
	parts := t.nPre + min(nRest, 1)
	if parts == 0 {
		return Set{}
	}
	var s Set
	var rest []Tombstone
	for i, ts := range t.raw {
		switch {
		case parts > maxSetParts:
			rest = append(rest, ts...) // merge every source
		case t.prebuilt[i] != nil:
			s.parts = append(s.parts, t.prebuilt[i])
		default:
			rest = append(rest, ts...)
		}
	}
	if len(rest) > 0 {
		f := Build(t.Cmp, rest, snap)
		s.parts = append(s.parts, &f)
	}
	return s
}

// Stack is a piece of the key space, [Start, End), with the seqnum of every
// tombstone covering it, descending.
type Stack struct {
	Start, End []byte
	Seqs       []uint64
}

// Stacks cuts tombstones at every boundary, keeping every seqnum per piece:
// a compaction must keep one tombstone per snapshot stripe, not only the
// newest. Pieces with no tombstone are left out; the result is sorted and
// non-overlapping.
func Stacks(c *base.Comparer, ts []Tombstone) []Stack {
	c = orDefault(c)
	uniq := bounds(c, ts, base.SeqNumMax)
	if len(uniq) == 0 {
		return nil
	}
	stacks := make([]Stack, len(uniq)-1)
	for i := range stacks {
		stacks[i].Start, stacks[i].End = uniq[i], uniq[i+1]
	}
	for _, t := range ts {
		if c.Cmp(t.Start, t.End) >= 0 {
			continue
		}
		i := sort.Search(len(uniq), func(i int) bool { return c.Cmp(uniq[i], t.Start) >= 0 })
		for ; i < len(stacks) && c.Cmp(stacks[i].Start, t.End) < 0; i++ {
			stacks[i].Seqs = append(stacks[i].Seqs, t.Seq)
		}
	}
	out := stacks[:0]
	for _, s := range stacks {
		if len(s.Seqs) == 0 {
			continue
		}
		slices.SortFunc(s.Seqs, func(a, b uint64) int { return cmp.Compare(b, a) }) // descending
		s.Seqs = slices.Compact(s.Seqs)
		out = append(out, s)
	}
	return out
}

// Elide decides which tombstones a compaction writes: per stack, the newest
// of each snapshot stripe (stripe maps a seqnum to its stripe; stripe 0
// holds the seqnums every snapshot sees, at or below the oldest), and none
// of stripe 0 where bottom says no older data for the piece lies below the
// output. It
// returns the kept tombstones in key order and the number dropped.
func Elide(stacks []Stack, stripe func(seq uint64) int, bottom func(start, end []byte) bool) (kept []Tombstone, dropped uint64) {
	for _, s := range stacks {
		last := -1
		for _, seq := range s.Seqs { // descending
			st := stripe(seq)
			if st == last {
				dropped++
				continue
			}
			last = st
			if st == 0 && bottom(s.Start, s.End) {
				dropped++
				continue
			}
			kept = append(kept, Tombstone{Start: s.Start, End: s.End, Seq: seq})
		}
	}
	return kept, dropped
}

// CoveredInStripe reports whether a tombstone of stacks in the same
// snapshot stripe as seq deletes the version (key, seq): such a point no
// snapshot can see, and a compaction drops it.
func CoveredInStripe(c *base.Comparer, stacks []Stack, key []byte, seq uint64, stripe func(uint64) int) bool {
	c = orDefault(c)
	i := sort.Search(len(stacks), func(i int) bool { return c.Cmp(stacks[i].Start, key) > 0 }) - 1
	if i < 0 || c.Cmp(key, stacks[i].End) >= 0 {
		return false
	}
	return stacks[i].CoversInStripe(seq, stripe)
}

// CoversInStripe reports whether a tombstone of st in the same snapshot
// stripe as seq is newer than seq: a version at seq of a key within st's
// bounds is deleted for every snapshot that sees it.
func (st *Stack) CoversInStripe(seq uint64, stripe func(uint64) int) bool {
	s := stripe(seq)
	for _, t := range st.Seqs {
		if t > seq && stripe(t) == s {
			return true
		}
	}
	return false
}

// Clipper hands out kept tombstones (sorted by start, non-overlapping
// pieces) clipped to successive output tables' bounds, as a compaction
// splits its output: Clip(start, end) returns the pieces within
// [start, end) and forgets those that end at or before end.
type Clipper struct {
	cmp  *base.Comparer
	kept []Tombstone
	next int
}

// NewClipper returns a Clipper over kept, in c's order.
func NewClipper(c *base.Comparer, kept []Tombstone) *Clipper {
	return &Clipper{cmp: orDefault(c), kept: kept}
}

// Pending reports whether tombstones remain for later outputs.
func (c *Clipper) Pending() bool { return c.next < len(c.kept) }

// Clip appends to dst the remaining tombstones clipped to [start, end)
// (nil start or end: unbounded) and returns it.
func (c *Clipper) Clip(dst []Tombstone, start, end []byte) []Tombstone {
	k := c.cmp
	for i := c.next; i < len(c.kept); i++ {
		t := c.kept[i]
		if end != nil && k.Cmp(t.Start, end) >= 0 {
			break
		}
		s, e := t.Start, t.End
		if start != nil && k.Cmp(s, start) < 0 {
			s = start
		}
		if end != nil && k.Cmp(e, end) > 0 {
			e = end
		}
		if k.Cmp(s, e) < 0 {
			dst = append(dst, Tombstone{Start: s, End: e, Seq: t.Seq})
		}
	}
	// Pieces ending at or before end are done.
	for c.next < len(c.kept) && (end == nil || k.Cmp(c.kept[c.next].End, end) <= 0) {
		c.next++
	}
	return dst
}
