package vigil

import (
	"bytes"
	"fmt"

	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/internal/rangedel"
	"github.com/vigildb/vigil/memtable"
	"github.com/vigildb/vigil/sst"
)

// Iterator walks the live keys of a DB (or of a Snapshot) in order, in both
// directions, within optional bounds. It sees the DB as of its creation:
// later writes are invisible.
//
// Under it a merging iterator combines every memtable and every table that
// may hold keys in the bounds; the Iterator hides versions newer than its
// sequence number, older versions shadowed by newer ones, deletions and
// keys under range tombstones. With ParanoidMemoryChecks it also checks that
// the user keys it returns are strictly increasing going forward (and
// decreasing going backward): the comparison that tells "same key, skip it"
// from "next key" answers "in order?" too, so the check costs nothing extra.
//
// Key and Value return slices that stay valid until the next positioning
// call (First, Last, SeekGE, SeekLT, Next, Prev) or Close; copy them to keep
// them. An Iterator is not safe for concurrent use; Close it when done, or
// it pins memtables and files.
type Iterator struct {
	d   *DB
	cmp *base.Comparer // d.cmp
	// prefix, if set, is IterOptions.Prefix under a comparer with Split:
	// every position is checked to have it (see inPrefix). prefixScan
	// says the order is not bytewise, so that no upper bound ends the
	// prefix's keys: Last and SeekLT find them by scanning forward.
	prefix     []byte
	prefixScan bool
	// custom is cmp.Compare when the order is not bytewise, nil when it
	// is: the per-entry compares then call bytes.Compare inline (see
	// compare).
	custom func(a, b []byte) int
	rs     *readState
	snap   uint64
	iter   base.InternalIterator
	// alloc holds iter and what it merges (see iterAlloc), until Close.
	alloc    *iterAlloc
	lower    []byte
	upper    []byte
	tombs    rangedel.Set
	paranoid bool
	// lookback says every source keeps the entry a Prev stepped from
	// readable until the next positioning call (base.InternalIterator's
	// Lookback; tables do with a block cache): findPrevEntry then returns
	// the newest version's key and value in place instead of copying them.
	lookback bool
	// ov, for an indexed batch's iterator, does the iterating (see
	// batchOverlay); the fields above are then unused but d.
	ov *batchOverlay

	valid   bool
	err     error
	closed  bool
	forward bool
	key     []byte
	value   []byte
	// keyBuf and valBuf hold copies when the underlying entry will move
	// (reverse iteration, the skip-ahead of Next, merged values); spare is
	// valBuf's partner while merge operands are combined (see keepValue).
	keyBuf []byte
	valBuf []byte
	spare  []byte
	// seekBuf holds a seek's key (see ownSeekKey).
	seekBuf []byte
	// past is set when the current key's value was merged going forward:
	// the underlying iterator has already moved past the operands it read.
	past bool
	// deferMergeErr (an indexed batch's DB iterator) makes a key whose
	// operands fail to merge current anyway, its error in mergeErr and no
	// value: the batch laid over it may hide the key, and the overlay
	// reports mergeErr only if it needs the value.
	deferMergeErr bool
	mergeErr      error
}

// NewIter returns an iterator over the DB's current state.
func (d *DB) NewIter(o *IterOptions) (*Iterator, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	return d.newIter(o, readLatest, d.userReads)
}

