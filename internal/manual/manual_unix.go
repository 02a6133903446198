//go:build unix

package manual

import (
	"unsafe"

	"github.com/vigildb/vigil/internal/invariants"
	"golang.org/x/sys/unix"
)

// mapped records the buffers that came from mmap (the fallback ones came
// from the Go heap and are left to the collector).
var mapped syncMap

func osAlloc(n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	if n >= hugeMin {
		adviseHuge(b)
	}
	mapped.add(uintptr(unsafe.Pointer(&b[0])))
	return b
}

func osFree(b []byte) {
	if !mapped.remove(uintptr(unsafe.Pointer(&b[0]))) {
		return // a Go heap fallback
	}
	if invariants.Enabled {
		// Inaccessible for good (any use after free faults), and its pages
		// returned to the OS: the address range stays reserved, so it is
		// never reused, but a test process that opens hundreds of DBs does
		// not keep every freed arena resident (poisoning wrote every page).
		if err := unix.Mprotect(b, unix.PROT_NONE); err != nil {
			panic("manual: mprotect of a freed buffer: " + err.Error())
		}
		if err := unix.Madvise(b, unix.MADV_DONTNEED); err != nil {
			panic("manual: madvise of a freed buffer: " + err.Error())
		}
		return
	}
	if err := unix.Munmap(b); err != nil {
		panic("manual: munmap: " + err.Error())
	}
}

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
// could not hold a 2 MiB page anyway).
const hugeMin = 4 << 20
