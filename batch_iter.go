package vigil

import (
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/rangedel"
)

// batchOverlay is the iterator of an indexed batch (Batch.NewIter): the
// batch's own writes laid over an iterator of the DB (or snapshot), merged
// key by key in both directions. For a user key the batch holds, the
// batch decides: its newest entry, unless a later range deletion of the
// batch covers it. A key only the DB holds is live unless a range
// deletion of the batch covers it (every batch write is newer than the
// DB's). Results go into the Iterator that wraps it (valid, key, value,
// err).
//
// Invariants between calls: moving forward, the batch cursor bi is at the
// first (newest) entry of the smallest batch key not yet passed, and db at
// the smallest DB key not yet passed; the current key, if any, is the
// smaller of the two. Backward, the same with "largest". run and frags are
// the batch as it was when the iterator was made.
type batchOverlay struct {
	out   *Iterator
	db    *Iterator
	data  []byte
	run   []bxEntry
	frags rangedel.Fragments
	// lower and upper are the iterator's bounds (nil: none).
	lower, upper []byte
	bi           int
	forward      bool
	keyBuf       []byte
	// valBuf holds a merged value; spare is its partner while one is
	// combined (see Iterator.keepValue).
	valBuf, spare []byte
}

// NewIter returns an iterator over the indexed batch's writes laid over the
// DB's current state (or the batch's snapshot), within o's bounds. It sees
// the batch as it is now: later writes to the batch do not show. Close it
// before the batch is reset or applied. A batch not made by
// NewIndexedBatch is ErrInvalidArgument.
func (b *Batch) NewIter(o *IterOptions) (*Iterator, error) {
	x := b.ix
	if x == nil {
		return nil, base.InvalidArgumentErrorf("Batch.NewIter needs an indexed batch (DB.NewIndexedBatch)")
	}
	if o != nil && o.Prefix != nil {
		return nil, base.InvalidArgumentErrorf("Batch.NewIter does not take IterOptions.Prefix; use bounds")
	}
	var db *Iterator
	var err error
	if x.snap != nil {
		db, err = x.snap.NewIter(o)
	} else {
		db, err = x.db.NewIter(o)
	}
	if err != nil {
		return nil, err
	}
	db.deferMergeErr = true // the batch may hide a key whose operands fail
	x.merge(b.data)
	ov := &batchOverlay{db: db, data: b.data, run: x.sorted, frags: x.tombFragments(b.data), lower: db.lower, upper: db.upper}
	it := &Iterator{d: x.db, cmp: x.db.cmp, custom: customCompare(x.db.cmp), ov: ov, lower: db.lower, upper: db.upper}
	ov.out = it
	return it, nil
}

func (o *batchOverlay) key(i int) []byte { return bxKey(o.data, &o.run[i]) }

// bKey is the batch cursor's key, nil when it is past the run or outside
// the bounds in the iterator's direction.
func (o *batchOverlay) bKey() []byte {
	if o.bi < 0 || o.bi >= len(o.run) {
		return nil
	}
	k := o.key(o.bi)
	if o.forward && o.upper != nil && o.db.cmp.Cmp(k, o.upper) >= 0 {
		return nil
	}
	if !o.forward && o.lower != nil && o.db.cmp.Cmp(k, o.lower) < 0 {
		return nil
	}
	return k
}

// groupStart moves i back to the first (newest) entry of its key.
func (o *batchOverlay) groupStart(i int) int {
	for i > 0 && o.db.cmp.Eq(o.key(i-1), o.key(i)) {
		i--
	}
	return i
}

func (o *batchOverlay) bNextKey() {
	k := o.key(o.bi)
	for o.bi++; o.bi < len(o.run) && o.db.cmp.Eq(o.key(o.bi), k); o.bi++ {
	}
}

func (o *batchOverlay) bPrevKey() {
	if o.bi <= 0 {
		o.bi = -1
		return
	}
	o.bi = o.groupStart(o.bi - 1)
}

func (o *batchOverlay) bSeekGE(k []byte) { o.bi = seekSorted(o.db.cmp, o.data, o.run, k) }

func (o *batchOverlay) bSeekLT(k []byte) {
	if i := seekSorted(o.db.cmp, o.data, o.run, k) - 1; i >= 0 {
		o.bi = o.groupStart(i)
	} else {
		o.bi = -1
	}
}

// bValue returns the value of the key at the batch cursor, as the batch
// leaves it: live is false if its newest entry is a Delete or a later
// range deletion of the batch covers it. A merge operand is combined with
// the batch's older entries of the key and, if none ends the chain and no
// range deletion of the batch covers the key, with the DB's value, which
// is the DB cursor's when dbSame (it is at the same key) and none
// otherwise.
func (o *batchOverlay) bValue(dbSame bool) (v []byte, live bool, err error) {
	e := &o.run[o.bi]
	key := bxKey(o.data, e)
	cover := o.frags.CoverSeq(key)
	if uint64(e.idx)+1 <= cover || e.kind == base.KindDelete {
		return nil, false, nil
	}
	if e.kind == base.KindSet {
		return bxVal(o.data, e), true, nil
	}
	m := o.out.d.opts.Merger
	if m == nil {
		return nil, false, errNoMerger(key)
	}
	o.valBuf = append(o.valBuf[:0], bxVal(o.data, e)...)
	for i := o.bi + 1; ; i++ {
		var below []byte
		operand := false
		if i < len(o.run) && o.db.cmp.Eq(o.key(i), key) {
			if f := &o.run[i]; uint64(f.idx)+1 > cover && f.kind != base.KindDelete {
				below, operand = base.NonNil(bxVal(o.data, f)), f.kind == base.KindMerge
			}
		} else if cover == 0 && dbSame {
			if o.db.mergeErr != nil {
				return nil, false, o.db.mergeErr
			}
			below = base.NonNil(o.db.Value())
		}
		res, err := m.Merge(key, base.Clip(below), base.Clip(base.NonNil(o.valBuf)))
		if err != nil {
			return nil, false, mergeFailed(key, err)
		}
		o.spare = append(o.spare[:0], res...)
		o.valBuf, o.spare = o.spare, o.valBuf
		if !operand {
			return o.valBuf, true, nil
		}
	}
}

