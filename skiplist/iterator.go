package skiplist

import (
	"fmt"
	"unsafe"
)

// Iterator walks a Skiplist in both directions. It is a value type so that
// callers can embed it or keep it on the stack; the zero Iterator is not
// usable, get one from Skiplist.NewIter.
//
// Contract: positioning methods (SeekGE, SeekLT, First, Last and the Split
// variants) return Valid() after the move and clear a previous error. Next
// and Prev are meant for a valid iterator; on an invalid one they return
// false. Key and Value alias the arena: they stay valid for the arena's life
// and must not be written. An Iterator is used by one goroutine at a time;
// any number of iterators may run concurrently with inserts. Entries whose
// insert is in progress may or may not be seen.
//
// In validating mode every move checks neighbour order (see the package doc);
// a failed check leaves the iterator invalid with Error() wrapping
// ErrCorruption.
type Iterator struct {
	list     *Skiplist
	nd       uint32 // current node; 0 = invalid
	validate bool
	err      error

	// Validating mode only.
	ndAbbrev uint64 // abbreviation of nd
	// checked is a neighbour before nd already verified to sort below nd
	// (by a Next that came from it, or by the look-ahead of Prev/Last), so
	// the next Prev need not compare that pair again; 0 if none.
	checked       uint32
	checkedAbbrev uint64
}

// NewIter returns an iterator over l, validating if validate is set or the
// list validates.
func (l *Skiplist) NewIter(validate bool) Iterator {
	return Iterator{list: l, validate: validate || l.validate}
}

// Validating reports whether the iterator checks neighbour order.
func (it *Iterator) Validating() bool { return it.validate }

// Valid reports whether the iterator is positioned on an entry.
func (it *Iterator) Valid() bool { return it.nd != 0 }

// Error returns the corruption or argument error that invalidated the
// iterator, or nil.
func (it *Iterator) Error() error { return it.err }

// Key returns the current key. The iterator must be valid. It panics (a
// bounds check, not a wild read) if the node's lengths were corrupted; Entry
// reports that as an error instead.
func (it *Iterator) Key() []byte { return it.list.keyAt(it.nd) }

// Value returns the current value. The iterator must be valid. See Key.
func (it *Iterator) Value() []byte { return it.list.valueAt(it.nd) }

// Entry returns the current key and value, checking once that both lie
// inside the arena. With a corrupted key or value length it returns an error
// wrapping ErrCorruption (the iterator stays where it is). It costs no more
// than Key and Value together, and is what the memtable uses.
func (it *Iterator) Entry() (key, value []byte, err error) {
	// One check instead of the two bounds-checked slicings of Key and
	// Value, written out here (not a helper) so that layout inlines into
	// the one call a scan makes per entry.
	l := it.list
	ks, kl, vl := l.layout(it.nd)
	if ks+uint64(kl)+uint64(vl) > uint64(len(l.buf)) {
		return nil, nil, it.extentError()
	}
	k := unsafe.Add(l.base, ks)
	return unsafe.Slice((*byte)(k), kl), unsafe.Slice((*byte)(unsafe.Add(k, kl)), vl), nil
}

//go:noinline
func (it *Iterator) extentError() error { return it.list.checkExtent(it.nd) }

// KeyOffset returns the arena offset of the current key's first byte, and
// ValueOffset that of the value; tests use them to corrupt entries in place.
func (it *Iterator) KeyOffset() int { return it.list.keyStart(it.nd) }

// ValueOffset returns the arena offset of the current value's first byte.
func (it *Iterator) ValueOffset() int {
	ks, kl, _ := it.list.layout(it.nd)
	return int(ks) + int(kl)
}

func (it *Iterator) fail(err error) bool {
	it.nd, it.err = 0, err
	return false
}

// SeekGE moves to the first key >= key. Under InternalKeys, key is a whole
// internal key (prefix ‖ trailer); a key shorter than 8 bytes is an error
// wrapping ErrInvalidArgument.
func (it *Iterator) SeekGE(key []byte) bool {
	prefix, trailer, ok := it.list.splitProbe(key)
	if !ok {
		return it.fail(fmt.Errorf("%w: seek key of %d bytes is shorter than the 8-byte trailer", ErrInvalidArgument, len(key)))
	}
	return it.SeekGESplit(prefix, trailer)
}

