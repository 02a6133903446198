package manual

import (
	"sync"
	"unsafe"

	"github.com/vigildb/vigil/internal/bgsys"
)

// AheadStep is the granularity of FaultAhead: a transparent huge page.
// The first write into a fresh 2 MiB huge page makes the kernel allocate
// and zero all of it, which on a virtual machine whose host backs guest
// memory on first touch takes milliseconds (4–5 ms measured on this
// project's 2-core benchmark machines), once per 2 MiB of memtable, on
// whatever goroutine writes first.
const AheadStep = 2 << 20

// AheadLead is how far before the end of a huge page FaultAhead asks for
// the next one: 512 KiB of memtable is some 3,600 db_bench-sized random
// Puts (about 10 ms at their rate here; a sequential fill is ~3× faster),
// against 0.3 ms for the populate on an idle machine and up to 5 ms while
// a flush competes for the processors. Half a page, the first choice,
// cost 3 MiB of peak RSS in kvbench fillrandom (2M keys, 64 MiB buffers):
// the next page was resident early half of the time, for each arena.
const AheadLead = AheadStep / 4

// FaultAhead faults the pages of a buffer from Alloc in ahead of their
// first use, on a goroutine of its own, so that the writer filling the
// buffer from its start (a memtable arena) does not stall in the kernel
// each time it crosses into a new huge page: without it, a random fill of
// 2M keys had a 4 ms write every 14,500 Puts, and its slowest write was
// that page fault more often than anything else.
//
// Use: the filler calls Reached with how far it has filled; FaultAhead
// asks for the next huge page once the filler is within AheadLead of the
// current one's end, so at most one page beyond the fill point is
// resident early (2 MiB per buffer being filled, a quarter of the time),
// and the filler has AheadLead of writes to do before it needs the next
// one. The faulting is a hint:
// a request the worker cannot take at once is dropped, and the filler
// faults that page itself, as without FaultAhead.
//
// Pages are populated with madvise(MADV_POPULATE_WRITE) (Linux 5.14),
// which faults them in writable without writing to them: the buffer's
// contents are not touched, so the worker never races with the filler.
// Where that is unavailable (other systems, older kernels, a Go heap
// fallback buffer) FaultAhead does nothing.
//
// Concurrency: Reached is called by one filler at a time (the arena's
// growth hook serializes it); Stop may be called from any goroutine, once,
// before the buffer is freed, and waits for a populate of this buffer in
// progress, so that no madvise ever reaches memory that was unmapped (and
// perhaps mapped again for something else).
type FaultAhead struct {
	buf []byte
	// requested is the end of what was asked for so far (an offset in buf);
	// NewFaultAhead sets it before f is shared, then only Reached.
	requested int

	mu      sync.Mutex // held across a populate; Stop takes it
	stopped bool
}

// NewFaultAhead returns a FaultAhead for buf, which must be a whole buffer
// from Alloc, and asks for its first page at once. It returns nil (on
// which Stop does nothing) where populating is not supported or buf is too
// small to need it.
func NewFaultAhead(buf []byte) *FaultAhead {
	if len(buf) < hugeMin || !populateSupported() || !mapped.contains(uintptr(unsafe.Pointer(&buf[0]))) {
		return nil
	}
	f := &FaultAhead{buf: buf}
	f.request(f.pageEnd(0))
	return f
}

// Reached tells f that the buffer is used up to offset used, and returns
// the offset at which it wants to be told again. Once used is within
// AheadLead of a huge page's end, f asks for the next one.
func (f *FaultAhead) Reached(used int) (next int) {
	end := f.pageEnd(used)
	if at := end - AheadLead; used < at {
		return at
	}
	if end < len(f.buf) {
		f.request(f.pageEnd(end))
	}
	return end + AheadStep - AheadLead
}

// pageEnd returns the offset in buf where the huge page holding offset off
// ends (huge pages are aligned in the address space, not in buf), capped
// at len(buf).
func (f *FaultAhead) pageEnd(off int) int {
	addr := uintptr(unsafe.Pointer(&f.buf[0])) + uintptr(off)
	end := int((addr | (AheadStep - 1)) + 1 - uintptr(unsafe.Pointer(&f.buf[0]))) // first byte of the next page
	return min(end, len(f.buf))
}

// request asks the worker to populate [f.requested, end).
func (f *FaultAhead) request(end int) {
	if end <= f.requested {
		return
	}
	r := aheadRequest{f: f, from: f.requested, to: end}
	f.requested = end
	startAheadWorker()
	select {
	case aheadQueue <- r:
	default: // the worker is behind: the filler will fault the page itself
	}
}

// Stop ends f's requests; queued ones are dropped. It waits for a
// populate in progress, so that the buffer can be freed once it returns.
func (f *FaultAhead) Stop() {
	if f == nil {
		return
	}
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
}

type aheadRequest struct {
	f        *FaultAhead
	from, to int
}

var (
	aheadOnce  sync.Once
	aheadQueue chan aheadRequest
)

// startAheadWorker starts the one goroutine that populates pages for every
// FaultAhead of the process. One is enough: a request is one 2 MiB page,
// and a DB fills one memtable at a time.
func startAheadWorker() {
	aheadOnce.Do(func() {
		aheadQueue = make(chan aheadRequest, 16)
		go func() {
			for r := range aheadQueue {
				// Populating a huge page is a system call of 0.3-5 ms
				// (see package bgsys). The gate first, then mu: Stop
				// must never wait for the gate.
				_ = bgsys.Do(func() error {
					r.f.mu.Lock()
					if !r.f.stopped {
						populate(r.f.buf[r.from:r.to])
					}
					r.f.mu.Unlock()
					return nil
				})
			}
		}()
	})
}
