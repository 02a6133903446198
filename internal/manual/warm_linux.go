package manual

import (
	"sync"
	"time"
	"unsafe"

	"github.com/vigildb/vigil/internal/invariants"
	"golang.org/x/sys/unix"
)

// warm keeps the resident huge pages of freed memtable arenas for a
// while, for FaultAhead to move into the arena being filled (mremap)
// instead of having the kernel fault in fresh ones.
//
// Why: a fresh page costs what the machine takes to back it. On the
// project's benchmark VMs (free page reporting: memory the guest frees in
// 2 MiB blocks goes back to the host within seconds) a fresh 2 MiB page
// took 15–22 ms to fault in, 4 KiB pages the same per byte, against
// 0.2 ms for a page the guest had used just before. A random fill rotates
// a 64 MiB memtable every 0.7 s; each one's arena faulted in fresh cost
// some 0.55 s of a processor, spent in the host, and every 2 MiB a writer
// could stall 17–40 ms. A flushed memtable's arena frees 64 MiB of
// resident pages just as the next arena needs them: moving a page (mremap
// of an aligned 2 MiB huge page to an aligned address) takes 15 µs and
// keeps it huge; zeroing it, 70 µs. malloc implementations keep freed
// memory for reuse the same way (jemalloc's dirty-page decay).
//
// The pages kept are memory the flush just freed, handed on as the
// arenas after it fill, so they do not raise the peak: at the flush's end
// the process holds what it held just before (the pages), and the next
// arenas fault nothing in until they are used up. (The fill's peak comes
// just before a flush ends, with a full immutable arena and the mutable
// one part filled; whatever is kept from one flush is used up by the next
// arena before its own flush ends, or else stays under that peak.) With
// that, in a 10M-key random fill on the VM above, writes over 5 ms went
// from 60-100 to 4-6 after the first seconds, and the peak RSS of a 1M-key
// fill did not move (median of 6 runs, 111.2 against 112.2 MiB). Keeping
// only what the arena being filled could still take, the first version,
// left most of each arena to fault in fresh (21-38 writes over 5 ms).
//
// Bounded three ways: at most warmMax pages; all unmapped once none was
// kept or taken for warmIdle; and other manual memory that grows unmaps
// as much of them, so that a block cache that fills after the writes
// stop, or the table writers' buffers, take the place of warm pages
// rather than adding to them. Growth is net: every buffer mapped or
// reused (slab chunks in mapMem, buffers under hugeMin in osAlloc) counts
// against the kept pages (releaseWarm), every one returned to the system
// while pages are kept counts for them (creditWarm). Counting only the
// mappings, the WAL blocks and table writer buffers a fill maps and frees
// again each memtable unmapped 2-5 kept pages per memtable, and the next
// arena faulted in as many fresh ones: in a 10M-key fillrandom, pages
// were still faulted in fresh every second to the end, and writes waited
// for them.
//
// Not in invariants builds, which never reuse freed memory (see Free).
//
// Concurrency: keepFilled, takeWarm, releaseWarm and WarmBytes are safe
// for concurrent use.
var warm struct {
	mu sync.Mutex
	// pages are the start addresses of the kept pages: each a
	// 2 MiB-aligned huge page of a freed buffer, still mapped (the rest of
	// that buffer unmapped), resident, with stale contents.
	pages []unsafe.Pointer
	// used is set when a page is kept or taken; the idle timer clears it,
	// and unmaps every page if it finds it clear.
	used  bool
	armed bool
	// debt is the growth of other manual memory not yet paid for by an
	// unmapped page (bytes): what releaseWarm was told of short of a
	// page, less what creditWarm was told of. Negative (a credit, at
	// most warmMax pages) when more was returned than mapped.
	debt int
}

const (
	// warmMax bounds the pages kept: one 64 MiB arena's worth.
	warmMax = 32
	// warmIdle is how long kept pages wait for a taker.
	warmIdle = time.Second
)

// WarmBytes returns the memory warm keeps now.
func WarmBytes() int64 {
	warm.mu.Lock()
	defer warm.mu.Unlock()
	return int64(len(warm.pages)) * AheadStep
}

// keepFilled keeps the whole huge pages among b's first filled bytes (up
// to warmMax in all) and unmaps the rest of b, or reports false (keeping
// nothing) where it would keep nothing. b is a whole buffer from Alloc
// that nothing uses any more.
func keepFilled(b []byte, filled int) bool {
	if invariants.Enabled || len(b) < hugeMin || !populateSupported() {
		return false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if !mapped.contains(base) {
		return false
	}
	end := base + uintptr(len(b))
	lo := (base + AheadStep - 1) &^ (AheadStep - 1)
	hi := (base + uintptr(min(max(filled, 0), len(b)))) &^ (AheadStep - 1)
	if hi <= lo {
		return false
	}
	warm.mu.Lock()
	n := min(int((hi-lo)/AheadStep), warmMax-len(warm.pages))
	if n <= 0 {
		warm.mu.Unlock()
		return false
	}
	for i := range n {
		keepLocked(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), lo-base+uintptr(i)*AheadStep))
	}
	warm.mu.Unlock()
	mapped.remove(base)
	keptEnd := lo + uintptr(n)*AheadStep
	if lo > base {
		unmapMem(b[:lo-base])
	}
	if keptEnd < end {
		unmapMem(b[keptEnd-base:])
	}
	return true
}

