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

// FaultAhead gets the pages of a buffer from Alloc ready ahead of their
// first use, on a goroutine of its own, so that the writer filling the
// buffer from its start (a memtable arena) does not stall in the kernel
// each time it crosses into a new huge page: without it, a random fill of
// 2M keys had a 4 ms write every 14,500 Puts, and its slowest write was
// that page fault more often than anything else.
//
// A page is made ready one of two ways. If a freed arena left resident
// pages (see warm and FreeFilled), one of them is moved in, zeroed: no
// fault at all. Otherwise the page is populated with
// madvise(MADV_POPULATE_WRITE) (Linux 5.14), which faults it in writable
// without writing to it.
//
// The buffer's user must not touch a byte past Ready until Need says so,
// because a move replaces the pages there: the memtable's arena enforces
// that (skiplist.Arena.OnLimit), calling Need when an allocation would end
// past the limit, and FaultAhead raises that limit (the raise function
// given to NewFaultAhead) as it makes pages ready.
//
// Use: the filler calls Reached with how far it has filled; FaultAhead
// asks for the next huge page once the filler is within AheadLead of the
// current one's end, so at most one page beyond the fill point is
// resident early (2 MiB per buffer being filled, a quarter of the time),
// and the filler has AheadLead of writes to do before it needs the next
// one. A request the worker cannot take at once is dropped; the filler
// then gets to the limit first and Need makes the page ready on its own
// goroutine (a warm page moved in, or else none: the filler faults it in
// itself, as without FaultAhead).
//
// Where populating is unavailable (other systems, older kernels, a Go
// heap fallback buffer) NewFaultAhead returns nil and there is no limit.
//
// Concurrency: Reached is called by one filler at a time (the arena's
// growth hook serializes it), Need likewise (the arena's limit hook);
// Stop may be called from any goroutine, once, before the buffer is
// freed, and waits for a page being made ready, so that no madvise or
// move ever reaches memory that was unmapped (and perhaps mapped again
// for something else).
type FaultAhead struct {
	buf   []byte
	raise func(limit int)
	// requested is the end of what was asked for so far (an offset in buf);
	// only Reached uses it.
	requested int

	mu      sync.Mutex // held while pages are made ready; Stop takes it
	stopped bool
	// ready is the end of the pages made ready (or left to fault): buf's
	// user may use buf[:ready]. Under mu.
	ready int
}

// NewFaultAhead returns a FaultAhead for buf, which must be a whole buffer
// from Alloc, and asks for its first page at once. raise is called with
// the new end each time pages are made ready (see Ready). It returns nil
// (on which Stop does nothing) where populating is not supported or buf is
// too small to need it.
func NewFaultAhead(buf []byte, raise func(limit int)) *FaultAhead {
	if len(buf) < hugeMin || !populateSupported() || !mapped.contains(uintptr(unsafe.Pointer(&buf[0]))) {
		return nil
	}
	f := &FaultAhead{buf: buf, raise: raise}
	f.request(f.pageEnd(0))
	return f
}

// Ready returns how much of the buffer its user may use without calling
// Need.
func (f *FaultAhead) Ready() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready
}

// Need makes the buffer ready up to at least need, on the caller's
// goroutine (waiting for the worker if it is at it), and returns the new
// end of the ready part. A page it leaves to fault in is one the caller's
// allocation writes into, so every page below the ready end is resident
// by the time the buffer is freed (what FreeFilled keeps).
func (f *FaultAhead) Need(need int) (ready int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prepare(need, false)
	return f.ready
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

// prepare makes the pages up to the one holding offset to-1 ready, in
// order: each a warm page moved in if one is kept and the page is whole,
// else populated (populate) or left for the filler to fault in. f.mu is
// held.
func (f *FaultAhead) prepare(to int, populating bool) {
	if f.stopped {
		return
	}
	for f.ready < min(to, len(f.buf)) {
		end := f.pageEnd(f.ready)
		page := f.buf[f.ready:end]
		if len(page) < AheadStep || !takeWarm(page) {
			if populating {
				populate(page)
			}
		}
		f.ready = end
		f.raise(end)
	}
}

// request asks the worker to make [f.requested, end) ready.
func (f *FaultAhead) request(end int) {
	if end <= f.requested {
		return
	}
	r := aheadRequest{f: f, to: end}
	f.requested = end
	startAheadWorker()
	select {
	case aheadQueue <- r:
	default: // the worker is behind: Need makes the page ready when due
	}
}

// Stop ends f's requests; queued ones are dropped. It waits for a page
// being made ready, so that the buffer can be freed once it returns, and
// returns how much of the buffer was made ready (for FreeFilled: its
// user used no more).
func (f *FaultAhead) Stop() (ready int) {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	return f.ready
}

type aheadRequest struct {
	f  *FaultAhead
	to int
}

var (
	aheadOnce  sync.Once
	aheadQueue chan aheadRequest
)

// startAheadWorker starts the one goroutine that makes pages ready for
// every FaultAhead of the process. One is enough: a request is one 2 MiB
// page, and a DB fills one memtable at a time.
func startAheadWorker() {
	aheadOnce.Do(func() {
		aheadQueue = make(chan aheadRequest, 16)
		go func() {
			for r := range aheadQueue {
				// Populating a huge page is a system call of 0.3-20 ms
				// (see package bgsys). The gate first, then mu: Stop
				// and Need must never wait for the gate.
				_ = bgsys.Do(func() error {
					r.f.mu.Lock()
					r.f.prepare(r.to, true)
					r.f.mu.Unlock()
					return nil
				})
			}
		}()
	})
}
