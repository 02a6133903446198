package manual

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// spares keeps the address ranges of freed buffers smaller than hugeMin,
// their pages dropped (madvise MADV_DONTNEED), so that Alloc can hand them
// out again without a system call that changes the process's mappings.
//
// Why: mmap and munmap take the kernel's per-process mapping lock
// (mmap_lock) for writing, and a writer queued on it blocks every page
// fault that comes after it. The memtable fault-ahead worker holds that
// lock for reading through a populate of a 2 MiB page, up to 8 ms on a
// virtual machine that backs guest memory on first touch. A trace of a
// 10M-key fillrandom caught a compaction's mmap (for its filter hashes)
// queued behind such a populate, and the WAL flusher stuck on a page fault
// behind the mmap for 8 ms while it held the WAL's lock, which the writer
// needed. That fill made some 3,100 mmaps and 2,900 munmaps, nearly all of
// small buffers: the table writers' hash lists, grown by doubling, and WAL
// blocks. madvise DONTNEED takes the lock for reading only and returns the
// pages to the system just the same; a range's next user faults in zeroed
// pages (Alloc's contract: on Linux a private anonymous page read after
// DONTNEED is zero), under the read lock too.
//
// Linux only: elsewhere DONTNEED may keep the old contents (macOS), so
// Free unmaps as before.
//
// Bounded by spareMax bytes of address space; the ranges hold no memory.
//
// Concurrency: sparePut and spareGet are safe for concurrent use.
var spares struct {
	mu    sync.Mutex
	bytes int                      // address space held, at most spareMax
	free  map[int][]unsafe.Pointer // by length rounded up to whole pages
}

// spareMax bounds the address space spares keeps: 64 MiB, room for the
// hash lists of a few table writers at once (up to 2 MiB each below
// hugeMin) and a burst of WAL blocks.
const spareMax = 64 << 20

// spareLen is the length of the mapping behind a buffer of n bytes.
func spareLen(n int) int { return (n + pageSize - 1) &^ (pageSize - 1) }

// sparePut drops b's pages and keeps its range for spareGet, unless that
// would pass spareMax or b is large enough for huge pages; it reports
// whether it kept b. b is a whole buffer from mmapAnon, no longer in use.
func sparePut(b []byte) bool {
	n := spareLen(len(b))
	if n >= hugeMin {
		return false
	}
	spares.mu.Lock()
	ok := spares.bytes+n <= spareMax
	if ok {
		spares.bytes += n // reserved now, so that racing puts cannot pass spareMax
	}
	spares.mu.Unlock()
	if !ok {
		return false
	}
	if err := unix.Madvise(unsafe.Slice(unsafe.SliceData(b), n), unix.MADV_DONTNEED); err != nil { // whole pages
		spares.mu.Lock()
		spares.bytes -= n
		spares.mu.Unlock()
		return false
	}
	spares.mu.Lock()
	if spares.free == nil {
		spares.free = make(map[int][]unsafe.Pointer)
	}
	spares.free[n] = append(spares.free[n], unsafe.Pointer(unsafe.SliceData(b)))
	spares.mu.Unlock()
	return true
}

// spareGet returns a kept range for a buffer of n bytes, zeroed (its pages
// were dropped), or nil if there is none of that size.
func spareGet(n int) []byte {
	m := spareLen(n)
	if m >= hugeMin {
		return nil
	}
	spares.mu.Lock()
	l := spares.free[m]
	if len(l) == 0 {
		spares.mu.Unlock()
		return nil
	}
	p := l[len(l)-1]
	spares.free[m] = l[:len(l)-1]
	spares.bytes -= m
	spares.mu.Unlock()
	return unsafe.Slice((*byte)(p), n)
}

// dropPages returns the memory of the whole pages inside b to the OS
// (madvise DONTNEED), and returns how many bytes that is; b's bytes
// outside them are left as they are. b is part of a private anonymous
// mapping, and no one may use it meanwhile.
func dropPages(b []byte) int {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	first := (start + uintptr(pageSize) - 1) &^ (uintptr(pageSize) - 1)
	end := (start + uintptr(len(b))) &^ (uintptr(pageSize) - 1)
	if end <= first {
		return 0
	}
	dontNeed(b[first-start : end-start])
	return int(end - first)
}
