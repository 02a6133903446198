package vigil

import (
	"bytes"
	"sort"

	"github.com/vigildb/vigil/internal/base"
)

// Range tombstones at read time: the plain pass over a list of them
// (raiseCover), their fragmented form (fragments), a source's prebuilt
// fragments with the snapshots they can answer for (tombIndex), and an
// iterator's view over all its sources (tombSources, tombSet).

// raiseCover returns the larger of cover and the largest seq of a tombstone
// in ts that is visible at snap and covers key.
func raiseCover(ts []base.RangeTombstone, key []byte, snap uint64, cover uint64) uint64 {
	for _, t := range ts {
		if t.Seq <= snap && t.Seq > cover && string(t.Start) <= string(key) && string(key) < string(t.End) {
			cover = t.Seq
		}
	}
	return cover
}

// fragments are range tombstones cut at every start and end into
// non-overlapping pieces, each with the largest sequence number covering it,
// so that "is this version deleted?" is one binary search.
type fragments struct {
	starts []([]byte)
	ends   [][]byte
	seqs   []uint64
}

// tombBounds returns the distinct starts and ends, sorted, of the
// non-empty tombstones in ts visible at snap: the cut points of their
// fragments.
func tombBounds(ts []base.RangeTombstone, snap uint64) [][]byte {
	var bounds [][]byte
	for _, t := range ts {
		if t.Seq > snap || bytes.Compare(t.Start, t.End) >= 0 {
			continue
		}
		bounds = append(bounds, t.Start, t.End)
	}
	if len(bounds) == 0 {
		return nil
	}
	sort.Slice(bounds, func(i, j int) bool { return bytes.Compare(bounds[i], bounds[j]) < 0 })
	uniq := bounds[:1]
	for _, b := range bounds[1:] {
		if !bytes.Equal(b, uniq[len(uniq)-1]) {
			uniq = append(uniq, b)
		}
	}
	return uniq
}

// buildFragments fragments the tombstones visible at snap.
func buildFragments(ts []base.RangeTombstone, snap uint64) fragments {
	var f fragments
	if len(ts) == 0 {
		return f
	}
	uniq := tombBounds(ts, snap)
	if len(uniq) == 0 {
		return f
	}
	seqs := make([]uint64, len(uniq)-1)
	for _, t := range ts {
		if t.Seq > snap || bytes.Compare(t.Start, t.End) >= 0 {
			continue
		}
		i := sort.Search(len(uniq), func(i int) bool { return bytes.Compare(uniq[i], t.Start) >= 0 })
		for ; i < len(seqs) && bytes.Compare(uniq[i], t.End) < 0; i++ {
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
		if n := len(f.seqs); n > 0 && f.seqs[n-1] == s && bytes.Equal(f.ends[n-1], uniq[i]) {
			f.ends[n-1] = uniq[i+1]
			continue
		}
		f.starts = append(f.starts, uniq[i])
		f.ends = append(f.ends, uniq[i+1])
		f.seqs = append(f.seqs, s)
	}
	return f
}

// coverSeq returns the seq of the fragment covering key, or 0 if none does.
func (f *fragments) coverSeq(key []byte) uint64 {
	// The last fragment starting at or before key.
	i := sort.Search(len(f.starts), func(i int) bool { return bytes.Compare(f.starts[i], key) > 0 }) - 1
	if i >= 0 && bytes.Compare(key, f.ends[i]) < 0 {
		return f.seqs[i]
	}
	return 0
}

// covers reports whether a tombstone deletes the version (key, seq).
func (f *fragments) covers(key []byte, seq uint64) bool {
	return seq < f.coverSeq(key)
}

// tombIndex is a source's tombstones (a memtable's or a table's)
// fragmented once, all of them. Fragments keep only the largest seq over
// each piece, so they answer for a snapshot at or above maxSeq, the newest
// tombstone; older snapshots take the plain pass over the source's list.
// Immutable once built.
type tombIndex struct {
	frags  fragments
	maxSeq uint64
}

func newTombIndex(ts []base.RangeTombstone) tombIndex {
	var x tombIndex
	for _, t := range ts {
		x.maxSeq = max(x.maxSeq, t.Seq)
	}
	x.frags = buildFragments(ts, base.SeqNumMax)
	return x
}

// raise is raiseCover over ts, the tombstones x was built from: one binary
// search when snap sees all of them. A nil x is no index: the plain pass.
func (x *tombIndex) raise(ts []base.RangeTombstone, key []byte, snap, cover uint64) uint64 {
	if x != nil && snap >= x.maxSeq {
		return max(cover, x.frags.coverSeq(key))
	}
	return raiseCover(ts, key, snap, cover)
}

// tombSet answers "is this version deleted?" for an iterator: one or more
// fragment lists, each holding every tombstone of its sources that the
// iterator's snapshot sees. A version is deleted if any list covers it.
type tombSet struct {
	parts []*fragments
}

func (s *tombSet) covers(key []byte, seq uint64) bool {
	for _, f := range s.parts {
		if f.covers(key, seq) {
			return true
		}
	}
	return false
}

// maxTombParts bounds the fragment lists an iterator checks per step; with
// more sources than this their tombstones are merged into one list.
const maxTombParts = 4

// tombSources collects an iterator's range tombstones source by source
// (memtables, tables). A source whose tombIndex answers for the snapshot
// is used as it is, which saves re-fragmenting thousands of tombstones for
// every new iterator; the rest are fragmented together, once.
type tombSources struct {
	raw      [][]base.RangeTombstone // every source's tombstones
	prebuilt []*fragments            // the source's fragments if they answer for snap, else nil
	nPre     int                     // non-nil entries of prebuilt
}

// add records one source: its tombstones, and its index (nil if none).
func (t *tombSources) add(ts []base.RangeTombstone, x *tombIndex, snap uint64) {
	if len(ts) == 0 {
		return
	}
	t.raw = append(t.raw, ts)
	var f *fragments
	if x != nil && snap >= x.maxSeq {
		f = &x.frags
		t.nPre++
	}
	t.prebuilt = append(t.prebuilt, f)
}

// set returns the tombSet for snap.
func (t *tombSources) set(snap uint64) tombSet {
	nRest := len(t.raw) - t.nPre
	parts := t.nPre + min(nRest, 1)
	if parts == 0 {
		return tombSet{}
	}
	var s tombSet
	var rest []base.RangeTombstone
	for i, ts := range t.raw {
		switch {
		case parts > maxTombParts:
			rest = append(rest, ts...) // merge every source
		case t.prebuilt[i] != nil:
			s.parts = append(s.parts, t.prebuilt[i])
		default:
			rest = append(rest, ts...)
		}
	}
	if len(rest) > 0 {
		f := buildFragments(rest, snap)
		s.parts = append(s.parts, &f)
	}
	return s
}
