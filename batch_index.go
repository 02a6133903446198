package vigil

import (
	"bytes"
	"errors"
	"slices"

	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/rangedel"
)

// Indexed batches: a batch that can read its own writes.
//
// DB.NewIndexedBatch (and Snapshot.NewIndexedBatch) return a Batch whose
// Get and NewIter see the batch's own writes laid over the DB: over its
// current state at each read, or over the snapshot. Pebble's indexed batch
// and RocksDB's WriteBatchWithIndex are the models. The batch is applied
// like any batch (DB.Apply); the index changes nothing in its encoding.
//
// The index keeps, per point entry, where its key and value lie in the
// batch's buffer (offsets, since the buffer moves as it grows), in two
// runs: a sorted one (user key ascending, newer entries first) and an
// unsorted tail of the entries added since it was last sorted. A Get
// binary-searches the sorted run and scans the tail; the tail is merged
// into a new sorted run when it outgrows a fraction of the run (so adds
// cost O(log n) amortised), and always before an iterator takes the run.
// A merge makes a new slice: an iterator keeps reading the run it took,
// which no later add changes. Range deletions are kept in the order added;
// within the batch a later one deletes earlier entries, and every one
// deletes whatever the DB holds under it.
//
// Concurrency: as for any Batch, one goroutine at a time. Iterators over
// the batch see it as it was when they were made; Reset or Apply of the
// batch while one is open leaves that iterator reading reused bytes:
// close them first.

// bxEntry is one point entry of an indexed batch: its record index (its
// order in the batch), kind, and where its key and value are in the
// batch's buffer.
type bxEntry struct {
	keyOff, keyLen uint32
	valOff, valLen uint32
	idx            uint32
	kind           base.Kind
}

// bxTomb is one range deletion of an indexed batch: [start, end) as
// offsets into the buffer, and its record index.
type bxTomb struct {
	startOff, startLen uint32
	endOff, endLen     uint32
	idx                uint32
}

// batchIndex is an indexed batch's index and what it reads under it.
type batchIndex struct {
	db *DB
	// snap is the snapshot the batch reads under, nil for the DB's
	// current state.
	snap *Snapshot
	// sorted is ordered by user key, then idx descending; tail holds the
	// entries added since, in order.
	sorted, tail []bxEntry
	tombs        []bxTomb
}

// tailFraction: the tail is merged once it holds more than
// len(sorted)/tailFraction entries (and more than minTail).
const (
	tailFraction = 8
	minTail      = 32
)

func (x *batchIndex) reset() {
	x.sorted, x.tail, x.tombs = nil, x.tail[:0], x.tombs[:0]
}

// add indexes the record just appended to data at recStart (kind byte,
// key, value) as record idx.
func (x *batchIndex) add(data []byte, kind base.Kind, keyOff, keyLen, valOff, valLen int, idx uint32) {
	if kind == base.KindRangeDelete {
		x.tombs = append(x.tombs, bxTomb{uint32(keyOff), uint32(keyLen), uint32(valOff), uint32(valLen), idx})
		return
	}
	x.tail = append(x.tail, bxEntry{uint32(keyOff), uint32(keyLen), uint32(valOff), uint32(valLen), idx, kind})
	if len(x.tail) > minTail && len(x.tail) > len(x.sorted)/tailFraction {
		x.merge(data)
	}
}

func bxKey(data []byte, e *bxEntry) []byte { return data[e.keyOff : e.keyOff+e.keyLen] }
func bxVal(data []byte, e *bxEntry) []byte { return data[e.valOff : e.valOff+e.valLen] }

// bxCompare orders entries by user key under cmp, then newest (largest
// idx) first.
func bxCompare(cmp *base.Comparer, data []byte, a, b *bxEntry) int {
	if c := cmp.Cmp(bxKey(data, a), bxKey(data, b)); c != 0 {
		return c
	}
	return int(b.idx) - int(a.idx)
}

