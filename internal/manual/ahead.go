package manual

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// AheadStep is the granularity of FaultAhead: a transparent huge page.
// The first write into a fresh 2 MiB huge page makes the kernel allocate
// and zero all of it, which on a virtual machine whose host backs guest
// memory on first touch takes milliseconds (4–22 ms measured on this
// project's 2-core benchmark machines), once per 2 MiB of memtable, on
// whatever goroutine writes first.
const AheadStep = 2 << 20

// How far ahead of the fill point FaultAhead asks for pages (see
// Reached and pagesAhead):
//
//   - While a freed arena's pages are kept (see warm): the next page, as
//     the fill point enters a page. Moving one in takes some 85 µs and adds
//     nothing to the process's memory (the page is resident either way).
//   - While none is kept, by how long the worker took to fault in its
//     last page (populate) against how long the filler took to fill its
//     last one. Twice the first under a quarter of the second (the host
//     backs memory at once, or the fill is slow): the next page, once the
//     fill point is AheadLead from the current page's end. Under the
//     whole of it: the next page, as the fill point enters a page. Over
//     it: coldAhead pages. A fresh page takes 15-26 ms to fault in on the
//     project's benchmark VM, about as long as a random fill of
//     db_bench-sized entries takes to fill one, so one page of lead is
//     used up by any delay of the worker's.
//
// A page asked for earlier than needed is only resident sooner, and
// unused when the fill stops: with coldAhead pages always, bench/peers'
// memtable scenario (one arena, filled in a process started just after
// another freed its memory, so populates were fast) peaked 5-7 MiB
// higher. Measured on that VM (10M-key fillrandom, whose first seconds
// fill arenas before a flush has freed any): a quarter page ahead, as an
// earlier version asked always, the writer waited 9-19 ms for most fresh
// pages; a page ahead (with the worker's pages made ready one at a time,
// see work), 3-17 ms for one in six; two, the slowest write of four fills
// was 6.5, 8.0, 22.2 and 8.0 ms, against 20.6-29.1 ms before.
const (
	coldAhead = 2
	AheadLead = AheadStep / 4
)

// populateNanos is how long the worker's last populate took.
var populateNanos atomic.Int64

// pagesAhead returns how many pages past the current one to ask for now
// (0: none until the fill point is AheadLead from its end), for a filler
// that took fillNanos to fill its last page (0 if unknown); see
// coldAhead.
func pagesAhead(fillNanos int64) int {
	if warmKept() {
		return 1
	}
	need := 2 * populateNanos.Load()
	switch {
	case need <= fillNanos/4:
		return 0
	case need <= fillNanos:
		return 1
	}
	return coldAhead
}

// FaultAhead gets the pages of a buffer from Alloc ready ahead of their
// first use, on a goroutine of its own, so that the writer filling the
// buffer from its start (a memtable arena) does not stall in the kernel
// each time it crosses into a new huge page: without it, a random fill of
// 2M keys had a 4 ms write every 14,500 Puts, and its slowest write was
// that page fault more often than anything else.
//
// A page is made ready one of two ways. If a freed arena left resident
// pages (see warm and FreeFilled), one of them is moved in, zeroed: no
// fault at all. Otherwise the worker faults it in (populate), touching
// each 4 KiB page without changing it.
//
// The buffer's user must not touch a byte past Ready until Need says so,
// because a move replaces the pages there: the memtable's arena enforces
// that (skiplist.Arena.OnLimit), calling Need when an allocation would end
// past the limit, and FaultAhead raises that limit (the raise function
// given to NewFaultAhead) as it makes pages ready.
//
// Use: the filler calls Reached with how far it has filled, and
// FaultAhead asks its worker for the pages ahead (how far: see
// coldAhead). A request the worker cannot take at once is dropped; the
// filler then gets to the limit first and Need makes the page ready on
// its own goroutine (a warm page moved in, or else none: the filler
// faults it in itself, as without FaultAhead).
//
// Where populating is not done (other systems, a Go heap fallback
// buffer) NewFaultAhead returns nil and there is no limit.
//
// Concurrency: Reached is called by one filler at a time (the arena's
// growth hook serializes it), Need likewise (the arena's limit hook);
// Stop may be called from any goroutine, once, before the buffer is
// freed, and waits for a page being made ready, so that no fault or
// move ever reaches memory that was unmapped (and perhaps mapped again
// for something else). The worker makes a page ready outside mu, with
// busy set; no one else touches that page meanwhile (Need and Stop wait
// for busy to clear, and the filler stays below ready).
type FaultAhead struct {
	buf   []byte
	raise func(limit int)
	// requested is the end of what was asked for so far (an offset in buf);
	// only Reached uses it.
	requested int
	// pageAt is the end of the page Reached last saw the fill point in,
	// pageStart when it first did (Unix ns), lastFill how long the page
	// before took (0 if unknown); only Reached uses them.
	pageAt              int
	pageStart, lastFill int64

	mu      sync.Mutex
	changed sync.Cond // on mu: the worker finished a page
	stopped bool
	// ready is the end of the pages made ready (or left to fault): buf's
	// user may use buf[:ready]. Under mu.
	ready int
	// busy is set while the worker makes the page at ready ready, outside
	// mu: Need and Stop wait for it (changed). Under mu.
	busy bool
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
	f.changed.L = &f.mu
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
	for f.busy && f.ready < need {
		f.changed.Wait()
	}
	f.prepare(need)
	return f.ready
}

