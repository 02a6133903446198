//go:build linux

package manual

import (
	"sync/atomic"
	"unsafe"
)

// populateSupported reports whether FaultAhead can fault pages in ahead
// of their use: always on Linux, for memory this package mapped.
func populateSupported() bool { return true }

// populate faults b's pages in writable, huge pages where b's mapping
// asked for them, without changing a byte: it adds zero to the first
// word of each 4 KiB page (an atomic add is a write, so the first touch
// of a fresh page allocates it instead of mapping the shared zero page;
// after a huge page's first touch the others hit it). b is memory no one
// else uses yet (FaultAhead's page past the filler's limit).
//
// Not madvise(MADV_POPULATE_WRITE), which faults the same pages in
// without a write: it holds the process's mmap lock (for reading) while it faults
// the range in, and every mmap, munmap and mremap of the process (the
// next memtable's arena, a WAL block, the Go heap growing) waits for the
// write side. Where the host backs a guest's fresh memory at 8.5 ms per
// MiB (docs/performance.md, "Fresh memory on the benchmark VM"), one huge
// page took 15-22 ms, and a 10M-key fillrandom's writer waited 17-22 ms
// for a WAL block or a memtable behind it. A page fault takes only the
// lock of its own mapping (per-VMA locks, Linux 6.4), so the same faults
// by touching leave other mappings free: measured on this VM with cold
// memory, an mmap loop beside faulting 64 huge pages waited at most
// 0.19-0.26 ms, against 77-87 ms beside MADV_POPULATE_WRITE.
//
// The touching runs as a blocking system call would (touchOffCPU): a
// page fault is not a system call, and a goroutine faulting in a fresh
// huge page for 15-26 ms held its processor all that time, where neither
// the scheduler nor a stop-the-world could take it back. A 10M-key
// fillrandom had two of its first garbage collections stop the world
// for 14 and 18 ms, waiting for the worker's fault, and the writer
// waited as long for a processor whenever a flush held the other one.
func populate(b []byte) {
	if len(b) == 0 {
		return
	}
	touchOffCPU(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
}

// touch adds zero to the first word of each 4 KiB page in [p, p+n).
// nosplit: touchOffCPU calls it where the goroutine's stack must not
// grow.
//
//go:nosplit
func touch(p unsafe.Pointer, n uintptr) {
	const page = 4096
	first := (page - uintptr(p)%page) % page // the first page-aligned word
	for off := first; off+8 <= n; off += page {
		atomic.AddUint64((*uint64)(unsafe.Add(p, off)), 0)
	}
}