// SeekLT moves to the last key < key. See SeekGE for internal keys.
func (it *Iterator) SeekLT(key []byte) bool {
	prefix, trailer, ok := it.list.splitProbe(key)
	if !ok {
		return it.fail(fmt.Errorf("%w: seek key of %d bytes is shorter than the 8-byte trailer", ErrInvalidArgument, len(key)))
	}
	return it.SeekLTSplit(prefix, trailer)
}

// SeekGESplit is SeekGE for a key given as prefix and trailer, so a caller
// need not assemble an internal key. Under orders other than InternalKeys,
// prefix is the whole key and trailer is ignored.
func (it *Iterator) SeekGESplit(prefix []byte, trailer uint64) bool {
	it.err = nil
	l := it.list
	if it.validate {
		_, _, ge, ga, err := l.findValidated(prefix, trailer)
		if err != nil {
			return it.fail(err)
		}
		return it.landValidated(ge, ga)
	}
	_, ge := l.find(prefix, trailer)
	if ge == l.tail {
		it.nd = 0
		return false
	}
	it.nd = ge
	return true
}

// SeekLTSplit is SeekLT for a key given as prefix and trailer.
func (it *Iterator) SeekLTSplit(prefix []byte, trailer uint64) bool {
	it.err = nil
	l := it.list
	if it.validate {
		lt, la, _, _, err := l.findValidated(prefix, trailer)
		if err != nil {
			return it.fail(err)
		}
		return it.landValidated(lt, la)
	}
	lt, _ := l.find(prefix, trailer)
	if lt == l.head {
		it.nd = 0
		return false
	}
	it.nd = lt
	return true
}

// landValidated positions on a node a validated search returned, with its
// abbreviation.
func (it *Iterator) landValidated(nd uint32, abbrev uint64) bool {
	l := it.list
	if nd == l.tail || nd == l.head {
		it.nd = 0
		return false
	}
	it.nd, it.ndAbbrev, it.checked = nd, abbrev, 0
	return true
}

// First moves to the first key. Validating, it also checks that key against
// its successor, so a list broken right after the head is reported here.
func (it *Iterator) First() bool {
	it.err = nil
	l := it.list
	nd := l.loadNext(l.head, 0)
	if !it.validate {
		if nd == l.tail {
			it.nd = 0
			return false
		}
		it.nd = nd
		return true
	}
	if nd == l.tail {
		it.nd = 0
		return false
	}
	if !l.inBounds(nd) {
		return it.fail(l.linkError(l.head, nd, 0))
	}
	na := l.abbrevAt(nd)
	if nx := l.loadNext(nd, 0); nx != l.tail {
		if !l.inBounds(nx) {
			return it.fail(l.linkError(nd, nx, 0))
		}
		if err := l.checkPair(nd, na, nx, l.abbrevAt(nx), "first"); err != nil {
			return it.fail(err)
		}
	}
	it.nd, it.ndAbbrev, it.checked = nd, na, 0
	return true
}

// Last moves to the last key, in O(1) through the tail's back link.
// Validating, it also checks the key against its predecessor.
func (it *Iterator) Last() bool {
	it.err = nil
	l := it.list
	nd := l.loadPrev(l.tail)
	if !it.validate {
		if nd == l.head {
			it.nd = 0
			return false
		}
		it.nd = nd
		return true
	}
	if nd == l.head {
		it.nd = 0
		return false
	}
	if !l.inBounds(nd) {
		return it.fail(l.linkError(l.tail, nd, 0))
	}
	it.nd, it.ndAbbrev, it.checked = nd, l.abbrevAt(nd), 0
	if err := it.lookBehind(); err != nil {
		return it.fail(err)
	}
	return true
}

// Next moves to the following key. Both modes share one body, so a
// validated step costs no extra call: after the plain step's link load it
// adds a bounds check of the link and an abbreviated-key compare, and leaves
// everything else (the full compare of equal prefixes, errors) to a
// function called only then.
func (it *Iterator) Next() bool {
	l := it.list
	cur := it.nd
	if cur == 0 {
		return false
	}
	nd := l.loadNext(cur, 0)
	if nd == l.tail {
		it.nd = 0
		return false
	}
	if it.validate {
		if !l.inBounds(nd) {
			return it.nextFailed(cur, nd, 0)
		}
		na := l.abbrevAt(nd)
		if it.ndAbbrev >= na {
			// Equal prefixes need the full compare; a larger one is
			// corruption.
			return it.nextFailed(cur, nd, na)
		}
		it.checked, it.checkedAbbrev = cur, it.ndAbbrev
		it.ndAbbrev = na
	}
	it.nd = nd
	return true
}

