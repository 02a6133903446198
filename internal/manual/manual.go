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

import "sync/atomic"

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
