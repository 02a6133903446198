package vigil

import (
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/sst"
)

// Prefix iteration (IterOptions.Prefix, Iterator.SeekPrefixGE).
//
// The keys of one prefix are contiguous in the order and none sorts
// before the prefix itself (Comparer.Split's contract), so a prefix
// iterator starts at max(LowerBound, prefix) and ends at the first key of
// another prefix. In a bytewise order the keys of prefix p all begin with
// p's bytes, so the end is also an upper bound (prefixEnd), which Last and
// SeekLT seek to; in any other order nothing bounds them from above, and
// Last and SeekLT scan the prefix's keys forward. Tables are skipped by
// their prefix bloom filters (sst.ReadOptions.Prefix) when the comparer
// has Split; without Split the prefix is bytes and bounds alone.

// setPrefix applies IterOptions.Prefix p (nil: none) to the iterator's
// bounds and to ro, the table reads' options.
func (it *Iterator) setPrefix(p []byte, ro *sst.ReadOptions) error {
	if p == nil {
		return nil
	}
	c := it.cmp
	p = cloneOrNil(p)
	switch {
	case c.Split == nil && !c.IsBytewise():
		return base.InvalidArgumentErrorf("IterOptions.Prefix needs a Comparer with Split (or a bytewise order); comparer %q has none", c.Name)
	}
	if it.lower == nil || c.Cmp(it.lower, p) < 0 {
		it.lower = p
	}
	if c.IsBytewise() {
		if end := prefixEnd(p); end != nil && (it.upper == nil || c.Cmp(end, it.upper) < 0) {
			it.upper = end
		}
	} else {
		it.prefixScan = true
	}
	if c.Split != nil {
		it.prefix = p
		ro.Prefix = p
	}
	return nil
}

// prefixEnd returns the smallest byte string above every string that
// begins with p (nil if there is none: p is all 0xff).
func prefixEnd(p []byte) []byte {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xff {
			end := append([]byte(nil), p[:i+1]...)
			end[i]++
			return end
		}
	}
	return nil
}

// inPrefix ends a positioning step that landed on a key of another prefix
// than the iterator's: ok, unless it did. Every step of every iterator
// calls it, so it stays small enough to be inlined; the check is
// checkPrefix.
func (it *Iterator) inPrefix(ok bool) bool {
	if !ok || it.prefix == nil {
		return ok
	}
	return it.checkPrefix()
}

// checkPrefix is inPrefix's check for a valid prefix iterator.
func (it *Iterator) checkPrefix() bool {
	if it.cmp.Eq(it.cmp.Prefix(it.key), it.prefix) {
		return true
	}
	it.valid = false
	return false
}

// lastInPrefix positions at the last key of the prefix below limit (nil:
// none) by scanning the prefix's keys forward from the first: Last and
// SeekLT where the order gives the prefix no upper bound. It leaves the
// iterator as SeekGE of that key does, so Prev and Next go on from it.
func (it *Iterator) lastInPrefix(limit []byte) bool {
	var last []byte
	for ok := it.First(); ok && (limit == nil || it.cmp.Cmp(it.key, limit) < 0); ok = it.Next() {
		last = append(last[:0], it.key...)
	}
	if it.err != nil || last == nil {
		it.valid = false
		return false
	}
	return it.SeekGE(last)
}

// SeekPrefixGE moves to the first live key >= key whose prefix
// (Comparer.Split) is key's, within the bounds and the iterator's own
// prefix; false if there is none. Tables whose bloom filter excludes key
// are not read. It needs a comparer with Split.
func (it *Iterator) SeekPrefixGE(key []byte) bool {
	if !it.usable() {
		return false
	}
	c := it.cmp
	if c.Split == nil {
		it.valid, it.err = false, base.InvalidArgumentErrorf("SeekPrefixGE needs a Comparer with Split; comparer %q has none", c.Name)
		return false
	}
	key = it.ownSeekKey(key) // before its prefix, a slice of it
	p := c.Prefix(key)
	if it.prefix != nil && !c.Eq(p, it.prefix) {
		it.valid = false
		return false
	}
	if !it.seekPrefixGE(p, key) {
		return false
	}
	if !c.Eq(c.Prefix(it.key), p) {
		it.valid = false
		return false
	}
	return true
}

// seekPrefixGE is SeekGE for SeekPrefixGE: it lets the sources whose
// filters exclude prefix p stay unread (mergingIter.SeekPrefixGE over
// several; a lone source's filter asked here).
func (it *Iterator) seekPrefixGE(p, key []byte) bool {
	m, merging := it.iter.(*mergingIter)
	f, filtered := it.iter.(userKeyFilter)
	if (!merging && !filtered) || it.ov != nil {
		return it.SeekGE(key)
	}
	it.err = nil
	it.forward = true
	if it.lower != nil && it.cmp.Cmp(key, it.lower) < 0 {
		key = it.lower
	}
	if it.upper != nil && it.cmp.Cmp(key, it.upper) >= 0 {
		it.valid = false
		return false
	}
	switch {
	case merging:
		m.SeekPrefixGE(p, key)
	case !f.mayHoldPrefix(p, key):
		// Nothing of the prefix at or after key: done, unread.
		it.valid, it.past, it.mergeErr = false, false, nil
		return false
	default:
		it.iter.SeekGE(key)
	}
	return it.inPrefix(it.findNextEntry(nil))
}