// merge sorts the tail into a new sorted run.
func (x *batchIndex) merge(data []byte) {
	if len(x.tail) == 0 {
		return
	}
	cmp := x.db.cmp
	slices.SortFunc(x.tail, func(a, b bxEntry) int { return bxCompare(cmp, data, &a, &b) })
	out := make([]bxEntry, 0, len(x.sorted)+len(x.tail))
	i, j := 0, 0
	for i < len(x.sorted) && j < len(x.tail) {
		if bxCompare(cmp, data, &x.sorted[i], &x.tail[j]) < 0 {
			out = append(out, x.sorted[i])
			i++
		} else {
			out = append(out, x.tail[j])
			j++
		}
	}
	out = append(append(out, x.sorted[i:]...), x.tail[j:]...)
	x.sorted, x.tail = out, x.tail[:0]
}

// seekSorted returns the index of the first entry of run with user key >=
// key under cmp.
func seekSorted(cmp *base.Comparer, data []byte, run []bxEntry, key []byte) int {
	i, _ := slices.BinarySearchFunc(run, key, func(e bxEntry, k []byte) int {
		if c := cmp.Cmp(bxKey(data, &e), k); c != 0 {
			return c
		}
		return 1 // the first entry of the key, whatever its idx
	})
	return i
}

// newest returns the newest point entry of key in the batch, if any.
func (x *batchIndex) newest(data []byte, key []byte) (bxEntry, bool) {
	var best bxEntry
	found := false
	cmp := x.db.cmp
	if i := seekSorted(cmp, data, x.sorted, key); i < len(x.sorted) && cmp.Eq(bxKey(data, &x.sorted[i]), key) {
		best, found = x.sorted[i], true
	}
	for i := range x.tail {
		e := &x.tail[i]
		if (!found || e.idx > best.idx) && cmp.Eq(bxKey(data, e), key) {
			best, found = *e, true
		}
	}
	return best, found
}

// tombCover returns 1 + the largest record index of a range deletion of
// the batch covering key, or 0 if none does.
func (x *batchIndex) tombCover(data []byte, key []byte) uint32 {
	var cover uint32
	cmp := x.db.cmp
	for i := range x.tombs {
		t := &x.tombs[i]
		if t.idx+1 > cover && cmp.Cmp(key, data[t.startOff:t.startOff+t.startLen]) >= 0 &&
			cmp.Cmp(key, data[t.endOff:t.endOff+t.endLen]) < 0 {
			cover = t.idx + 1
		}
	}
	return cover
}

// tombFragments returns the batch's range deletions as fragments whose
// seqnums are record index + 1, for iterators.
func (x *batchIndex) tombFragments(data []byte) rangedel.Fragments {
	if len(x.tombs) == 0 {
		return rangedel.Fragments{}
	}
	ts := make([]rangedel.Tombstone, len(x.tombs))
	for i, t := range x.tombs {
		ts[i] = rangedel.Tombstone{Start: data[t.startOff : t.startOff+t.startLen], End: data[t.endOff : t.endOff+t.endLen], Seq: uint64(t.idx) + 1}
	}
	return rangedel.Build(x.db.cmp, ts, base.SeqNumMax)
}

// NewIndexedBatch returns an empty batch that can read its own writes
// (Get, NewIter) laid over the DB's current state at each read. It is
// applied like any batch.
func (d *DB) NewIndexedBatch() *Batch {
	b := d.NewBatch()
	b.ix = &batchIndex{db: d}
	return b
}

// NewIndexedBatch returns an empty batch that reads its own writes laid
// over the snapshot (see DB.NewIndexedBatch). The snapshot must stay open
// while the batch reads.
func (s *Snapshot) NewIndexedBatch() *Batch {
	b := s.d.NewIndexedBatch()
	b.ix.snap = s
	return b
}

// Indexed reports whether the batch reads its own writes (made by
// NewIndexedBatch).
func (b *Batch) Indexed() bool { return b.ix != nil }

