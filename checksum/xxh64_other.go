//go:build !amd64 || purego

package checksum

// Without the assembly loop XXH64 is github.com/cespare/xxhash/v2's.
const useXXH64AVX512 = false

func xxh64StripesAVX512(acc *xxh64Acc, p []byte) { acc.stripesGeneric(p) }
