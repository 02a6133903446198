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
	mapped.add(uintptr(unsafe.Pointer(&b[0])))
	return b
}

func osFree(b []byte) {
	if !mapped.remove(uintptr(unsafe.Pointer(&b[0]))) {
		return // a Go heap fallback
	}
	if invariants.Enabled {
		for i := range b {
			b[i] = Poison
		}
		if err := unix.Mprotect(b, unix.PROT_NONE); err != nil {
			panic("manual: mprotect of a freed buffer: " + err.Error())
		}
		return
	}
	if err := unix.Munmap(b); err != nil {
		panic("manual: munmap: " + err.Error())
	}
}
