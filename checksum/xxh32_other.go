//go:build !amd64 || purego

package checksum

// Without the assembly loop every input takes the portable code.
const (
	useXXH32SSE41  = false
	xxh32AsmMinLen = 0
)

func xxh32StripesSSE41(acc *xxh32Acc, p []byte) { acc.stripesGeneric(p) }
