package vigil

import (
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/sst"
)

// levelIter iterates over the files of one sorted level (L1..L6) as if they
// were one table, opening each file through the table cache only when the
// iteration reaches it. Files outside [lower, upper) are skipped.
//
// Lookback (see base.InternalIterator): when Prev leaves a file, the file's
// iterator stays open (left) until the next positioning call, so the entry
// Prev stepped from stays readable.
//
// Not safe for concurrent use.
type levelIter struct {
	tables       *tableCache
	files        []*manifest.FileMetadata
	lower, upper []byte
	ro           sst.ReadOptions
	idx          int // index of the open file, -1 if none
	level        int // the level of files (for positionedTable)
	h            *tableEntry
	iter         base.InternalIterator
	// ti is iter as the table iterator it usually is (nil if it is
	// another, such as a table a prefix filter excludes): the steps call
	// it without the interface (see sst.Iter).
	ti  *sst.Iter
	err error
	// left and leftH are the file Prev left (see Lookback), or nil.
	left  base.InternalIterator
	leftH *tableEntry
}

func newLevelIter(tables *tableCache, files []*manifest.FileMetadata, lower, upper []byte, ro sst.ReadOptions) *levelIter {
	l := new(levelIter)
	l.init(tables, files, 0, lower, upper, ro)
	return l
}

// init makes l an iterator over files, the files of level, positioned
// nowhere; whatever l held before is overwritten (see iterAlloc).
func (l *levelIter) init(tables *tableCache, files []*manifest.FileMetadata, level int, lower, upper []byte, ro sst.ReadOptions) {
	*l = levelIter{tables: tables, files: files, level: level, lower: lower, upper: upper, ro: ro, idx: -1}
}

// inBounds reports whether file i may hold keys within the iterator bounds.
func (l *levelIter) inBounds(i int) bool {
	f := l.files[i]
	if l.upper != nil && l.tables.cmp.Cmp(f.Smallest.UserKey, l.upper) >= 0 {
		return false
	}
	if l.lower != nil {
		c := l.tables.cmp.Cmp(f.Largest.UserKey, l.lower)
		if c < 0 || (c == 0 && f.LargestIsExclusive()) {
			return false
		}
	}
	return true
}

// open switches to file i (closing the current one). It reports false and
// sets err on failure.
func (l *levelIter) open(i int) bool {
	if l.idx == i && l.iter != nil {
		return true
	}
	l.closeFile()
	h, err := l.tables.get(l.files[i])
	if err != nil {
		l.err = err
		return false
	}
	l.h, l.idx = h, i
	l.iter = h.reader.NewIterWithOptions(l.lower, l.upper, l.ro)
	l.ti, _ = l.iter.(*sst.Iter)
	return true
}

// leaveFile moves the open file to left (closing the one left before),
// leaving none open.
func (l *levelIter) leaveFile() {
	l.closeLeft()
	l.left, l.leftH = l.iter, l.h
	l.iter, l.ti, l.h, l.idx = nil, nil, nil, -1
}

// closeLeft closes the file Prev left, if any. (Every step calls it: the
// test inlines.)
func (l *levelIter) closeLeft() {
	if l.left != nil {
		l.closeTable(l.left, l.leftH)
		l.left, l.leftH = nil, nil
	}
}

// closeFile closes the open file, if any.
func (l *levelIter) closeFile() {
	l.closeTable(l.iter, l.h)
	l.iter, l.ti, l.h, l.idx = nil, nil, nil, -1
}

// closeTable closes a file's iterator (keeping the first error in err)
// and releases its table cache entry; either may be nil.
func (l *levelIter) closeTable(it base.InternalIterator, h *tableEntry) {
	if it != nil {
		if err := it.Close(); err != nil && l.err == nil {
			l.err = err
		}
	}
	if h != nil {
		h.release()
	}
}

// forwardFrom positions at the first entry of file i or a later one.
func (l *levelIter) forwardFrom(i int, seek func(base.InternalIterator) bool) bool {
	for ; i < len(l.files); i++ {
		if !l.inBounds(i) {
			if l.upper != nil && l.tables.cmp.Cmp(l.files[i].Smallest.UserKey, l.upper) >= 0 {
				break
			}
			continue
		}
		if !l.open(i) {
			return false
		}
		if seek(l.iter) {
			return true
		}
		if err := l.iter.Error(); err != nil {
			l.err = err
			return false
		}
		seek = base.InternalIterator.First
	}
	l.closeFile()
	return false
}

// backwardFrom positions at the last entry of file i or an earlier one.
func (l *levelIter) backwardFrom(i int, seek func(base.InternalIterator) bool) bool {
	for ; i >= 0; i-- {
		if !l.inBounds(i) {
			if l.lower != nil {
				c := l.tables.cmp.Cmp(l.files[i].Largest.UserKey, l.lower)
				if c < 0 || (c == 0 && l.files[i].LargestIsExclusive()) {
					break
				}
			}
			continue
		}
		if !l.open(i) {
			return false
		}
		if seek(l.iter) {
			return true
		}
		if err := l.iter.Error(); err != nil {
			l.err = err
			return false
		}
		seek = base.InternalIterator.Last
	}
	l.closeFile()
	return false
}

