//go:build amd64 && !purego

package checksum

// crc64FoldCLMUL returns UpdateCRC64(crc, p) for len(p) a non-zero multiple
// of 16, folding with PCLMULQDQ. Implemented in crc64_amd64.s.
//
//go:noescape
func crc64FoldCLMUL(crc uint64, p []byte, k *clmulConsts) uint64

// crc64ShiftCLMUL returns crc·x^(8n) mod P: crc shifted over n zero bytes,
// one fold per non-zero hex digit of n, then a Barrett reduction.
//
//go:noescape
func crc64ShiftCLMUL(crc, n uint64, t *shiftTable, k *clmulConsts) uint64

// cpuid executes the CPUID instruction. Implemented in crc64_amd64.s so the
// package needs neither golang.org/x/sys/cpu nor internal/cpu.
func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

// hasCLMUL reports whether the CPU has PCLMULQDQ (CPUID.1:ECX bit 1) and
// SSE4.1 (bit 19, for PEXTRQ). The XMM state is always enabled on amd64.
func hasCLMUL() bool {
	if maxLeaf, _, _, _ := cpuid(0, 0); maxLeaf < 1 {
		return false
	}
	_, _, ecx, _ := cpuid(1, 0)
	return ecx&(1<<1) != 0 && ecx&(1<<19) != 0
}

// useCLMUL selects the PCLMULQDQ path. Set once at init; tests compare both
// paths by calling them directly rather than flipping this.
var useCLMUL = hasCLMUL()

// clmulMinLen is the length from which the folding path beats
// slicing-by-8 (its fixed cost is the call and a three-multiply reduction).
const clmulMinLen = 16

// updateCRC64CLMUL folds the 16-byte multiples with PCLMULQDQ and finishes
// the < 16-byte tail with the table. len(p) must be >= 16.
func updateCRC64CLMUL(crc uint64, p []byte) uint64 {
	n := len(p) &^ 15
	crc = crc64FoldCLMUL(crc, p[:n], &clmulK)
	return updateCRC64Slice8(crc, p[n:])
}

// combineCRC64CLMUL is CombineCRC64 with PCLMULQDQ.
func combineCRC64CLMUL(crcA, crcB, lenB uint64) uint64 {
	if lenB == 0 || crcA == 0 {
		return crcA ^ crcB
	}
	return crc64ShiftCLMUL(crcA, lenB, getShiftTable(), &clmulK) ^ crcB
}
