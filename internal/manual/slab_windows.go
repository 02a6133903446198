//go:build windows

package manual

import (
	"unsafe"

	"golang.org/x/sys/windows"
)

// mapMem reserves and commits n bytes (a multiple of the page size), or
// falls back to the Go heap (mmapped false) if that fails.
func mapMem(n int) (mem []byte, mmapped bool) {
	if b := virtualAlloc(n); b != nil {
		return b, true
	}
	return make([]byte, n), false
}

func unmapMem(b []byte) { virtualRelease(b) }

// protectMem makes whole pages b accessible (rw) or not. Failure is
// tolerated when protecting: the caller's poison remains.
func protectMem(b []byte, rw bool) {
	prot := uint32(windows.PAGE_NOACCESS)
	if rw {
		prot = windows.PAGE_READWRITE
	}
	var old uint32
	if err := windows.VirtualProtect(uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), prot, &old); err != nil {
		if rw {
			// The pages stay inaccessible: the buffer is unusable.
			panic("manual: VirtualProtect of a reused slot: " + err.Error())
		}
		protectFailures.Add(1)
	}
}

// dontNeed returns the pages of b to the system (VirtualFree MEM_DECOMMIT)
// while keeping the address range reserved. Unlike madvise DONTNEED the
// pages then fault on access instead of reading as zeros, which is the
// same to the callers: they only drop pages already inaccessible (a
// retired chunk, a large buffer freed in an invariants build) that are
// never made accessible again, only unmapped.
func dontNeed(b []byte) {
	_ = windows.VirtualFree(uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), windows.MEM_DECOMMIT)
}

// freeLarge frees a buffer mapped on its own: released, or in invariants
// builds poisoned and made inaccessible for good (as Free does).
func freeLarge(b []byte) {
	if !invariantsEnabled {
		unmapMem(b)
		return
	}
	for i := range b {
		b[i] = Poison
	}
	// Decommitted: inaccessible for good, and returned. Should that fail,
	// the poison remains, as when mprotect fails on Unix.
	if err := windows.VirtualFree(uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), windows.MEM_DECOMMIT); err != nil {
		protectFailures.Add(1)
	}
}