// positionedTable returns the file the iterator has open, nil if none
// (see mergingIter.chargeSeek, which asks only children in its heap: valid,
// so positioned in that file; a parked child may have a file open that
// mayHoldUserKey opened without positioning in it).
func (l *levelIter) positionedTable() (*manifest.FileMetadata, int) {
	if l.iter == nil || l.idx < 0 {
		return nil, l.level
	}
	return l.files[l.idx], l.level
}

// mayHoldUserKey reports whether the level may hold an entry of userKey:
// the one file that can (manifest.FindFile) covers it and its filter may
// contain it (or it has none). A table that cannot be opened answers yes,
// so that the SeekGE that follows reports the error. It opens that file
// (SeekGE then reuses it). See mergingIter.SeekGE.
func (l *levelIter) mayHoldUserKey(userKey []byte) bool {
	i := manifest.FindFile(l.tables.cmp, l.files, userKey)
	if i == len(l.files) || l.tables.cmp.Cmp(l.files[i].Smallest.UserKey, userKey) > 0 {
		return false
	}
	if !l.open(i) {
		l.err = nil
		return true
	}
	return l.h.reader.MayContain(userKey)
}

// mayHoldPrefix reports whether the level may hold an entry at or after
// key (a key of prefix) with that prefix: only the file that can hold key
// can, unless the prefix's keys run on past its end (then it cannot say
// no), and only if its prefix filter may hold prefix. See
// mergingIter.SeekPrefixGE.
func (l *levelIter) mayHoldPrefix(prefix, key []byte) bool {
	c := l.tables.cmp
	i := manifest.FindFile(c, l.files, key)
	if i == len(l.files) {
		return false
	}
	if c.Eq(c.Prefix(l.files[i].Largest.UserKey), prefix) {
		return true // the prefix may go on in the next file
	}
	if c.Cmp(c.Prefix(l.files[i].Smallest.UserKey), prefix) > 0 {
		return false // the file starts past the prefix
	}
	if !l.open(i) {
		l.err = nil
		return true
	}
	return l.h.reader.MayContainPrefixCounted(prefix, l.ro.Filter)
}

func (l *levelIter) SeekGE(key []byte) bool {
	l.closeLeft()
	l.err = nil
	return l.forwardFrom(manifest.FindFile(l.tables.cmp, l.files, key), func(it base.InternalIterator) bool { return it.SeekGE(key) })
}

func (l *levelIter) SeekLT(key []byte) bool {
	l.closeLeft()
	l.err = nil
	// The last file whose smallest key is < key.
	i := manifest.FindFile(l.tables.cmp, l.files, key)
	if i == len(l.files) || l.tables.cmp.Cmp(l.files[i].Smallest.UserKey, key) >= 0 {
		i--
	}
	return l.backwardFrom(i, func(it base.InternalIterator) bool { return it.SeekLT(key) })
}

func (l *levelIter) First() bool {
	l.closeLeft()
	l.err = nil
	return l.forwardFrom(0, base.InternalIterator.First)
}

func (l *levelIter) Last() bool {
	l.closeLeft()
	l.err = nil
	return l.backwardFrom(len(l.files)-1, base.InternalIterator.Last)
}

func (l *levelIter) Next() bool {
	l.closeLeft()
	if l.iter == nil {
		return false
	}
	if l.ti != nil {
		if l.ti.Next() {
			return true
		}
	} else if l.iter.Next() {
		return true
	}
	if err := l.iter.Error(); err != nil {
		l.err = err
		return false
	}
	return l.forwardFrom(l.idx+1, base.InternalIterator.First)
}

func (l *levelIter) Prev() bool {
	l.closeLeft()
	if l.iter == nil {
		return false
	}
	if l.ti != nil {
		if l.ti.Prev() {
			return true
		}
	} else if l.iter.Prev() {
		return true
	}
	if err := l.iter.Error(); err != nil {
		l.err = err
		return false
	}
	i := l.idx - 1
	l.leaveFile()
	return l.backwardFrom(i, base.InternalIterator.Last)
}

func (l *levelIter) Valid() bool { return l.iter != nil && l.iter.Valid() }

func (l *levelIter) Key() base.InternalKey {
	if l.ti != nil {
		return l.ti.Key()
	}
	return l.iter.Key()
}

func (l *levelIter) Value() []byte {
	if l.ti != nil {
		return l.ti.Value()
	}
	return l.iter.Value()
}

func (l *levelIter) Error() error { return l.err }

func (l *levelIter) Close() error {
	l.closeLeft()
	l.closeFile()
	return l.err
}
