//go:build unix

package manual

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapMem maps n bytes (a multiple of the page size) of anonymous memory, or
// falls back to the Go heap (mmapped false) if that fails.
func mapMem(n int) (mem []byte, mmapped bool) {
	releaseWarm(n) // memory for memory: see warm
	b, err := mmapAnon(n)
	if err != nil {
		return make([]byte, n), false
	}
	return b, true
}

// mmapAnon and unmapMem call the system directly (MmapPtr, MunmapPtr), not
// through unix.Mmap and unix.Munmap: those keep a process-wide table of
// mappings under one mutex, held for the whole munmap system call, and an
// munmap waits for every other processor to drop the mapping from its TLB.
// A trace of a 10M-key fillrandom caught the writer waiting for that
// mutex, to map a WAL block, while the WAL flusher unmapped surplus ones.
func mmapAnon(n int) ([]byte, error) {
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

func unmapMem(b []byte) {
	if err := unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b))); err != nil {
		panic("manual: munmap: " + err.Error())
	}
}

// protectMem makes whole pages b accessible (rw) or not. Failure (the
// kernel's limit on mappings) is tolerated: the caller's poison remains.
func protectMem(b []byte, rw bool) {
	prot := unix.PROT_NONE
	if rw {
		prot = unix.PROT_READ | unix.PROT_WRITE
	}
	if err := unix.Mprotect(b, prot); err != nil {
		if rw {
			// The pages stay inaccessible: the buffer is unusable.
			panic("manual: mprotect of a reused slot: " + err.Error())
		}
		protectFailures.Add(1)
	}
}

// dontNeed drops the pages of b, returning the memory to the OS while
// keeping the mapping (and its protection).
func dontNeed(b []byte) { _ = unix.Madvise(b, unix.MADV_DONTNEED) }

// freeLarge frees a buffer mapped on its own: unmapped, or in invariants
// builds poisoned and made inaccessible for good (as Free does).
func freeLarge(b []byte) {
	if !invariantsEnabled {
		unmapMem(b)
		return
	}
	for i := range b {
		b[i] = Poison
	}
	if err := unix.Mprotect(b, unix.PROT_NONE); err != nil {
		protectFailures.Add(1)
		return
	}
	dontNeed(b)
}
