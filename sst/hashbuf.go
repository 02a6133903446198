package sst

import "github.com/vigildb/vigil/internal/manual"

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
// and munmap per doubling).
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
	s := manual.AllocSlice[uint64](max(2*cap(h.s), minHashCap))[:len(h.s)]
	copy(s, h.s)
	h.release()
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

// release unmaps the buffer; the hashBuf is empty and reusable after. It
// accepts nil.
func (h *hashBuf) release() {
	if h == nil {
		return
	}
	manual.FreeSlice(h.s)
	h.s = nil
}
