//go:build unix

package manual

import (
	"unsafe"

	"github.com/vigildb/vigil/internal/invariants"
	"golang.org/x/sys/unix"
)

func osAlloc(n int) []byte {
	b := spareGet(n) // no mmap if a freed range fits (see spares)
	if b != nil {
		mapped.add(uintptr(unsafe.Pointer(&b[0])))
		return b
	}
	b, err := mmapAnon(n)
	if err != nil {
		return nil // Alloc falls back to the Go heap
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
	if sparePut(b) {
		return
	}
	unmapMem(b)
}