// Prev moves to the preceding key, in O(1) through the back link. As with
// Next, both modes share one body; a validated step adds bounds checks and
// abbreviated-key compares of the node it lands on against the node it left
// (unless already checked) and against its own predecessor (see
// prevValidated), and calls prevValidated itself only when one of those
// quick checks does not pass.
func (it *Iterator) Prev() bool {
	l := it.list
	cur := it.nd
	if cur == 0 {
		return false
	}
	nd := l.loadPrev(cur)
	if nd == l.head {
		it.nd = 0
		return false
	}
	if it.validate {
		if !l.inBounds(nd) {
			return it.prevValidated()
		}
		var na uint64
		if nd == it.checked {
			na = it.checkedAbbrev
		} else if na = l.abbrevAt(nd); na >= it.ndAbbrev {
			return it.prevValidated()
		}
		p := l.loadPrev(nd)
		if p == l.head {
			it.checked = 0
		} else if !l.inBounds(p) {
			return it.prevValidated()
		} else {
			pa := l.abbrevAt(p)
			if pa >= na {
				return it.prevValidated()
			}
			it.checked, it.checkedAbbrev = p, pa
		}
		it.ndAbbrev = na
	}
	it.nd = nd
	return true
}

// nextFailed finishes a validated Next step whose quick checks did not pass:
// nd is out of the arena (na unused), or its abbreviation na does not sort
// above the current node's, so the keys are compared in full.
//
//go:noinline
func (it *Iterator) nextFailed(cur, nd uint32, na uint64) bool {
	l := it.list
	if !l.inBounds(nd) {
		return it.fail(l.linkError(cur, nd, 0))
	}
	if err := l.checkPairSlow(cur, it.ndAbbrev, nd, na, "next"); err != nil {
		return it.fail(err)
	}
	it.checked, it.checkedAbbrev = cur, it.ndAbbrev
	it.nd, it.ndAbbrev = nd, na
	return true
}

// prevValidated steps back and checks the node it lands on against both
// neighbours: the one it left (unless already checked) and, looking one
// step further back, its own predecessor. The look-behind is what lets
// Last+Prev see a node that is out of order with the node before it; it
// costs one compare per step because the next Prev reuses it. Prev runs the
// quick form of these checks inline and falls back to this full form (with
// the compare of equal prefixes, and the errors) only when one does not pass.
//
//go:noinline
func (it *Iterator) prevValidated() bool {
	l := it.list
	cur := it.nd
	if cur == 0 {
		return false
	}
	nd := l.loadPrev(cur)
	if nd == l.head {
		it.nd = 0
		return false
	}
	if !l.inBounds(nd) {
		return it.fail(l.linkError(cur, nd, 0))
	}
	var na uint64
	if nd == it.checked {
		na = it.checkedAbbrev
	} else {
		na = l.abbrevAt(nd)
		if err := l.checkPair(nd, na, cur, it.ndAbbrev, "prev"); err != nil {
			return it.fail(err)
		}
	}
	it.nd, it.ndAbbrev = nd, na
	// lookBehind, written out: this is the hot path of validated reverse
	// scans.
	p := l.loadPrev(nd)
	if p == l.head {
		it.checked = 0
		return true
	}
	if !l.inBounds(p) {
		return it.fail(l.linkError(nd, p, 0))
	}
	pa := l.abbrevAt(p)
	if err := l.checkPair(p, pa, nd, na, "prev look-behind"); err != nil {
		return it.fail(err)
	}
	it.checked, it.checkedAbbrev = p, pa
	return true
}