// newIter builds an iterator at snap; ro are the table reads' options
// (d.userReads for the user's iterators, the zero value where every block
// must be verified).
func (d *DB) newIter(o *IterOptions, snap uint64, ro sst.ReadOptions) (*Iterator, error) {
	rs := d.loadReadState()
	if rs == nil {
		return nil, ErrClosed
	}
	if snap == readLatest {
		snap = d.visibleSeq.Load() // after the state: see readLatest
	}
	it := &Iterator{d: d, cmp: d.cmp, custom: customCompare(d.cmp), rs: rs, snap: snap, paranoid: d.opts.ParanoidMemoryChecks,
		lookback: d.blockCache != nil}
	if err := it.setOptions(o, &ro); err != nil {
		rs.unref()
		return nil, err
	}
	a := newIterAlloc()
	it.seekBuf = a.seekBuf[:0]
	children := a.children[:0]
	tombs := rangedel.Sources{Cmp: d.cmp}
	addMem := func(e *memTableEntry) error {
		if err := e.readable(); err != nil {
			return err
		}
		if t, ok := e.t.(*memtable.MemTable); ok && t.Empty() {
			// Nothing at or below snap is in it: an entry is counted
			// before its batch is published. Left out, it spares every
			// step a merge when a single level holds the rest (a store
			// read after it was reopened, or after a flush).
			return nil
		}
		children = append(children, a.memIter(e.t))
		if e.rangeDels.Load() > 0 {
			ts, idx, err := e.tombstones(snap)
			if err != nil {
				return d.memCorruption(err)
			}
			tombs.Add(ts, idx, snap)
		}
		return nil
	}
	fail := func(err error) (*Iterator, error) {
		for _, c := range children {
			c.Close()
		}
		a.release()
		rs.unref()
		return nil, err
	}
	if err := addMem(rs.mem); err != nil {
		return fail(err)
	}
	for _, e := range rs.imms {
		if err := addMem(e); err != nil {
			return fail(err)
		}
	}
	for level, files := range rs.v.Levels {
		if len(files) == 0 {
			continue
		}
		for _, f := range files {
			if f.NumRangeDels == 0 || !f.OverlapsUserRange(d.cmp, it.lower, it.upper) {
				continue
			}
			h, err := d.tableCache.get(f)
			if err != nil {
				return fail(err)
			}
			tombs.Add(h.reader.RangeDels(), &h.tombs, snap)
			h.release()
		}
		if level == 0 {
			for _, f := range files {
				if f.SmallestSeq > snap || !f.OverlapsUserRange(d.cmp, it.lower, it.upper) {
					continue
				}
				h, err := d.tableCache.get(f)
				if err != nil {
					return fail(err)
				}
				children = append(children, a.tableIter(h, f, it.lower, it.upper, ro))
			}
			continue
		}
		children = append(children, a.levelIter(d.tableCache, files, level, it.lower, it.upper, ro))
	}
	it.tombs = tombs.Set(snap)
	it.alloc = a
	it.iter = d.mergeSources(a, children)
	d.openIters.Add(1)
	return it, nil
}

// mergeSources returns what an Iterator reads its sources through: the
// source itself when there is one (a store read from one level, or from
// one memtable), else a mergingIter over them, held in a.
//
// Why not a mergingIter of one: it passes every call through, but each
// is one more call per entry, and a reverse scan makes several per entry
// (Prev, Key, Value and Valid): readreverse of a compacted 2M-key store
// ran 1.00-1.13x (median 1.04x) as fast without it, memtable readreverse
// 1.00-1.04x (4 and 3 alternating pairs). A seek charges no table with
// one source (see mergingIter.chargeSeek), and seekPrefixGE asks a lone
// source's filter itself.
func (d *DB) mergeSources(a *iterAlloc, children []base.InternalIterator) base.InternalIterator {
	if len(children) == 1 {
		return children[0]
	}
	m := a.mergingIter(d.cmp, children)
	if d.seekAllowance > 0 {
		m.onSeek = d
	}
	return m
}

// setOptions takes o's bounds and prefix (nil: none); ro gains what the
// prefix needs (see setPrefix).
func (it *Iterator) setOptions(o *IterOptions, ro *sst.ReadOptions) error {
	if o == nil {
		return nil
	}
	it.lower = cloneOrNil(o.LowerBound)
	it.upper = cloneOrNil(o.UpperBound)
	if err := it.setPrefix(o.Prefix, ro); err != nil {
		return err
	}
	if it.lower != nil && it.upper != nil && it.cmp.Cmp(it.lower, it.upper) > 0 {
		if o.Prefix == nil {
			return base.InvalidArgumentErrorf("iterator bounds: lower %s > upper %s", base.HexKey(it.lower), base.HexKey(it.upper))
		}
		it.lower = it.upper // the prefix lies outside the bounds: empty
	}
	return nil
}

