package checksum_test

import (
	"fmt"

	"github.com/vigildb/vigil/checksum"
)

// The CRC-64 of A ‖ B from the CRCs of A and B and the length of B, without
// the bytes: how range digests of adjacent key ranges compose.
func ExampleCombineCRC64() {
	a, b := []byte("hello, "), []byte("world")
	crcA := checksum.UpdateCRC64(0, a)
	crcB := checksum.UpdateCRC64(0, b)
	whole := checksum.UpdateCRC64(0, []byte("hello, world"))
	fmt.Println(checksum.CombineCRC64(crcA, crcB, int64(len(b))) == whole)
	fmt.Println(checksum.UpdateCRC64(crcA, b) == whole) // the running form
	// Output:
	// true
	// true
}

// A Digest computes Sum64 over data written in pieces, for every type.
func ExampleDigest() {
	data := []byte("a whole file, read in pieces")
	for _, t := range []checksum.Type{checksum.CRC32c, checksum.XXH3, checksum.CRC64} {
		d := checksum.NewDigest(t)
		d.Write(data[:7])
		d.Write(data[7:])
		fmt.Println(t, d.Sum64() == checksum.Sum64(t, data))
	}
	// Output:
	// crc32c true
	// xxh3 true
	// crc64 true
}
