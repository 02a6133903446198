// Package manual allocates memory outside the Go heap, returned to the
// operating system when freed: memtable arenas and block-cache blocks,
// which on the Go heap would stay resident after their last use until a
// garbage collection finds them, and which the collector's pacing would let
// the heap grow to twice the size of.
//
// Two allocators: Alloc and Free below, one mapping per buffer, for a few
// large buffers (memtable arenas); and Allocator (slab.go), a slab
// allocator for many small ones (cached blocks), with size classes and
// chunks shared by buffers of a class.
//
// Alloc maps anonymous memory (mmap), with transparent huge pages for
// buffers of 4 MiB and more (see hugeMin); Free unmaps it, returning it to
// the operating system at once. (On Linux, Free keeps the address range of
// a smaller buffer, its pages dropped, for a later Alloc of the same size:
// see spares, which says why.) The memory holds no Go pointers, so the
// collector never needs to scan it. Callers own the lifetime: a buffer is
// freed exactly once, when nothing can read it any more (the DB counts the
// references of each memtable for that), and never touched after.
//
// FaultAhead (ahead.go) makes a large buffer's huge pages ready on a
// goroutine of its own, just ahead of the point a filler has reached, so
// that a memtable's writer does not stall in the kernel each time it
// enters a fresh 2 MiB page: it moves in a page that a freed arena left
// resident (FreeFilled and warm, warm_linux.go), or populates a fresh one.
//
// With the build tag invariants, Free does not unmap: it makes the buffer's
// pages inaccessible (mprotect PROT_NONE) and drops their contents (madvise
// DONTNEED, so freed arenas cost no memory), so that any use after free
// faults at once (the Go runtime reports it with a stack trace) instead of
// reading recycled memory. The address space is not reused in such builds.
// (The slab allocator poisons freed slots too; see Allocator.)
//
// Concurrency: Alloc, Free and the counters are safe for concurrent use;
// see Allocator for its own contract.
//
// # Platforms
//
// What is above is Linux. Every platform keeps the same contract (a
// zeroed buffer from Alloc, contents kept until Free, each buffer freed
// once, Allocator's semantics); what differs is only where the memory
// comes from and what is done for speed:
//
//   - Other Unix systems (macOS, FreeBSD, ...) map and unmap memory the
//     same way (mmap, munmap, mprotect and madvise DONTNEED in invariants
//     builds), but ask for no huge pages (adviseHuge does nothing: their
//     superpages are not requested per mapping), and NewFaultAhead returns
//     nil (their pages are 4 KiB, and each fault costs microseconds): the
//     filler faults its pages itself.
//   - Windows reserves and commits memory with VirtualAlloc (committed
//     pages are zeroed) and releases it with VirtualFree MEM_RELEASE, so
//     freed memory goes back to the system at once there too. Invariants
//     builds decommit a freed buffer (VirtualFree MEM_DECOMMIT): its pages
//     are returned and any access faults, with the address range kept
//     reserved so that it is never reused, as mprotect PROT_NONE and
//     madvise DONTNEED do on Unix; the slab allocator's per-slot
//     protections use VirtualProtect PAGE_NOACCESS. No large pages (they
//     need the SeLockMemoryPrivilege privilege and are never paged out) and
//     no FaultAhead.
//   - Elsewhere (js/wasm, wasip1, plan9) the buffers come from the Go heap
//     and freeing leaves them to the collector; invariants builds poison
//     them but cannot make them fault.
//
// A mapping that fails falls back to the Go heap on every platform, so
// these differences change memory use and latency, never results.
package manual

import (
	"sync/atomic"
	"unsafe"
)

// Poison is the byte freed buffers are filled with in invariants builds.
const Poison = 0xdb

// mapped records the buffers that osAlloc got from the operating system
// (the fallback ones came from the Go heap and are left to the collector),
// so that osFree and NewFaultAhead tell them apart. Empty on platforms
// that allocate from the Go heap only.
var mapped syncMap

// hugeMin is the smallest buffer osAlloc asks transparent huge pages for
// (adviseHuge: madvise MADV_HUGEPAGE on Linux, where most distributions
// enable them only on request).
// Why: a memtable arena is read at random, one node per skiplist step; with
// 4 KiB pages a 64 MiB arena spans 16k pages, far more than the TLB holds,
// so a random insert paid a TLB miss on top of the cache miss at nearly
// every step. With 2 MiB pages the arena is 32 TLB entries. The cost is
// memory: the page at the arena's fill point is backed whole, at most
// 2 MiB more per arena being filled (arenas are filled from the start).
// Smaller buffers are left alone (the block cache's 1 MiB slab chunks
// could not hold a 2 MiB page anyway). It is also the smallest buffer
// NewFaultAhead serves, on every platform.
const hugeMin = 4 << 20

var (
	allocated atomic.Int64 // bytes currently allocated
	total     atomic.Int64 // buffers allocated since start
)

// Allocated returns the bytes currently allocated by Alloc and not freed.
func Allocated() int64 { return allocated.Load() }

// Alloc returns a zeroed buffer of n bytes (n > 0) outside the Go heap. It
// falls back to the Go heap where the platform cannot map memory, or if the
// mapping fails.
func Alloc(n int) []byte {
	b := osAlloc(n)
	if b == nil {
		b = make([]byte, n)
	}
	allocated.Add(int64(n))
	total.Add(1)
	return b
}

// Free releases a buffer returned by Alloc. b must be the whole buffer.
func Free(b []byte) {
	if len(b) == 0 {
		return
	}
	allocated.Add(-int64(len(b)))
	osFree(b)
}

// FreeFilled is Free for a buffer whose first filled bytes were used (a
// memtable arena, filled from its start): on Linux their whole huge pages
// stay resident a while, for FaultAhead to move into the next buffer it
// serves instead of faulting fresh ones in (see warm). b must be the
// whole buffer.
func FreeFilled(b []byte, filled int) {
	if len(b) == 0 {
		return
	}
	allocated.Add(-int64(len(b)))
	if !keepFilled(b, filled) {
		osFree(b)
	}
}

// AllocSlice is Alloc for a slice of n zeroed Ts (length n, capacity n),
// for indexes built over manual memory. T must hold no Go pointers: the
// collector does not scan this memory, so a pointer stored in it would not
// keep its target alive.
func AllocSlice[T any](n int) []T {
	if n <= 0 {
		return nil
	}
	var zero T
	b := Alloc(n * int(unsafe.Sizeof(zero)))
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// FreeSlice frees a slice from AllocSlice: the whole of its capacity, so s
// may have been resliced (s[:0], s[:k]) but must start where AllocSlice's
// did. It accepts a nil or empty-capacity slice.
func FreeSlice[T any](s []T) {
	if cap(s) == 0 {
		return
	}
	var zero T
	Free(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), cap(s)*int(unsafe.Sizeof(zero))))
}
