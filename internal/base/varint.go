package base

import "math/bits"

// UvarintLen returns the length of x's uvarint encoding
// (encoding/binary.AppendUvarint): what a batch, a block entry or a size
// estimate needs to know without encoding.
func UvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }
