package sst

import (
	"sync"

	"github.com/vigildb/vigil/internal/invariants"
	"github.com/vigildb/vigil/internal/manual"
)

// hashBuf is a table writer's list of filter hashes (8 bytes per distinct
// user key), kept outside the Go heap.
//
// Why: a flush of a 64 MiB memtable collects some 4 MB of hashes, grown by
// doubling, while the next memtable fills: the moment of the DB's peak
// memory. On the Go heap they raised the collector's goal by twice their
// size and were a third of what a random fill allocated (62 of 144 MB),
// which drove collections whose mark phases take a processor from the
// foreground writes. Here each doubling takes a new buffer from package
// manual and frees the old one at once, and release frees the last, so the
// memory is returned the moment the filter is built (on Linux, manual
// keeps freed ranges below 4 MiB for reuse, their pages dropped: no mmap
// and munmap per doubling). The one exception is the spare: release keeps
// one buffer of at most maxSpareHashes, pages and all, for the next writer
// (see spareHashes).
//
// A hashBuf belongs to one writer (no concurrency, but for the writer's
// cleanup, which runs only once the writer is unreachable); the zero value
// is empty and ready. s's capacity is the mapped buffer (manual.AllocSlice).
type hashBuf struct {
	s []uint64
}

// minHashCap is the first buffer's capacity in hashes (32 KiB): small
// tables map one page range and no more.
const minHashCap = 4096

// add appends one hash.
func (h *hashBuf) add(v uint64) {
	if len(h.s) == cap(h.s) {
		h.grow()
	}
	h.s = append(h.s, v) // within capacity: never reallocates onto the heap
}

func (h *hashBuf) grow() {
	if cap(h.s) == 0 {
		if s := takeSpareHashes(); s != nil {
			h.s = s
			return
		}
	}
	s := manual.AllocSlice[uint64](max(2*cap(h.s), minHashCap))[:len(h.s)]
	copy(s, h.s)
	manual.FreeSlice(h.s) // not to the spare: a table growing past it wants larger ones
	h.s = s
}

// hashes returns the hashes added so far; valid until the next add or
// release. A nil hashBuf (a writer without a filter) has none.
func (h *hashBuf) hashes() []uint64 {
	if h == nil {
		return nil
	}
	return h.s
}

// len returns the number of hashes added; 0 for a nil hashBuf.
func (h *hashBuf) len() int { return len(h.hashes()) }

// release gives the buffer up (as the spare, or unmapped); the hashBuf is
// empty and reusable after. It accepts nil.
func (h *hashBuf) release() {
	if h == nil {
		return
	}
	putSpareHashes(h.s)
	h.s = nil
}

// maxSpareHashes is the largest buffer kept as the spare, in bytes: what
// a compaction output of some 64K distinct keys fills, and no more, so
// that the spare a flush's larger buffer would be does not stay resident.
const maxSpareHashes = 512 << 10

// spareHashes is one freed buffer kept mapped, pages and all, for the
// next writer. A compaction writes its outputs one after another; without
// it, each output faulted in a fresh buffer (manual drops the pages of a
// freed range) and copied it at every doubling: on a 2-core VM, where a
// first touch costs several microseconds, that was 5 % of a busy read
// phase's CPU (seekrandom during the compactions after a 10M-key fill).
//
// It is here, not in manual's spares, because a hash list is written
// before it is read and needs no zeroing: manual.Alloc promises zeroed
// memory, so a range kept with its pages would have to be cleared on each
// reuse, and WAL blocks and other small buffers would share its budget.
//
// Invariants builds keep no spare: a freed buffer goes back to manual,
// which poisons it and makes it fault, so a use after release is caught.
var spareHashes struct {
	mu sync.Mutex
	s  []uint64
}

// takeSpareHashes returns the spare buffer, emptied, or nil.
func takeSpareHashes() []uint64 {
	spareHashes.mu.Lock()
	s := spareHashes.s
	spareHashes.s = nil
	spareHashes.mu.Unlock()
	return s[:0]
}

// putSpareHashes keeps s as the spare if it is small enough and larger
// than the spare it would replace (never in invariants builds), and frees
// what it does not keep.
func putSpareHashes(s []uint64) {
	if cap(s) == 0 {
		return
	}
	if cap(s)*8 <= maxSpareHashes && !invariants.Enabled {
		spareHashes.mu.Lock()
		if cap(s) > cap(spareHashes.s) {
			s, spareHashes.s = spareHashes.s, s
		}
		spareHashes.mu.Unlock()
	}
	manual.FreeSlice(s)
}
