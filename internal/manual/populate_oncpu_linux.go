//go:build linux && (race || !(amd64 || arm64))

package manual

import "unsafe"

// touchOffCPU is plain touch here (see populate_offcpu_linux.go): the
// goroutine keeps its processor through the faults.
func touchOffCPU(p unsafe.Pointer, n uintptr) { touch(p, n) }

const touchesOffCPU = false
