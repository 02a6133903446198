package cache

import "github.com/vigildb/vigil/internal/base"

// table is a shard's index from key to entry: open addressing with linear
// probing over a power-of-two array of slots, each holding an entry and
// its key's hash, kept at most half full; a deletion shifts the slots
// after it back (no tombstones), so probes stay short however many blocks
// come and go.
//
// Why not a Go map: after a read phase's 600,000 inserts and deletes, the
// maps of a 64 MiB cache (15,000 blocks) took 1.7 MB of heap, 114 bytes a
// block, and the collector's pacing doubles what is live. A slot is 16
// bytes and a table at most half full, so 32 to 64 bytes a block; the
// stored hash settles nearly every probe of an absent key (most lookups
// on a DB larger than the cache) without reading an entry.
//
// Concurrency: none of its own; the shard's lock guards it (get under the
// read lock, the rest under the write lock).
//
// Invariant: every entry is in the probe run that starts at its hash's
// slot (hash & mask), with no empty slot between; n counts the entries,
// and 2*n <= len(slots) once slots is allocated.
type table struct {
	slots []slot
	n     int
}

type slot struct {
	h uint64 // hashKey(e.key)
	e *entry // nil: empty
}

// minTableSlots is a table's size when it first holds an entry.
const minTableSlots = 64

// hashKey mixes both halves of k (base.Fmix64 over them): the shard takes
// its top bits, the table its low bits. Blocks of one table spread over
// all shards, and so do equal offsets of different tables.
func hashKey(k key) uint64 { return base.Fmix64(k.id*0x9e3779b97f4a7c15 ^ k.offset) }

// get returns the entry of k (hash h), or nil.
func (t *table) get(h uint64, k key) *entry {
	if t.n == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.e == nil {
			return nil
		}
		if s.h == h && s.e.key == k {
			return s.e
		}
	}
}

// put makes e the entry of its key (hash h) and returns the entry it
// replaced, or nil.
func (t *table) put(h uint64, e *entry) *entry {
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.e == nil {
			*s = slot{h, e}
			t.n++
			return nil
		}
		if s.h == h && s.e.key == e.key {
			old := s.e
			s.e = e
			return old
		}
	}
}

// del removes the entry of k (hash h) and returns it, or nil.
func (t *table) del(h uint64, k key) *entry {
	if t.n == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for ; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.e == nil {
			return nil
		}
		if s.h == h && s.e.key == k {
			break
		}
	}
	e := t.slots[i].e
	// Shift back every later entry of the run that may sit in the hole:
	// one whose home slot is not cyclically in (hole, j].
	for j := (i + 1) & mask; t.slots[j].e != nil; j = (j + 1) & mask {
		home := t.slots[j].h & mask
		if (j-home)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = slot{}
	t.n--
	return e
}

// grow doubles the slots (or allocates the first ones) and reinserts.
func (t *table) grow() {
	old := t.slots
	t.slots = make([]slot, max(2*len(old), minTableSlots))
	mask := uint64(len(t.slots) - 1)
	for _, s := range old {
		if s.e == nil {
			continue
		}
		i := s.h & mask
		for t.slots[i].e != nil {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}
