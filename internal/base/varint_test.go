package base

import (
	"encoding/binary"
	"testing"
)

// TestUvarintLen checks UvarintLen against the encoder at every length
// boundary.
func TestUvarintLen(t *testing.T) {
	for _, x := range []uint64{0, 1, 127, 128, 1<<14 - 1, 1 << 14, 1<<21 - 1, 1 << 21, 1<<28 - 1, 1 << 28, 1<<35 - 1, 1<<56 - 1, 1 << 56, 1<<63 - 1, 1 << 63, ^uint64(0)} {
		if got, want := UvarintLen(x), len(binary.AppendUvarint(nil, x)); got != want {
			t.Errorf("UvarintLen(%d) = %d, the encoding has %d bytes", x, got, want)
		}
	}
}
