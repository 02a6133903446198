package raftstore

import (
	"cmp"
	"slices"

	"github.com/hashicorp/raft"
	"github.com/vigildb/vigil"
)

// This file holds the writes that change stored chunks: a StoreLogs that
// is not a plain append (it overwrites stored indexes, or its indexes are
// not one ascending run), and the edges of a DeleteRange. Raft's own
// writes take these paths only when a follower's log conflicts with its
// leader's and at each log compaction, so they favour plainness over
// speed: they read what they cut and write it back.

// logRegion is the scratch of a StoreLogs that rewrites stored chunks: the
// entries of the region it touches, stored and new, in index order. It is
// guarded by Store.mu.
type logRegion struct {
	arena []byte // the entries' encodings
	fresh []regionEntry
	old   []regionEntry
	ents  []regionEntry // fresh and old merged
	sizes []int
	encs  [][]byte
}

// regionEntry is an entry whose encoding is arena[off:off+n].
type regionEntry struct {
	index  uint64
	off, n int
}

// rewrite adds to b what stores logs (any indexes, in any order; of two
// with one index the later wins) over the stored log: a range deletion of
// the region from the first chunk that holds one of the new indexes, or
// from the first new index, to the end of the last such chunk, then every
// entry of that region, stored or new, in chunks.
//
// Entries below floor are not kept.
func (r *logRegion) rewrite(s *Store, b *vigil.Batch, logs []*raft.Log, floor uint64) error {
	r.arena, r.fresh, r.old, r.ents = r.arena[:0], r.fresh[:0], r.old[:0], r.ents[:0]
	for _, l := range logs {
		off := len(r.arena)
		r.arena = AppendLog(r.arena, l)
		r.fresh = append(r.fresh, regionEntry{index: l.Index, off: off, n: len(r.arena) - off})
	}
	slices.SortStableFunc(r.fresh, func(a, b regionEntry) int { return cmp.Compare(a.index, b.index) })
	k := 0
	for i, e := range r.fresh {
		if i+1 < len(r.fresh) && r.fresh[i+1].index == e.index {
			continue // a later entry of the same index replaces it
		}
		r.fresh[k] = e
		k++
	}
	r.fresh = r.fresh[:k]
	lo, hi := r.fresh[0].index, r.fresh[len(r.fresh)-1].index

	regionLo, regionHi, err := r.readStored(s, lo, hi, floor)
	if err != nil {
		return err
	}
	if len(r.old) > 0 {
		b.DeleteRange(s.appendLogKey(nil, regionLo), s.appendLogKeyAfter(nil, regionHi))
	}
	r.merge()
	r.putRuns(s, b)
	return nil
}

// readStored copies into r.old every stored entry at or above floor of the
// chunks that hold an index in [lo, hi], and returns the region they and
// [lo, hi] span.
func (r *logRegion) readStored(s *Store, lo, hi, floor uint64) (regionLo, regionHi uint64, err error) {
	regionLo, regionHi = lo, hi
	err = s.withLogIter(func(it *vigil.Iterator) error {
		for ok := it.SeekGE(s.appendLogKey(nil, lo)); ok; ok = it.Next() {
			c, err := s.chunkAt(it)
			if err != nil {
				return err
			}
			if c.first > hi {
				break
			}
			regionLo, regionHi = min(regionLo, c.first), max(regionHi, c.last())
			c.each(max(c.first, floor), c.last(), func(index uint64, enc []byte) {
				off := len(r.arena)
				r.arena = append(r.arena, enc...)
				r.old = append(r.old, regionEntry{index: index, off: off, n: len(enc)})
			})
		}
		return it.Error()
	})
	return regionLo, regionHi, err
}

