//go:build linux && !race && (amd64 || arm64)

package manual

import "unsafe"

// touchOffCPU runs touch as the syscall package runs a blocking system
// call: the runtime's entersyscallblock hands the goroutine's processor
// to other goroutines at once, and exitsyscall takes one back after. So
// while the kernel (and the host, on a VM) backs the pages, the
// scheduler runs other goroutines on that processor, and a stop of the
// world does not wait for the fault. Between the two calls the goroutine
// must not grow its stack, allocate or be preempted: touch is nosplit,
// and its atomic add compiles to one instruction on these
// architectures.
//
// Both are the runtime's, reached by go:linkname: the runtime keeps them
// callable this way for packages outside it ("Do not remove or change
// the type signature", go.dev/issue/67401). Race builds, whose atomics
// call into the race runtime, and other architectures use the plain
// touch (populate_oncpu_linux.go).
//
//go:nosplit
func touchOffCPU(p unsafe.Pointer, n uintptr) {
	entersyscallblock()
	touch(p, n)
	exitsyscall()
}

// touchesOffCPU reports whether populate leaves its processor to others
// (for tests).
const touchesOffCPU = true

//go:linkname entersyscallblock runtime.entersyscallblock
func entersyscallblock()

//go:linkname exitsyscall runtime.exitsyscall
func exitsyscall()