// lookBehind checks the current node against its predecessor and remembers
// the predecessor as checked.
func (it *Iterator) lookBehind() error {
	l := it.list
	p := l.loadPrev(it.nd)
	if p == l.head {
		it.checked = 0
		return nil
	}
	if !l.inBounds(p) {
		return l.linkError(it.nd, p, 0)
	}
	pa := l.abbrevAt(p)
	if err := l.checkPair(p, pa, it.nd, it.ndAbbrev, "prev look-behind"); err != nil {
		return err
	}
	it.checked, it.checkedAbbrev = p, pa
	return nil
}

// find returns the last node < probe (head if none) and the first node >=
// probe (tail if none). This is the unvalidated hot path.
//
// bigger remembers the node that ended the walk at the level above: it is
// known to be >= probe, so meeting it again one level down ends that level's
// walk without a comparison.
func (l *Skiplist) find(prefix []byte, trailer uint64) (lt, ge uint32) {
	if l.order == orderUser {
		return l.findUser(prefix, trailer)
	}
	pa, ps := l.abbrevOf(prefix), l.probeSummary(prefix)
	x, bigger := l.head, l.tail
	for lvl := int(l.height.Load()) - 1; lvl >= 1; lvl-- {
		for {
			w := l.loadLink(x, lvl)
			nx := uint32(w)
			if nx == l.tail || nx == bigger {
				break
			}
			if uint32(w>>32) > ps {
				bigger = nx // known bigger from its summary: not loaded
				break
			}
			na := l.abbrevAt(nx)
			if na < pa || (na == pa && l.cmpProbe(prefix, trailer, nx) > 0) {
				x = nx
				continue
			}
			bigger = nx
			break
		}
	}
	for {
		nx := l.loadNext(x, 0)
		if nx == l.tail || nx == bigger {
			return x, nx
		}
		na := l.abbrevAt(nx)
		if na < pa || (na == pa && l.cmpProbe(prefix, trailer, nx) > 0) {
			x = nx
			continue
		}
		return x, nx
	}
}

// findValidated is find with validation of every link it follows. The order
// check of a link x→nx is needed only when the walk moves past nx (nx <
// probe): otherwise x < probe <= nx proves it, and when it is needed the
// abbreviations usually decide it with one integer compare.
//
// It also returns the abbreviations of lt and ge (meaningless for the
// sentinels), which the iterator needs for its next validated step. Under
// orderUser those are the built-in ones, 0, as the iterator's steps expect.
func (l *Skiplist) findValidated(prefix []byte, trailer uint64) (lt uint32, ltAbbrev uint64, ge uint32, geAbbrev uint64, err error) {
	if l.order == orderUser {
		lt, ge, err = l.findValidatedUser(prefix, trailer)
		return lt, 0, ge, 0, err
	}
	pa := l.abbrevOf(prefix)
	x, nx, bigger := l.head, l.tail, l.tail
	var xa, ba uint64
	for lvl := int(l.height.Load()) - 1; lvl >= 0; lvl-- {
		for {
			nx = l.loadNext(x, lvl)
			if nx == l.tail || nx == bigger {
				break
			}
			if !l.linkInBounds(nx, lvl) {
				return 0, 0, 0, 0, l.linkError(x, nx, lvl)
			}
			na := l.abbrevAt(nx)
			if na > pa {
				bigger, ba = nx, na
				break
			}
			if na == pa {
				if err := l.checkExtent(nx); err != nil {
					return 0, 0, 0, 0, err
				}
				if l.cmpProbe(prefix, trailer, nx) <= 0 {
					bigger, ba = nx, na
					break
				}
			}
			// Moving past nx: x < nx is not implied, check it.
			if xa >= na && x != l.head {
				if err := l.checkPairSlow(x, xa, nx, na, "search"); err != nil {
					return 0, 0, 0, 0, err
				}
			}
			x, xa = nx, na
		}
	}
	// The node that ended the walk (ge) was only compared with the probe.
	// A key corrupted upward there (now above its successor) would make
	// SeekLT step over it and Get miss it, silently; one look ahead at
	// level 0 closes that gap.
	if nx != l.tail {
		if nn := l.loadNext(nx, 0); nn != l.tail {
			if !l.inBounds(nn) {
				return 0, 0, 0, 0, l.linkError(nx, nn, 0)
			}
			if err := l.checkPair(nx, ba, nn, l.abbrevAt(nn), "search end"); err != nil {
				return 0, 0, 0, 0, err
			}
		}
	}
	return x, xa, nx, ba, nil
}
