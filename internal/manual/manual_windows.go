//go:build windows

package manual

import (
	"unsafe"

	"github.com/vigildb/vigil/internal/invariants"
	"golang.org/x/sys/windows"
)

// osAlloc reserves and commits n bytes (VirtualAlloc: committed pages are
// zeroed), or returns nil for the Go heap fallback. There is no huge page
// request: Windows' large pages need the SeLockMemoryPrivilege privilege,
// which a process rarely has, and are never paged out.
func osAlloc(n int) []byte {
	b := virtualAlloc(n)
	if b == nil {
		return nil
	}
	mapped.add(uintptr(unsafe.Pointer(&b[0])))
	return b
}

func osFree(b []byte) {
	if !mapped.remove(uintptr(unsafe.Pointer(&b[0]))) {
		return // a Go heap fallback
	}
	if invariants.Enabled {
		// Decommitted: its pages are returned to the system and any access
		// faults, while the address range stays reserved, so it is never
		// reused (mprotect PROT_NONE and madvise DONTNEED on Unix).
		if err := windows.VirtualFree(uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), windows.MEM_DECOMMIT); err != nil {
			panic("manual: VirtualFree MEM_DECOMMIT of a freed buffer: " + err.Error())
		}
		return
	}
	virtualRelease(b)
}

// virtualAlloc reserves and commits n bytes of zeroed, read-write memory,
// or returns nil if the system refuses.
func virtualAlloc(n int) []byte {
	addr, err := windows.VirtualAlloc(0, uintptr(n), windows.MEM_RESERVE|windows.MEM_COMMIT, windows.PAGE_READWRITE)
	if err != nil || addr == 0 {
		return nil
	}
	// The memory is the system's, not the Go heap's: converting its address
	// is safe (the collector ignores it, and nothing moves it). The
	// conversion goes through memory so that vet's unsafeptr check, which
	// cannot know where addr came from, accepts it.
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n)
}

// virtualRelease releases a whole reservation made by virtualAlloc (b
// starts at its base), committed or decommitted pages alike.
func virtualRelease(b []byte) {
	if err := windows.VirtualFree(uintptr(unsafe.Pointer(&b[0])), 0, windows.MEM_RELEASE); err != nil {
		panic("manual: VirtualFree MEM_RELEASE: " + err.Error())
	}
}
