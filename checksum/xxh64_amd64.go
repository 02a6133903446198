//go:build amd64 && !purego

package checksum

import "golang.org/x/sys/cpu"

// xxh64StripesAVX512 runs XXH64's stripe loop over p, len(p) a non-zero
// multiple of 32, updating acc. Implemented in xxh64_amd64.s: each
// stripe's four input products (input·prime2) take one VPMULLQ, off the
// lanes' dependency chains, so the scalar multiplier only serves the
// chains' ·prime1 steps (four multiplies per stripe instead of eight).
//
//go:noescape
func xxh64StripesAVX512(acc *xxh64Acc, p []byte)

// useXXH64AVX512 selects the AVX-512 stripe loop (VPMULLQ on 256-bit
// registers needs AVX512DQ and AVX512VL, and the OS's support of the
// state, which package cpu checks). Set once at init; tests compare the
// loop with the portable one by calling both directly.
var useXXH64AVX512 = cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL
