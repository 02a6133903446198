package vigil

import (
	"sync"

	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/memtable"
	"github.com/vigildb/vigil/sst"
)

// iterAllocChildren is how many sources (memtables, L0 tables, levels) an
// iterAlloc holds without allocating: the active memtable, one or two
// being flushed, a few L0 tables and the six lower levels. An iterator over
// more sources allocates what does not fit, as before.
const iterAllocChildren = 16

// iterAllocMems and iterAllocL0 bound the memtable and L0 table iterators
// an iterAlloc holds in place; more are allocated.
const (
	iterAllocMems = 3
	iterAllocL0   = 6
)

// iterAlloc is what a DB iterator's merge of its sources is made of, in one
// allocation that Iterator.Close returns to iterAllocPool. Why: a short-lived
// iterator pays for building itself on every use. Measured on a 10M-key DB
// (bench/peers' large scenario, seekrandom: NewIter, one SeekGE, Close), the
// building was 14 % of a seek's CPU, most of it eight to ten small
// allocations (the merging iterator, its four slices, the memtable and level
// iterators, the growing list of children) and the collector's work on them.
//
// The Iterator itself is not part of it: Close must stay safe to call twice
// (the second returns ErrClosed), so the struct a caller holds is never
// reused.
//
// Invariants: an iterAlloc belongs to one Iterator from newIter to its
// Close (or to newIter's failure), and nothing else keeps a pointer into
// it; release clears every reference it holds (to tables, memtables,
// blocks, keys) before it goes back to the pool, so a pooled iterAlloc pins
// nothing. Not safe for concurrent use.
type iterAlloc struct {
	merging  mergingIter
	mems     [iterAllocMems]memtable.Iter
	levels   [manifest.NumLevels - 1]levelIter // L1-L6; L0's tables are l0
	l0       [iterAllocL0]tableIter
	children [iterAllocChildren]base.InternalIterator
	heap     [iterAllocChildren]int
	keys     [iterAllocChildren]base.InternalKey
	parked   [iterAllocChildren]bool
	ext      [iterAllocChildren]childExt
	// nMems and nL0 count the entries of mems and l0 in use (levels are
	// indexed by level).
	nMems, nL0 int
	// seekBuf is the Iterator's seek key buffer (Iterator.ownSeekKey),
	// handed back at Close: bytes only, kept for the next iterator, which
	// then copies its first seek's key without allocating.
	seekBuf []byte
}

var iterAllocPool = sync.Pool{New: func() any { return new(iterAlloc) }}

func newIterAlloc() *iterAlloc { return iterAllocPool.Get().(*iterAlloc) }

// memIter returns an iterator over f's point entries (in place when f is
// a memtable and one of mems is free).
func (a *iterAlloc) memIter(f flushable) base.InternalIterator {
	t, ok := f.(*memtable.MemTable)
	if !ok || a.nMems == len(a.mems) {
		return f.NewIter(memtable.IterOptions{})
	}
	it := &a.mems[a.nMems]
	a.nMems++
	t.InitIter(it, memtable.IterOptions{})
	return it
}

// levelIter returns the iterator over the files of level (L1-L6: each has
// its own slot, and newIter asks for each level once).
func (a *iterAlloc) levelIter(tables *tableCache, files []*manifest.FileMetadata, level int, lower, upper []byte, ro sst.ReadOptions) *levelIter {
	l := &a.levels[level-1]
	l.init(tables, files, level, lower, upper, ro)
	return l
}

// tableIter returns an L0 table's iterator holding h.
func (a *iterAlloc) tableIter(h *tableEntry, f *manifest.FileMetadata, lower, upper []byte, ro sst.ReadOptions) *tableIter {
	var t *tableIter
	if a.nL0 < len(a.l0) {
		t = &a.l0[a.nL0]
		a.nL0++
	} else {
		t = new(tableIter)
	}
	*t = tableIter{InternalIterator: h.reader.NewIterWithOptions(lower, upper, ro), h: h, meta: f, filter: ro.Filter}
	return t
}

// mergingIter returns the merging iterator over children, which is
// a.children[:0] with the sources appended (or its reallocation, past
// iterAllocChildren sources).
func (a *iterAlloc) mergingIter(cmp *base.Comparer, children []base.InternalIterator) *mergingIter {
	if n := len(children); n > iterAllocChildren {
		a.merging.init(cmp, children, make([]int, 0, n), make([]base.InternalKey, n), make([]bool, n), make([]childExt, n))
	} else {
		a.merging.init(cmp, children, a.heap[:0], a.keys[:n], a.parked[:n], a.ext[:n])
	}
	return &a.merging
}

// release clears a and returns it to the pool. The iterators it held must
// be closed already; neither a nor anything in it may be used after.
func (a *iterAlloc) release() {
	a.reset()
	iterAllocPool.Put(a)
}

// reset clears a: every reference it holds, so that a pooled iterAlloc
// keeps nothing reachable.
func (a *iterAlloc) reset() {
	clear(a.mems[:a.nMems])
	clear(a.levels[:])
	clear(a.l0[:a.nL0])
	clear(a.children[:])
	clear(a.heap[:])
	clear(a.keys[:])
	clear(a.parked[:])
	clear(a.ext[:])
	a.merging = mergingIter{deferKey: a.merging.deferKey[:0]} // bytes only: kept for the next seek that parks
	a.nMems, a.nL0 = 0, 0
}
