package checksum

// CRC-64/Jones as Redis and Valkey use it: reflected polynomial
// 0x95ac9329ac4bc9b5, init 0, no final xor (CRC-64/REDIS in the catalogue;
// check value for "123456789" is 0xe9c6d914c4b8d9ca).

// JonesPoly is the reflected Jones polynomial.
const JonesPoly = 0x95ac9329ac4bc9b5

var crc64Table = func() *[256]uint64 {
	var t [256]uint64
	for i := range t {
		c := uint64(i)
		for j := 0; j < 8; j++ {
			if c&1 == 1 {
				c = c>>1 ^ JonesPoly
			} else {
				c >>= 1
			}
		}
		t[i] = c
	}
	return &t
}()

// UpdateCRC64 continues a running CRC-64/Jones with p: UpdateCRC64(0, p) is
// the CRC of p, and UpdateCRC64(UpdateCRC64(0, a), b) that of a ‖ b.
func UpdateCRC64(crc uint64, p []byte) uint64 {
	for _, b := range p {
		crc = crc64Table[byte(crc)^b] ^ crc>>8
	}
	return crc
}