// Get returns the value of key as the indexed batch would leave it: the
// batch's newest write of key, unless a later range deletion of the batch
// covers it; else, unless a range deletion of the batch covers key, the
// DB's (or the snapshot's) value. Merge operands of the batch are combined
// with what lies below them, in the batch or in the DB. ErrNotFound if
// absent. The value is a copy. A batch not made by NewIndexedBatch is
// ErrInvalidArgument.
func (b *Batch) Get(key []byte) ([]byte, error) {
	x := b.ix
	if x == nil {
		return nil, base.InvalidArgumentErrorf("Batch.Get needs an indexed batch (DB.NewIndexedBatch)")
	}
	v, st, err := x.get(b.data, key)
	if st == batchDecided {
		return v, err
	}
	var below []byte
	if x.snap != nil {
		below, err = x.snap.Get(key)
	} else {
		below, err = x.db.Get(key)
	}
	if st == batchUndecided {
		return below, err
	}
	return x.mergeOnto(key, below, err, v)
}

// batchGet says what an indexed batch itself decides of a key.
type batchGet uint8

const (
	// batchUndecided: the batch holds nothing of the key; the DB decides.
	batchUndecided batchGet = iota
	// batchDecided: the batch's writes decide the key's value.
	batchDecided
	// batchMergeBelow: the batch's merge operands of the key, combined,
	// go onto the DB's value (mergeOnto).
	batchMergeBelow
)

// get is what the batch itself says of key: undecided when it holds
// nothing of it (its newest write, or a range deletion over it); decided,
// with the value (a copy) or ErrNotFound; or merge-below, with the batch's
// operands of key combined into one, which mergeOnto merges onto the DB's
// value.
func (x *batchIndex) get(data, key []byte) (v []byte, st batchGet, err error) {
	e, found := x.newest(data, key)
	cover := x.tombCover(data, key)
	switch {
	case found && e.idx+1 > cover:
		switch e.kind {
		case base.KindSet:
			return bytes.Clone(bxVal(data, &e)), batchDecided, nil
		case base.KindDelete:
			return nil, batchDecided, ErrNotFound
		}
		return x.mergeChain(data, key, cover)
	case cover > 0:
		return nil, batchDecided, ErrNotFound
	}
	return nil, batchUndecided, nil
}

// mergeChain combines the batch's versions of key, whose newest is a
// merge operand, down to the first that ends the chain (a Set, a Delete,
// or one under the batch's range deletion cover) or, if none does and no
// range deletion of the batch covers key, into one operand for the DB's
// value below.
func (x *batchIndex) mergeChain(data, key []byte, cover uint32) ([]byte, batchGet, error) {
	m := x.db.opts.Merger
	if m == nil {
		return nil, batchDecided, errNoMerger(key)
	}
	x.merge(data)
	i := seekSorted(x.db.cmp, data, x.sorted, key)
	acc := bytes.Clone(base.NonNil(bxVal(data, &x.sorted[i])))
	for i++; ; i++ {
		var below []byte
		operand := false
		if i < len(x.sorted) && x.db.cmp.Eq(bxKey(data, &x.sorted[i]), key) {
			if e := &x.sorted[i]; e.idx+1 > cover && e.kind != base.KindDelete {
				below, operand = base.NonNil(bxVal(data, e)), e.kind == base.KindMerge
			}
		} else if cover == 0 {
			return acc, batchMergeBelow, nil // the DB's value is below
		}
		res, err := m.Merge(key, base.Clip(below), base.Clip(acc))
		if err != nil {
			return nil, batchDecided, mergeFailed(key, err)
		}
		acc = bytes.Clone(base.NonNil(res))
		if !operand {
			return acc, batchDecided, nil
		}
	}
}

// mergeOnto merges the batch's combined operand of key onto the DB's
// answer for it (value and error).
func (x *batchIndex) mergeOnto(key, below []byte, err error, operand []byte) ([]byte, error) {
	switch {
	case errors.Is(err, ErrNotFound):
		below = nil
	case err != nil:
		return nil, err
	default:
		below = base.NonNil(below)
	}
	res, err := x.db.opts.Merger.Merge(key, base.Clip(below), base.Clip(operand))
	if err != nil {
		return nil, mergeFailed(key, err)
	}
	return bytes.Clone(base.NonNil(res)), nil
}
