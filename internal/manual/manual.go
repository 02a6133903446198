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
// the operating system at once. The memory holds no Go pointers, so the
// collector never needs to scan it. Callers own the lifetime: a buffer is
// freed exactly once, when nothing can read it any more (the DB counts the
// references of each memtable for that), and never touched after.
//
// FaultAhead (ahead.go) faults a large buffer's huge pages in on a
// goroutine of its own, just ahead of the point a filler has reached, so
// that a memtable's writer does not stall in the kernel each time it
// enters a fresh 2 MiB page.
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
package manual

import (
	"sync/atomic"
	"unsafe"
)

// Poison is the byte freed buffers are filled with in invariants builds.
const Poison = 0xdb

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