// keepLocked adds p, a resident huge page, to the kept ones, and arms the
// idle timer. warm.mu is held.
func keepLocked(p unsafe.Pointer) {
	warm.pages = append(warm.pages, p)
	warm.used = true
	if !warm.armed {
		warm.armed = true
		time.AfterFunc(warmIdle, warmTimer)
	}
}

// warmKept reports whether a page is kept (for FaultAhead's lead).
func warmKept() bool {
	warm.mu.Lock()
	defer warm.mu.Unlock()
	return len(warm.pages) > 0
}

// makeSpare keeps a fresh huge page, faulted in here, if none is kept:
// the first page of the buffer FaultAhead asks it for (see Reached), the
// next memtable's arena. That page is written as the arena is made (its
// skiplists' heads), under the DB's locks; faulted in there, from fresh
// memory, it stalled every writer for 15-22 ms at each of a fill's first
// rotations, before a flush had freed any arena to take pages from.
// Asked for as the current arena's last page fills, it is resident some
// milliseconds before it is used; the idle timer unmaps it if it is not.
func makeSpare() {
	if invariants.Enabled || warmKept() {
		return
	}
	b, err := mmapHugeAligned(AheadStep)
	if err != nil {
		return
	}
	populate(b)
	warm.mu.Lock()
	if len(warm.pages) < warmMax {
		keepLocked(unsafe.Pointer(unsafe.SliceData(b)))
		b = nil
	}
	warm.mu.Unlock()
	if b != nil {
		unmapMem(b)
	}
}

// takeWarm moves a kept page, zeroed, to dst, a 2 MiB-aligned page of a
// buffer from Alloc that nothing reads or writes meanwhile (its pages are
// replaced). It reports false if dst is not a whole page (a buffer's
// last, short one), no page was kept, or the move failed (dst is then as
// it was).
func takeWarm(dst []byte) bool {
	if len(dst) != AheadStep {
		return false
	}
	warm.mu.Lock()
	if len(warm.pages) == 0 {
		warm.mu.Unlock()
		return false
	}
	p := warm.pages[len(warm.pages)-1]
	warm.pages = warm.pages[:len(warm.pages)-1]
	warm.used = true
	warm.mu.Unlock()
	src := unsafe.Slice((*byte)(p), AheadStep)
	clear(src) // Alloc's buffers are zeroed
	_, _, errno := unix.Syscall6(unix.SYS_MREMAP, uintptr(p), AheadStep, AheadStep,
		unix.MREMAP_MAYMOVE|unix.MREMAP_FIXED, uintptr(unsafe.Pointer(unsafe.SliceData(dst))), 0)
	if errno != 0 {
		unmapMem(src)
		return false
	}
	return true
}

// releaseWarm unmaps kept pages for n bytes of memory mapped or reused
// for something else (all of them if n < 0): a page for every 2 MiB, the
// bytes short of a page carried over to the next call.
func releaseWarm(n int) {
	warm.mu.Lock()
	if len(warm.pages) == 0 {
		warm.debt = 0
		warm.mu.Unlock()
		return
	}
	k := len(warm.pages)
	if n >= 0 {
		warm.debt += n
		k = min(k, max(warm.debt, 0)/AheadStep)
		warm.debt -= k * AheadStep
	}
	drop := append([]unsafe.Pointer(nil), warm.pages[len(warm.pages)-k:]...)
	warm.pages = warm.pages[:len(warm.pages)-k]
	if len(warm.pages) == 0 {
		warm.debt = 0 // owed by pages that are gone: not by the next ones kept
	}
	warm.mu.Unlock()
	for _, p := range drop {
		unmapMem(unsafe.Slice((*byte)(p), AheadStep))
	}
}

// creditWarm is told of n bytes of other manual memory returned to the
// system (unmapped or its pages dropped): while pages are kept, later
// mappings are paid from it before any kept page goes (see warm).
func creditWarm(n int) {
	warm.mu.Lock()
	if len(warm.pages) > 0 {
		warm.debt = max(warm.debt-n, -warmMax*AheadStep)
	}
	warm.mu.Unlock()
}

// warmTimer runs every warmIdle while pages are kept: it unmaps them all
// if none was kept or taken since the last run.
func warmTimer() {
	warm.mu.Lock()
	if warm.used && len(warm.pages) > 0 {
		warm.used = false
		warm.mu.Unlock()
		time.AfterFunc(warmIdle, warmTimer)
		return
	}
	warm.armed = false
	warm.mu.Unlock()
	releaseWarm(-1)
}
