//go:build unix

package manual

import (
	"unsafe"

	"github.com/vigildb/vigil/internal/invariants"
	"golang.org/x/sys/unix"
)

func osAlloc(n int) []byte {
	if n < hugeMin {
		releaseWarm(n) // memory for memory: see warm
	}
	b := spareGet(n) // no mmap if a freed range fits (see spares)
	if b != nil {
		mapped.add(uintptr(unsafe.Pointer(&b[0])))
		return b
	}
	var err error
	if n >= hugeMin {
		b, err = mmapHugeAligned(n)
	} else {
		b, err = mmapAnon(n)
	}
	if err != nil {
		return nil // Alloc falls back to the Go heap
	}
	mapped.add(uintptr(unsafe.Pointer(&b[0])))
	return b
}

// mmapHugeAligned maps n bytes starting at a huge page boundary
// (AheadStep), and asks for huge pages there (adviseHuge), so that all of
// a large buffer can be huge pages, its first page too: FaultAhead moves
// warm pages only into whole ones. It maps AheadStep more and unmaps what
// lies outside.
func mmapHugeAligned(n int) ([]byte, error) {
	m, err := mmapAnon(n + AheadStep)
	if err != nil {
		return nil, err
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	head := int(((base + AheadStep - 1) &^ (AheadStep - 1)) - base)
	end := head + roundUp(n, pageSize) // whole small pages
	if head > 0 {
		unmapMem(m[:head])
	}
	if end < len(m) {
		unmapMem(m[end:])
	}
	b := m[head : head+n : head+n]
	adviseHuge(b)
	return b, nil
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
	if len(b) < hugeMin {
		creditWarm(len(b)) // see warm: as osAlloc's releaseWarm
	}
	if sparePut(b) {
		return
	}
	unmapMem(b)
}