func cloneOrNil(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// tableIter is a table's iterator holding its table cache reference.
// filter counts its prefix probes (nil: none). meta is the L0 table's.
type tableIter struct {
	base.InternalIterator
	h      *tableEntry
	meta   *manifest.FileMetadata
	filter *sst.FilterStats
}

// positionedTable returns the table, in L0 (see mergingIter.chargeSeek).
func (t *tableIter) positionedTable() (*manifest.FileMetadata, int) { return t.meta, 0 }

// mayHoldUserKey reports whether the table's filter may contain userKey
// (see mergingIter.SeekGE).
func (t *tableIter) mayHoldUserKey(userKey []byte) bool { return t.h.reader.MayContain(userKey) }

// mayHoldPrefix reports whether the table's prefix filter may hold a key
// of prefix (see mergingIter.SeekPrefixGE).
func (t *tableIter) mayHoldPrefix(prefix, _ []byte) bool {
	return t.h.reader.MayContainPrefixCounted(prefix, t.filter)
}

func (t *tableIter) Close() error {
	err := t.InternalIterator.Close()
	t.h.release()
	return err
}

// First moves to the first live key.
func (it *Iterator) First() bool {
	if !it.usable() {
		return false
	}
	it.err = nil
	if it.ov != nil {
		return it.ov.first()
	}
	it.forward = true
	if it.lower != nil {
		it.iter.SeekGE(it.lower)
	} else {
		it.iter.First()
	}
	return it.inPrefix(it.findNextEntry(nil))
}

// Last moves to the last live key.
func (it *Iterator) Last() bool {
	if !it.usable() {
		return false
	}
	it.err = nil
	if it.ov != nil {
		return it.ov.last()
	}
	if it.prefixScan {
		return it.lastInPrefix(nil)
	}
	it.forward = false
	if it.upper != nil {
		it.iter.SeekLT(it.upper)
	} else {
		it.iter.Last()
	}
	return it.inPrefix(it.findPrevEntry(nil))
}

// SeekGE moves to the first live key >= key (clamped to the bounds).
func (it *Iterator) SeekGE(key []byte) bool {
	if !it.usable() {
		return false
	}
	key = it.ownSeekKey(key)
	it.err = nil
	it.forward = true
	if it.lower != nil && it.cmp.Cmp(key, it.lower) < 0 {
		key = it.lower
	}
	if it.upper != nil && it.cmp.Cmp(key, it.upper) >= 0 {
		it.valid = false
		return false
	}
	if it.ov != nil {
		return it.ov.seekGE(key)
	}
	it.iter.SeekGE(key)
	return it.inPrefix(it.findNextEntry(nil))
}

// SeekLT moves to the last live key < key (clamped to the bounds).
func (it *Iterator) SeekLT(key []byte) bool {
	if !it.usable() {
		return false
	}
	key = it.ownSeekKey(key)
	it.err = nil
	it.forward = false
	if it.upper != nil && it.cmp.Cmp(key, it.upper) > 0 {
		key = it.upper
	}
	if it.lower != nil && it.cmp.Cmp(key, it.lower) <= 0 {
		it.valid = false
		return false
	}
	if it.ov != nil {
		return it.ov.seekLT(key)
	}
	if it.prefixScan {
		return it.lastInPrefix(key)
	}
	it.iter.SeekLT(key)
	return it.inPrefix(it.findPrevEntry(nil))
}

// Next moves to the next live key.
func (it *Iterator) Next() bool {
	if !it.valid || !it.usable() {
		return false
	}
	if it.ov != nil {
		return it.ov.next()
	}
	if !it.forward {
		// Turn around: re-seek past the current key.
		it.forward = true
		it.saveKey(it.key)
		it.iter.SeekGE(it.keyBuf)
		return it.inPrefix(it.findNextEntry(it.keyBuf))
	}
	// Skip the rest of the current key's versions. The key must be saved:
	// moving the underlying iterator may invalidate it.
	it.saveKey(it.key)
	if !it.past {
		it.iter.Next()
	}
	return it.inPrefix(it.findNextEntry(it.keyBuf))
}

// Prev moves to the previous live key.
func (it *Iterator) Prev() bool {
	if !it.valid || !it.usable() {
		return false
	}
	if it.ov != nil {
		return it.ov.prev()
	}
	if it.forward {
		it.forward = false
		it.saveKey(it.key)
		it.iter.SeekLT(it.keyBuf)
		return it.inPrefix(it.findPrevEntry(it.keyBuf))
	}
	return it.inPrefix(it.findPrevEntry(it.key))
}

// ownSeekKey returns a copy of a seek's key in seekBuf. The key may be
// the iterator's own current key (it.SeekLT(it.Key())), which points into
// a source's buffers (keyBuf, a block iterator's key buffers, the block)
// that the seek itself reuses while it still compares with the key.
func (it *Iterator) ownSeekKey(key []byte) []byte {
	it.seekBuf = append(it.seekBuf[:0], key...)
	return it.seekBuf
}

// saveKey copies k into keyBuf. keyBuf is never nil after it, even for
// the empty key: findNextEntry and findPrevEntry take nil for "no key",
// and the empty key is a key (a nil copy of it made a forward scan return
// the overwritten and deleted versions of "").
func (it *Iterator) saveKey(k []byte) {
	if it.keyBuf == nil {
		it.keyBuf = make([]byte, 0, 64)
	}
	it.keyBuf = append(it.keyBuf[:0], k...)
}

// findNextEntry advances the underlying iterator from its position to the
// newest visible version of the next live user key. skip, if not nil, is the
// user key just returned: entries of it are skipped, and with paranoid
// checks an entry ordered before it is corruption.
func (it *Iterator) findNextEntry(skip []byte) bool {
	it.valid, it.past, it.mergeErr = false, false, nil
	iter := it.iter
	for ok := iter.Valid(); ok; {
		k := iter.Key()
		if skip != nil {
			var c int
			if it.custom == nil { // bytes.Compare inline: see compare
				c = bytes.Compare(skip, k.UserKey)
			} else {
				c = it.custom(skip, k.UserKey)
			}
			if c == 0 {
				ok = iter.Next()
				continue
			}
			if c > 0 && it.paranoid {
				return it.fail(base.CorruptionErrorf("iterator: keys out of order going forward: %s then %s",
					base.HexKey(skip), base.HexKey(k.UserKey)))
			}
			skip = nil
		}
		if it.upper != nil && it.compare(k.UserKey, it.upper) >= 0 {
			break
		}
		seq := k.SeqNum()
		if seq > it.snap {
			ok = iter.Next()
			continue
		}
		if kind := k.Kind(); kind != base.KindDelete && !it.tombs.Covers(k.UserKey, seq) {
			if kind == base.KindMerge {
				return it.mergeForward(k.UserKey)
			}
			it.key, it.value, it.valid = k.UserKey, iter.Value(), true
			return true
		}
		// Deleted: skip every older version of this key.
		it.saveKey(k.UserKey)
		skip = it.keyBuf
		ok = iter.Next()
	}
	if err := iter.Error(); err != nil {
		return it.fail(err)
	}
	return false
}

// mergeForward makes key, whose newest visible version is the merge
// operand at the underlying iterator's position, current: it reads the
// older versions after it, combining operands newest first, until a Set,
// a deletion, a version under a range tombstone or the next key ends the
// chain, and merges the result into the Set's value (nil for the others).
// The underlying iterator is left past what it read (it.past).
func (it *Iterator) mergeForward(key []byte) bool {
	it.saveKey(key)
	key = it.keyBuf
	m := it.d.opts.Merger
	if m == nil {
		it.past = false
		return it.mergeFailure(key, errNoMerger(key))
	}
	iter := it.iter
	it.valBuf = append(it.valBuf[:0], iter.Value()...)
	for {
		var below []byte
		operand := false
		if iter.Next() {
			if k := iter.Key(); it.cmp.Eq(k.UserKey, key) && k.Kind() != base.KindDelete && !it.tombs.Covers(key, k.SeqNum()) {
				below, operand = base.NonNil(iter.Value()), k.Kind() == base.KindMerge
			}
		} else if err := iter.Error(); err != nil {
			return it.fail(err)
		}
		res, err := m.Merge(key, base.Clip(below), base.Clip(base.NonNil(it.valBuf)))
		if err != nil {
			it.past = true
			return it.mergeFailure(key, mergeFailed(key, err))
		}
		it.keepValue(res)
		if !operand {
			break
		}
	}
	it.key, it.value, it.valid, it.past = key, it.valBuf, true, true
	return true
}

// mergeFailure stops the iterator with err, a merge of key's operands
// that failed, or with deferMergeErr makes key current with err in
// mergeErr (see deferMergeErr).
func (it *Iterator) mergeFailure(key []byte, err error) bool {
	if !it.deferMergeErr {
		return it.fail(err)
	}
	it.key, it.value, it.valid, it.mergeErr = key, nil, true, err
	return true
}

// keepValue makes a copy of v the current value buffer (valBuf). v may
// alias valBuf itself (a Merger may return its operand) or the underlying
// iterator's memory, so it is copied into spare, which then trades
// places with valBuf.
func (it *Iterator) keepValue(v []byte) {
	it.spare = append(it.spare[:0], v...)
	it.valBuf, it.spare = it.spare, it.valBuf
}

// findPrevEntry moves the underlying iterator backwards over the next user
// key's versions, oldest to newest, keeping the newest visible one; if it is
// live, it becomes the current entry. prev, if not nil, is the user key just
// returned (for the paranoid order check).
//
// With lookback, the key and a Set's value stay where the sources hold
// them: the newest version is one step behind the underlying iterator
// when the group ends, and the group's key is taken afresh from each
// version read. A value that would fall two steps behind (the version
// after it is hidden by the snapshot) is copied first.
func (it *Iterator) findPrevEntry(prev []byte) bool {
	it.valid, it.past, it.mergeErr = false, false, nil
	iter := it.iter
	for iter.Valid() {
		k := iter.Key()
		if prev != nil && it.paranoid {
			if c := it.compare(k.UserKey, prev); c >= 0 {
				return it.fail(base.CorruptionErrorf("iterator: keys out of order going backward: %s then %s",
					base.HexKey(prev), base.HexKey(k.UserKey)))
			}
		}
		if it.lower != nil && it.compare(k.UserKey, it.lower) < 0 {
			break
		}
		// Collect the group of this user key.
		group := k.UserKey
		if !it.lookback {
			it.saveKey(k.UserKey)
			group = it.keyBuf
		}
		found := false
		var kind base.Kind
		var seq uint64
		var ch prevChain
		var inPlace []byte // the value, if it is a Set's in the source's memory
		for {
			s := k.SeqNum()
			setInPlace := it.lookback && s <= it.snap && k.Kind() == base.KindSet
			if inPlace != nil && !setInPlace {
				// The next step would leave it two behind, or a merge
				// reads it from valBuf.
				it.valBuf = append(it.valBuf[:0], inPlace...)
				inPlace = nil
			}
			if s <= it.snap {
				found, kind, seq = true, k.Kind(), s
				if setInPlace {
					inPlace, ch = base.NonNil(iter.Value()), prevChain{have: true, seq: s}
				} else {
					it.prevVersion(&ch, group, kind, s)
				}
			}
			if !iter.Prev() {
				break
			}
			k = iter.Key()
			var c int
			if it.custom == nil { // bytes.Compare inline: see compare
				c = bytes.Compare(k.UserKey, group)
			} else {
				c = it.custom(k.UserKey, group)
			}
			if c != 0 {
				if c > 0 && it.paranoid {
					return it.fail(base.CorruptionErrorf("iterator: keys out of order going backward: %s then %s",
						base.HexKey(group), base.HexKey(k.UserKey)))
				}
				break
			}
			if it.lookback {
				group = k.UserKey
			}
		}
		if err := iter.Error(); err != nil {
			return it.fail(err)
		}
		if found && kind != base.KindDelete && !it.tombs.Covers(group, seq) {
			if ch.err != nil {
				return it.mergeFailure(group, ch.err)
			}
			// key and value alias the sources (lookback) or keyBuf and
			// valBuf, which the next positioning call overwrites only
			// after it is done with them.
			it.key, it.value, it.valid = group, it.valBuf, true
			if inPlace != nil {
				it.value = inPlace
			}
			return true
		}
		prev = group
	}
	if err := iter.Error(); err != nil {
		return it.fail(err)
	}
	return false
}

// prevChain is the state of one key's versions read oldest first (going
// backward): the value as of the last one read, in valBuf (have), and
// the error of a merge that failed on the way (err: a later Set or
// deletion makes it moot).
type prevChain struct {
	have bool
	err  error
	// seq is the seqnum of the version the value (or error) is as of.
	seq uint64
}

// prevVersion folds the visible version of key at the underlying
// iterator's position (kind, seq) into ch: a Set replaces the value, a
// deletion clears it, and a merge operand is merged into it (into nil if
// there is none, or a range tombstone newer than it covers it). A merge
// that failed makes the value unknown (ch.err) until a Set, a deletion
// or a range tombstone over it ends what it was part of.
func (it *Iterator) prevVersion(ch *prevChain, key []byte, kind base.Kind, seq uint64) {
	switch kind {
	case base.KindSet:
		it.valBuf = append(it.valBuf[:0], it.iter.Value()...)
		*ch = prevChain{have: true, seq: seq}
	case base.KindMerge:
		below := (ch.have || ch.err != nil) && !it.tombs.Covers(key, ch.seq)
		if below && ch.err != nil {
			ch.seq = seq
			return // the value below is unknown
		}
		m := it.d.opts.Merger
		if m == nil {
			*ch = prevChain{err: errNoMerger(key), seq: seq}
			return
		}
		var existing []byte
		if below {
			existing = base.NonNil(it.valBuf)
		}
		res, err := m.Merge(key, base.Clip(existing), base.Clip(base.NonNil(it.iter.Value())))
		if err != nil {
			*ch = prevChain{err: mergeFailed(key, err), seq: seq}
			return
		}
		it.keepValue(res)
		*ch = prevChain{have: true, seq: seq}
	default:
		*ch = prevChain{}
	}
}

// compare orders two user keys: bytes.Compare for a bytewise order, else
// the comparer's. (It is a call, as base.Comparer.Cmp is: the per-entry
// same-key compares of findNextEntry and findPrevEntry spell it out so
// that the bytewise order keeps its inline bytes.Compare.)
func (it *Iterator) compare(a, b []byte) int {
	if it.custom == nil {
		return bytes.Compare(a, b)
	}
	return it.custom(a, b)
}

// customCompare returns c.Compare if c's order is not bytewise, else nil.
func customCompare(c *base.Comparer) func(a, b []byte) int {
	if c.IsBytewise() {
		return nil
	}
	return c.Compare
}

// usable reports whether the iterator may move: not closed, and its DB not
// closed. After DB.Close the iterator stops with ErrClosed instead of
// reading on (and reopening tables into a closed table cache).
func (it *Iterator) usable() bool {
	if it.closed {
		return false
	}
	if it.d.closed.Load() {
		it.valid = false
		it.err = ErrClosed
		return false
	}
	return true
}

func (it *Iterator) fail(err error) bool {
	it.valid = false
	it.err = err
	it.d.emitCorruption(err)
	return false
}

// Valid reports whether the iterator is at a live key.
func (it *Iterator) Valid() bool { return it.valid }

// Key returns the current key; valid until the next positioning call.
func (it *Iterator) Key() []byte { return it.key }

// Value returns the current value; valid until the next positioning call.
func (it *Iterator) Value() []byte { return it.value }

// Error returns the error that stopped the iterator, if any (corruption, an
// I/O error). An exhausted iterator has no error.
func (it *Iterator) Error() error { return it.err }

// Close releases the iterator's memtables and files. It returns the
// iterator's error, if any; closing twice returns ErrClosed.
func (it *Iterator) Close() error {
	if it.closed {
		return ErrClosed
	}
	it.closed = true
	it.valid = false
	if it.ov != nil {
		return it.ov.db.Close()
	}
	err := it.iter.Close()
	it.iter = nil
	if it.alloc != nil {
		it.alloc.seekBuf, it.seekBuf = it.seekBuf[:0], nil
		it.alloc.release()
		it.alloc = nil
	}
	it.rs.unref()
	it.d.openIters.Add(-1)
	if it.err != nil {
		return it.err
	}
	if err != nil {
		return fmt.Errorf("closing iterator: %w", err)
	}
	return nil
}
