package vigil

import (
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manifest"
)

// mergingIter merges the internal keys of several sources (memtables, L0
// tables, levels) into one ordered stream, with a binary heap over the
// children's current keys: a min-heap going forward, a max-heap going
// backward. With one child it is a pass-through and pays for no heap (a
// DB Iterator over one source does without it: see DB.mergeSources).
//
// It implements base.InternalIterator, including direction changes: to turn
// around, every child other than the current one is re-positioned on the
// other side of the current key.
//
// Not safe for concurrent use.
type mergingIter struct {
	cmp      *base.Comparer // the order of the children's user keys
	bytewise bool           // cmp.IsBytewise()
	children []base.InternalIterator
	// heap holds indexes of valid children; keys caches each child's key so
	// heap comparisons make no interface calls.
	heap    []int
	keys    []base.InternalKey
	forward bool
	err     error
	// cur is the index of the current child, -1 when invalid.
	cur int
	// parked marks the children SeekGE left unpositioned because their
	// filters rule out its key (deferKey; nParked counts them): every entry
	// they hold at or after it has a greater user key, so the current
	// entry, of that user key, is the smallest without them. They are
	// sought before any move (unpark). Parked children are outside the heap
	// and their Valid is stale.
	parked   []bool
	nParked  int
	deferKey []byte
	// ext[i] is what children[i] is besides an iterator (asserted once,
	// not on every seek).
	ext []childExt
	// onSeek, when set, is told the table to charge for a seek that left
	// two or more tables positioned (see chargeSeek); nil: no charging
	// (compactions' inputs, tests).
	onSeek seekCharger
}

// childExt is a child as a userKeyFilter and as a tableSource, each nil
// if it is none.
type childExt struct {
	filter userKeyFilter
	source tableSource
}

// seekCharger is told the table to charge for a seek (DB.chargeSeek).
type seekCharger interface {
	chargeSeek(f *manifest.FileMetadata, level int)
}

// tableSource is implemented by the children that read tables (L0 table
// iterators and level iterators): the table the child is positioned in,
// and its level (nil when it is in none).
type tableSource interface {
	positionedTable() (f *manifest.FileMetadata, level int)
}

// userKeyFilter is implemented by the children that can tell, from a bloom
// filter and without reading a data block, that they hold no entry of a
// user key: table iterators (L0) and level iterators.
type userKeyFilter interface {
	mayHoldUserKey(userKey []byte) bool
	// mayHoldPrefix reports whether the child may hold an entry at or
	// after key (a key of prefix) with that prefix.
	mayHoldPrefix(prefix, key []byte) bool
}

func newMergingIter(cmp *base.Comparer, children []base.InternalIterator) *mergingIter {
	m := new(mergingIter)
	n := len(children)
	m.init(cmp, children, make([]int, 0, n), make([]base.InternalKey, n), make([]bool, n), make([]childExt, n))
	return m
}

// init makes m a merging iterator over children, with the slices it works
// in (each of len(children), heap of that capacity) given by the caller:
// fresh ones (newMergingIter) or an iterAlloc's arrays. Whatever m held
// before is overwritten, but for deferKey's buffer (bytes, no references),
// which a reused m keeps.
func (m *mergingIter) init(cmp *base.Comparer, children []base.InternalIterator, heap []int, keys []base.InternalKey, parked []bool, ext []childExt) {
	*m = mergingIter{
		deferKey: m.deferKey[:0],
		cmp:      cmp,
		bytewise: cmp.IsBytewise(),
		children: children,
		heap:     heap[:0],
		keys:     keys,
		parked:   parked,
		ext:      ext,
		cur:      -1,
	}
	for i, c := range children {
		m.ext[i].filter, _ = c.(userKeyFilter)
		m.ext[i].source, _ = c.(tableSource)
	}
}

// chargeSeek gives onSeek the newest of the tables a seek left positioned,
// if it left two or more: the seek read a data block in each, and those
// below the first would have been read alone had the first been compacted
// into them. Children are ordered newest first, so the first table source
// in the heap is the one to charge. The DB counts these per table and
// compacts a table once its count reaches its allowance (LevelDB's
// allowed_seeks; see DB.chargeSeek). A lone child's iterator never fills
// the heap (see single), so it never charges.
func (m *mergingIter) chargeSeek() {
	first, n := -1, 0
	for _, i := range m.heap {
		if m.ext[i].source == nil {
			continue
		}
		n++
		if first < 0 || i < first {
			first = i
		}
	}
	if n < 2 {
		return
	}
	if f, level := m.ext[first].source.positionedTable(); f != nil {
		m.onSeek.chargeSeek(f, level)
	}
}