// merge sets r.ents to r.fresh and r.old merged by index, a fresh entry
// replacing an old one of the same index. Both are sorted and free of
// repeats.
func (r *logRegion) merge() {
	i, j := 0, 0
	for i < len(r.fresh) || j < len(r.old) {
		switch {
		case j == len(r.old) || (i < len(r.fresh) && r.fresh[i].index < r.old[j].index):
			r.ents = append(r.ents, r.fresh[i])
			i++
		case i == len(r.fresh) || r.old[j].index < r.fresh[i].index:
			r.ents = append(r.ents, r.old[j])
			j++
		default: // the same index
			r.ents = append(r.ents, r.fresh[i])
			i++
			j++
		}
	}
}

// putRuns adds to b the chunks of r.ents: one run of consecutive indexes
// after another, each split as chunkEnd says.
func (r *logRegion) putRuns(s *Store, b *vigil.Batch) {
	for k := 0; k < len(r.ents); {
		j := k + 1
		for j < len(r.ents) && r.ents[j].index == r.ents[j-1].index+1 {
			j++
		}
		r.putRun(s, b, r.ents[k:j])
		k = j
	}
}

func (r *logRegion) putRun(s *Store, b *vigil.Batch, run []regionEntry) {
	r.sizes = r.sizes[:0]
	for _, e := range run {
		r.sizes = append(r.sizes, e.n)
	}
	for k := 0; k < len(run); {
		j := chunkEnd(r.sizes, k)
		r.encs = r.encs[:0]
		for _, e := range run[k:j] {
			r.encs = append(r.encs, r.arena[e.off:e.off+e.n])
		}
		s.keyBuf = s.appendLogKey(s.keyBuf[:0], run[j-1].index)
		s.valBuf = appendRawChunk(s.valBuf[:0], r.encs, r.sizes[k:j])
		b.Put(s.keyBuf, s.valBuf)
		k = j
	}
}

// trimEdges adds to b what keeps, of a chunk that straddles from or to,
// its entries outside [from, to]: those below from (and at or above floor)
// under the key of from-1, those above to under the chunk's own key (the
// range deletion of [from, to], which the caller adds, removes the chunk's
// key if it lies there). Each part is a piece of a chunk, so it needs no
// split.
func (s *Store) trimEdges(b *vigil.Batch, from, to, floor uint64) error {
	return s.withLogIter(func(it *vigil.Iterator) error {
		return s.trimEdgesIn(it, b, from, to, floor)
	})
}

func (s *Store) trimEdgesIn(it *vigil.Iterator, b *vigil.Batch, from, to, floor uint64) error {
	c, ok, err := s.chunkFor(it, from)
	if err != nil || !ok {
		return err
	}
	if lo := max(c.first, floor); lo < from && c.last() >= from {
		s.putPart(b, &c, lo, from-1)
	}
	if c.last() <= to {
		if c, ok, err = s.chunkFor(it, to); err != nil || !ok {
			return err
		}
	}
	if c.first <= to && c.last() > to {
		s.putPart(b, &c, to+1, c.last())
	}
	return nil
}

// dropFloor adds to b what a write below the floor needs first: the
// visible part of the chunk that straddles the floor, written back, and
// the floor's deletion.
func (s *Store) dropFloor(b *vigil.Batch, floor uint64) error {
	return s.withLogIter(func(it *vigil.Iterator) error {
		c, ok, err := s.chunkFor(it, floor)
		if err != nil {
			return err
		}
		if ok && c.first < floor {
			s.putPart(b, &c, floor, c.last())
		}
		s.setFloor(b, 0)
		return nil
	})
}

// putPart adds to b the entries [lo, hi] of c as one chunk.
func (s *Store) putPart(b *vigil.Batch, c *chunk, lo, hi uint64) {
	encs, sizes := s.region.encs[:0], s.sizes[:0]
	c.each(lo, hi, func(_ uint64, enc []byte) {
		encs, sizes = append(encs, enc), append(sizes, len(enc))
	})
	s.region.encs, s.sizes = encs, sizes
	s.keyBuf = s.appendLogKey(s.keyBuf[:0], hi)
	s.valBuf = appendRawChunk(s.valBuf[:0], encs, sizes)
	b.Put(s.keyBuf, s.valBuf)
}