// Reached tells f that the buffer is used up to offset used, and returns
// the offset at which it wants to be told again (the next page's start,
// or AheadLead before the current page's end). It asks for the pages
// ahead (see coldAhead), and with the buffer's last page, for a spare
// page for the next buffer (makeSpare: the worker makes it after the last
// page, a page's fill or more before the buffer is full).
func (f *FaultAhead) Reached(used int) (next int) {
	end := f.pageEnd(used)
	if end != f.pageAt { // the fill point entered a page
		now := time.Now().UnixNano()
		if f.pageStart != 0 {
			f.lastFill = now - f.pageStart
		}
		f.pageAt, f.pageStart = end, now
	}
	pages := pagesAhead(f.lastFill)
	if pages == 0 {
		if at := end - AheadLead; used < at {
			return at
		}
		pages = 1
	}
	to := end
	for range pages {
		if to < len(f.buf) {
			to = f.pageEnd(to)
		}
	}
	if to > f.requested {
		queued := f.request(to)
		if to == len(f.buf) {
			queued = requestSpare() || queued
		}
		// Not while the fill point is in the first page: the buffer's
		// first allocations (a memtable's skiplist heads) are made as
		// the memtable is, under the DB's locks, and would hold them
		// through the yield.
		if queued && used >= f.pageEnd(0) {
			yieldToWorker()
		}
	}
	return end
}

// pageEnd returns the offset in buf where the huge page holding offset off
// ends (huge pages are aligned in the address space, not in buf), capped
// at len(buf).
func (f *FaultAhead) pageEnd(off int) int {
	addr := uintptr(unsafe.Pointer(&f.buf[0])) + uintptr(off)
	end := int((addr | (AheadStep - 1)) + 1 - uintptr(unsafe.Pointer(&f.buf[0]))) // first byte of the next page
	return min(end, len(f.buf))
}

// prepare is Need's part: it makes the pages up to the one holding
// offset to-1 ready on the caller's goroutine, in order, each a warm page
// moved in if one is kept and the page is whole (takeWarm), else left for
// the filler to fault in. f.mu is held, and the worker is not busy.
func (f *FaultAhead) prepare(to int) {
	if f.stopped {
		return
	}
	for f.ready < min(to, len(f.buf)) {
		end := f.pageEnd(f.ready)
		takeWarm(f.buf[f.ready:end])
		f.ready = end
		f.raise(end)
	}
}

// work is the worker's part of a request: it makes the pages up to the
// one holding offset to-1 ready, one at a time and outside mu (busy), so
// that a Need waits for the page being made ready, never for the ones
// after it. (With mu held over a request, the writer of a 10M-key fill
// waited 27-33 ms for two fresh pages where it needed one.)
func (f *FaultAhead) work(to int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for !f.stopped && f.ready < min(to, len(f.buf)) {
		end := f.pageEnd(f.ready)
		page := f.buf[f.ready:end]
		f.busy = true
		f.mu.Unlock()
		if !takeWarm(page) {
			start := time.Now()
			populatePage(page)
			populateNanos.Store(int64(time.Since(start)))
		}
		f.mu.Lock()
		f.busy = false
		f.ready = end
		f.raise(end)
		f.changed.Broadcast()
	}
}

// populatePage is populate, a variable for tests.
var populatePage = populate

// request asks the worker to make [f.requested, end) ready, and reports
// whether the request was queued.
func (f *FaultAhead) request(end int) bool {
	r := aheadRequest{f: f, to: end}
	f.requested = end
	startAheadWorker()
	select {
	case aheadQueue <- r:
		return true
	default: // the worker is behind: Need makes the page ready when due
		return false
	}
}

// yieldToWorker lets the worker, just woken by Reached's request, start
// on it now. The channel send made it runnable in the filler's own processor's
// next slot, where it waits until the filler blocks or is preempted (10
// ms); the other processor does not take it while it has work of its
// own, such as a flush that yields to the global queue between blocks.
// In a 10M-key fillrandom, 334 requests waited over 5 ms before the
// worker took them (up to 45 ms), and the filler reached the page first
// and faulted it in itself; with the yield, 16 did. The worker hands the
// processor back as soon as it faults (see populate).
func yieldToWorker() { runtime.Gosched() }

// requestSpare asks the worker for makeSpare, and reports whether the
// request was queued.
func requestSpare() bool {
	startAheadWorker()
	select {
	case aheadQueue <- aheadRequest{}:
		return true
	default: // the worker is behind; the next arena faults its first page
		return false
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
	for f.busy {
		f.changed.Wait()
	}
	return f.ready
}

// aheadRequest asks the worker to make f's buffer ready up to to, or
// with f nil, for makeSpare.
type aheadRequest struct {
	f  *FaultAhead
	to int
}

var (
	aheadOnce  sync.Once
	aheadQueue chan aheadRequest
	// aheadTaken counts the requests the worker has taken (for tests).
	aheadTaken atomic.Int64
)

// startAheadWorker starts the one goroutine that makes pages ready for
// every FaultAhead of the process. One is enough: a request is one 2 MiB
// page, and a DB fills one memtable at a time.
func startAheadWorker() {
	aheadOnce.Do(func() {
		aheadQueue = make(chan aheadRequest, 16)
		go func() {
			for r := range aheadQueue {
				// Not through bgsys.Do: a fault leaves the processor
				// to others (see populate), and moving a warm page in
				// takes microseconds.
				aheadTaken.Add(1)
				if r.f == nil {
					makeSpare()
					continue
				}
				r.f.work(r.to)
			}
		}()
	})
}