// less orders heap entries: by internal key, reversed going backward.
// The bytewise order takes base.CompareInternal, a direct call.
func (m *mergingIter) less(a, b int) bool {
	var c int
	if m.bytewise {
		c = base.CompareInternal(m.keys[a], m.keys[b])
	} else {
		c = m.cmp.CompareInternal(m.keys[a], m.keys[b])
	}
	if m.forward {
		return c < 0
	}
	return c > 0
}

func (m *mergingIter) down(i int) {
	h := m.heap
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && m.less(h[r], h[l]) {
			j = r
		}
		if !m.less(h[j], h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

// rebuild collects the valid children into the heap.
func (m *mergingIter) rebuild(forward bool) bool {
	m.forward = forward
	m.heap = m.heap[:0]
	for i, c := range m.children {
		if m.parked[i] {
			continue
		}
		if c.Valid() {
			m.keys[i] = c.Key()
			m.heap = append(m.heap, i)
		} else if err := c.Error(); err != nil {
			m.err = err
			m.cur = -1
			return false
		}
	}
	for i := len(m.heap)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
	return m.setCur()
}

func (m *mergingIter) setCur() bool {
	if len(m.heap) == 0 {
		m.cur = -1
		return false
	}
	m.cur = m.heap[0]
	return true
}

// SeekGE positions every child at its first entry at or after key (a user
// key), except those whose filters say they hold no entry of key: when
// another child has one, it is the current entry whatever they hold, so
// they stay parked until the next move (unpark), and a seek to a key that
// is present reads the data blocks of the sources that hold it only. A
// seek whose key is in no child seeks them all, as without filters.
//
// Why: after a random load a seek was as slow as reading one data block
// per level (a 10M-key DB ten times the cache: L0 files, L1 and L2, 2.3
// block cache misses per seek); a Get skips those levels by their filters
// and ran 3x faster.
func (m *mergingIter) SeekGE(key []byte) bool {
	if len(m.children) == 1 {
		return m.position(true, func(c base.InternalIterator) bool { return c.SeekGE(key) })
	}
	m.err = nil
	m.clearParked()
	for i, c := range m.children {
		if f := m.ext[i].filter; f != nil && !f.mayHoldUserKey(key) {
			m.parked[i] = true
			m.nParked++
			continue
		}
		c.SeekGE(key)
	}
	ok := m.rebuild(true)
	if m.nParked > 0 && m.err == nil {
		m.deferKey = append(m.deferKey[:0], key...)
		if !ok || !m.cmp.Eq(m.keys[m.cur].UserKey, key) {
			ok = m.unpark()
		}
	}
	if ok && m.onSeek != nil {
		m.chargeSeek()
	}
	return ok
}

// SeekPrefixGE is SeekGE for a seek that wants only keys of prefix, key's
// prefix: the children whose filters say they hold no entry of the prefix
// at or after key stay parked even when no other child holds one (every
// entry they hold at or after key then sorts after the prefix's, so the
// caller's first entry past the prefix ends its seek). The next move
// unparks them, as after SeekGE. (A DB Iterator over one source asks its
// filter itself: see Iterator.seekPrefixGE.)
func (m *mergingIter) SeekPrefixGE(prefix, key []byte) bool {
	m.err = nil
	m.clearParked()
	for i, c := range m.children {
		if m.excludesPrefix(i, prefix, key) {
			m.parked[i] = true
			m.nParked++
			continue
		}
		c.SeekGE(key)
	}
	ok := m.rebuild(true)
	if ok && m.onSeek != nil {
		m.chargeSeek()
	}
	if m.nParked > 0 && m.err == nil {
		m.deferKey = append(m.deferKey[:0], key...)
	}
	return ok
}

// excludesPrefix reports whether child i's filter says it holds no entry
// of prefix at or after key.
func (m *mergingIter) excludesPrefix(i int, prefix, key []byte) bool {
	f := m.ext[i].filter
	return f != nil && !f.mayHoldPrefix(prefix, key)
}

// unpark seeks the parked children to deferKey and rebuilds the heap with
// them (their entries sort after the current one, which stays current).
// It reports whether the iterator is valid.
func (m *mergingIter) unpark() bool {
	for i, p := range m.parked {
		if p {
			m.children[i].SeekGE(m.deferKey)
		}
	}
	m.clearParked()
	return m.rebuild(true)
}

// clearParked forgets parked children ahead of a call that positions
// every child anew.
func (m *mergingIter) clearParked() {
	if m.nParked > 0 {
		clear(m.parked)
		m.nParked = 0
	}
}

func (m *mergingIter) SeekLT(key []byte) bool {
	ok := m.position(false, func(c base.InternalIterator) bool { return c.SeekLT(key) })
	if ok && m.onSeek != nil {
		m.chargeSeek()
	}
	return ok
}

func (m *mergingIter) First() bool {
	return m.position(true, base.InternalIterator.First)
}

func (m *mergingIter) Last() bool {
	return m.position(false, base.InternalIterator.Last)
}

// position applies an absolute positioning call to every child and builds
// the heap for the direction it leaves the iterator in.
func (m *mergingIter) position(forward bool, fn func(base.InternalIterator) bool) bool {
	m.err = nil
	m.clearParked()
	if len(m.children) == 1 {
		return m.single(fn(m.children[0]))
	}
	for _, c := range m.children {
		fn(c)
	}
	return m.rebuild(forward)
}

// single handles the one-child case.
func (m *mergingIter) single(ok bool) bool {
	if ok {
		m.cur = 0
		return true
	}
	m.cur = -1
	m.err = m.children[0].Error()
	return false
}

func (m *mergingIter) Next() bool {
	if m.cur < 0 {
		return false
	}
	if len(m.children) == 1 {
		return m.single(m.children[0].Next())
	}
	if m.nParked > 0 && !m.unpark() {
		return false
	}
	if !m.forward {
		if !m.switchToForward() {
			return false
		}
	}
	c := m.children[m.cur]
	if c.Next() {
		m.keys[m.cur] = c.Key()
		m.down(0)
	} else {
		if err := c.Error(); err != nil {
			m.err, m.cur = err, -1
			return false
		}
		m.pop()
	}
	return m.setCur()
}

func (m *mergingIter) Prev() bool {
	if m.cur < 0 {
		return false
	}
	if len(m.children) == 1 {
		return m.single(m.children[0].Prev())
	}
	if m.forward {
		// switchToReverse seeks every other child, parked ones too.
		m.clearParked()
		if !m.switchToReverse() {
			return false
		}
	}
	c := m.children[m.cur]
	if c.Prev() {
		m.keys[m.cur] = c.Key()
		m.down(0)
	} else {
		if err := c.Error(); err != nil {
			m.err, m.cur = err, -1
			return false
		}
		m.pop()
	}
	return m.setCur()
}

// pop removes the heap's top.
func (m *mergingIter) pop() {
	n := len(m.heap) - 1
	m.heap[0] = m.heap[n]
	m.heap = m.heap[:n]
	if n > 0 {
		m.down(0)
	}
}

// switchToForward re-positions every other child at its first entry after
// the current key, then rebuilds a min-heap; the current child stays.
func (m *mergingIter) switchToForward() bool {
	cur := m.keys[m.cur].Clone()
	for i, c := range m.children {
		if i == m.cur {
			continue
		}
		for ok := c.SeekGE(cur.UserKey); ok && m.cmp.CompareInternal(c.Key(), cur) <= 0; ok = c.Next() {
		}
		if err := c.Error(); err != nil {
			m.err, m.cur = err, -1
			return false
		}
	}
	// The current child is still at cur, now the smallest key of all, so
	// it is the top of the rebuilt heap.
	return m.rebuild(true)
}

// switchToReverse re-positions every other child at its last entry before
// the current key, then rebuilds a max-heap.
func (m *mergingIter) switchToReverse() bool {
	cur := m.keys[m.cur].Clone()
	for i, c := range m.children {
		if i == m.cur {
			continue
		}
		ok := c.SeekGE(cur.UserKey)
		for ok && m.cmp.CompareInternal(c.Key(), cur) < 0 {
			ok = c.Next()
		}
		if err := c.Error(); err != nil {
			m.err, m.cur = err, -1
			return false
		}
		if ok {
			c.Prev()
		} else {
			c.Last()
		}
		if err := c.Error(); err != nil {
			m.err, m.cur = err, -1
			return false
		}
	}
	return m.rebuild(false)
}

func (m *mergingIter) Valid() bool { return m.cur >= 0 }

func (m *mergingIter) Key() base.InternalKey {
	if len(m.children) == 1 {
		return m.children[0].Key()
	}
	return m.keys[m.cur]
}

func (m *mergingIter) Value() []byte { return m.children[m.cur].Value() }

func (m *mergingIter) Error() error { return m.err }

func (m *mergingIter) Close() error {
	var first error
	for _, c := range m.children {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
