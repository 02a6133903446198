//go:build amd64 && !purego

package checksum

// xxh32StripesSSE41 runs XXH32's stripe loop over p, len(p) a non-zero
// multiple of 16, updating acc. Implemented in xxh32_amd64.s: each stripe's
// four input products (input·prime2) take one PMULLD, off the lanes'
// dependency chains, so the scalar multiplier only serves the chains'
// ·prime1 steps and each stripe costs the chain's latency (add, rotate,
// multiply) instead of eight multiplies.
//
//go:noescape
func xxh32StripesSSE41(acc *xxh32Acc, p []byte)

// hasSSE41 reports whether the CPU has SSE4.1 (CPUID.1:ECX bit 19, for
// PMULLD and PEXTRQ).
func hasSSE41() bool {
	if maxLeaf, _, _, _ := cpuid(0, 0); maxLeaf < 1 {
		return false
	}
	_, _, ecx, _ := cpuid(1, 0)
	return ecx&(1<<19) != 0
}

// useXXH32SSE41 selects the assembly stripe loop. Set once at init; tests
// compare it with the portable loop by calling both directly.
var useXXH32SSE41 = hasSSE41()

// xxh32AsmMinLen is the input length from which the assembly loop is used:
// below it the call's fixed cost outweighs the few stripes.
const xxh32AsmMinLen = 32