// emitBatch makes the key at the batch cursor current if the batch leaves
// it live (see bValue); done is false when it does not.
func (o *batchOverlay) emitBatch(bk []byte, dbSame bool) (ok, done bool) {
	v, live, err := o.bValue(dbSame)
	if err != nil {
		o.out.valid, o.out.err = false, err
		return false, true
	}
	if !live {
		return false, false
	}
	return o.emit(bk, v), true
}

func (o *batchOverlay) emit(k, v []byte) bool {
	o.out.key, o.out.value, o.out.valid = k, v, true
	return true
}

// emitDB makes the DB cursor's key current, with its value, or fails with
// the error of its operands' merge (see Iterator.deferMergeErr).
func (o *batchOverlay) emitDB() bool {
	if err := o.db.mergeErr; err != nil {
		o.out.valid, o.out.err = false, err
		return false
	}
	return o.emit(o.db.Key(), o.db.Value())
}

func (o *batchOverlay) end() bool {
	o.out.valid = false
	o.out.err = o.db.Error()
	return false
}

// findNext makes the smaller of the two cursors' keys current, stepping
// over keys the batch deletes.
func (o *batchOverlay) findNext() bool {
	for {
		bk := o.bKey()
		dv := o.db.Valid()
		if (bk == nil && !dv) || (!dv && o.db.Error() != nil) {
			return o.end() // exhausted, or the DB side failed: stop there
		}
		c := -1
		switch {
		case bk == nil:
			c = 1
		case dv:
			c = o.db.cmp.Cmp(bk, o.db.Key())
		}
		if c > 0 {
			if dk := o.db.Key(); o.frags.CoverSeq(dk) > 0 {
				o.db.Next()
				continue
			}
			return o.emitDB()
		}
		if ok, done := o.emitBatch(bk, c == 0); done {
			return ok
		}
		if c == 0 {
			o.db.Next()
		}
		o.bNextKey()
	}
}

// findPrev is findNext backwards: the larger key is current.
func (o *batchOverlay) findPrev() bool {
	for {
		bk := o.bKey()
		dv := o.db.Valid()
		if (bk == nil && !dv) || (!dv && o.db.Error() != nil) {
			return o.end()
		}
		c := 1
		switch {
		case bk == nil:
			c = -1
		case dv:
			c = o.db.cmp.Cmp(bk, o.db.Key())
		}
		if c < 0 {
			if dk := o.db.Key(); o.frags.CoverSeq(dk) > 0 {
				o.db.Prev()
				continue
			}
			return o.emitDB()
		}
		if ok, done := o.emitBatch(bk, c == 0); done {
			return ok
		}
		if c == 0 {
			o.db.Prev()
		}
		o.bPrevKey()
	}
}

func (o *batchOverlay) first() bool {
	o.forward = true
	o.db.First()
	o.bi = 0
	if o.lower != nil {
		o.bSeekGE(o.lower)
	}
	return o.findNext()
}

func (o *batchOverlay) last() bool {
	o.forward = false
	o.db.Last()
	if o.upper != nil {
		o.bSeekLT(o.upper)
	} else if len(o.run) > 0 {
		o.bi = o.groupStart(len(o.run) - 1)
	} else {
		o.bi = -1
	}
	return o.findPrev()
}

// seekGE is called with key already clamped to the bounds.
func (o *batchOverlay) seekGE(key []byte) bool {
	o.forward = true
	o.db.SeekGE(key)
	o.bSeekGE(key)
	return o.findNext()
}

func (o *batchOverlay) seekLT(key []byte) bool {
	o.forward = false
	o.db.SeekLT(key)
	o.bSeekLT(key)
	return o.findPrev()
}

// saveCur copies the current key: moving a cursor may overwrite it.
func (o *batchOverlay) saveCur() []byte {
	o.keyBuf = append(o.keyBuf[:0], o.out.key...)
	return o.keyBuf
}

func (o *batchOverlay) next() bool {
	cur := o.saveCur()
	if !o.forward {
		// Turn around: both cursors to the first key after cur.
		o.forward = true
		o.db.SeekGE(cur)
		if o.db.Valid() && o.db.cmp.Eq(o.db.Key(), cur) {
			o.db.Next()
		}
		o.bSeekGE(cur)
		if o.bi < len(o.run) && o.db.cmp.Eq(o.key(o.bi), cur) {
			o.bNextKey()
		}
		return o.findNext()
	}
	if o.bi >= 0 && o.bi < len(o.run) && o.db.cmp.Eq(o.key(o.bi), cur) {
		o.bNextKey()
	}
	if o.db.Valid() && o.db.cmp.Eq(o.db.Key(), cur) {
		o.db.Next()
	}
	return o.findNext()
}

func (o *batchOverlay) prev() bool {
	cur := o.saveCur()
	if o.forward {
		o.forward = false
		o.db.SeekLT(cur)
		o.bSeekLT(cur)
		return o.findPrev()
	}
	if o.bi >= 0 && o.bi < len(o.run) && o.db.cmp.Eq(o.key(o.bi), cur) {
		o.bPrevKey()
	}
	if o.db.Valid() && o.db.cmp.Eq(o.db.Key(), cur) {
		o.db.Prev()
	}
	return o.findPrev()
}
