//go:build !amd64 || purego

package checksum

// Without the assembly path every call takes the portable code.
const (
	useCLMUL    = false
	clmulMinLen = 0
)

func updateCRC64CLMUL(crc uint64, p []byte) uint64 { return updateCRC64Generic(crc, p) }

func combineCRC64CLMUL(crcA, crcB, lenB uint64) uint64 {
	return combineCRC64Generic(crcA, crcB, lenB)
}
