package sst

import (
	"sync"
	"sync/atomic"

	"github.com/vigildb/vigil/internal/manual"
)

// metaAlloc allocates what an open table keeps for its whole life outside
// the Go heap: its index and filter blocks.
//
// Why: a DB's open tables keep these as long as they stay open, some 16 MB
// for a 10M-key DB (filters of 10 bits a key, an index entry per 4 KiB data
// block). On the Go heap they were most of what was live, and the collector
// lets the heap grow to twice what is live, so they cost twice their size
// in RSS; outside it they cost their size. They hold no Go pointers.
//
// One slab allocator for the process: tables come and go by the hundred in
// a fill (every flush and compaction output is opened), and a slab reuses
// its chunks' slots instead of mapping and unmapping memory per table
// (mmap and munmap take the kernel's mapping lock for writing; see package
// manual's spares). Blocks above manual.MaxSlabSize (the filters, and
// indexes, of the largest tables) get mappings of their own. A freed
// slot's whole pages go back to the OS at once (a dropping allocator):
// index and filter sizes follow their tables', so the slots spread over
// dozens of size classes, and the free ones kept the pages of tables long
// closed (the allocator maps 70-90 MiB for 15 MiB in use after a 10M-key
// fill). The allocator still maps more than the open tables use, but that
// costs address space, not memory (TableMemory reports both).
var metaAlloc = manual.NewDroppingAllocator()

// TableMemory returns the memory outside the Go heap that the open tables
// of every DB in the process keep for their index and filter blocks
// (inUse; Reader.MetaMemory is one table's part) and what the allocator
// behind them has mapped (inUse plus its free slots and spare chunks).
func TableMemory() (inUse, mapped int64) {
	st := metaAlloc.Stats()
	return st.InUse, st.Mapped
}

// metaAllocated counts the bytes ever requested from metaAlloc, so that the
// tests bounding what Open allocates for what it reads count this memory
// with the Go heap's.
var metaAllocated atomic.Uint64

// allocMeta is metaAlloc.Alloc, counted in metaAllocated.
func allocMeta(n int) manual.Buf {
	metaAllocated.Add(uint64(n))
	return metaAlloc.Alloc(n)
}

// tableMem owns the metaAlloc buffers behind one table's tableMeta, and
// frees them once: at Reader.Close, when Open fails, or when a Verify is
// done with the metadata it read again.
//
// Invariant: nothing reads a slice of these buffers after free; the
// Reader's contract (Close after every call and iterator is done) and
// copies of what outlives it (Layout's keys) ensure that. Invariants builds
// make freed slots inaccessible, so a use after free faults in tests.
//
// Concurrency: alloc is called by the one goroutine reading the metadata,
// before the Reader is shared; free is safe to call concurrently and more
// than once.
type tableMem struct {
	bufs []manual.Buf // nil once freed
	once sync.Once
}

// alloc returns a buffer of n bytes owned by m (contents unspecified).
func (m *tableMem) alloc(n int) []byte {
	b := allocMeta(n)
	m.keep(b)
	return b.Bytes()
}

// keep makes m the owner of b.
func (m *tableMem) keep(b manual.Buf) { m.bufs = append(m.bufs, b) }

// size returns the memory of m's buffers (their slots); 0 once freed.
func (m *tableMem) size() int64 {
	var n int64
	for _, b := range m.bufs {
		n += int64(b.Size())
	}
	return n
}

// free frees m's buffers, once; a nil m has none.
func (m *tableMem) free() {
	if m == nil {
		return
	}
	m.once.Do(func() {
		for _, b := range m.bufs {
			b.Free()
		}
		m.bufs = nil
	})
}
