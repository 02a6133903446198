package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// TestLastLengthFlip flips each bit of the last fragment's length that
// makes it run past end of file. The whole fragment is in the file, so it
// is corruption, not a torn write: TolerateCorruptedTailRecords (the
// MANIFEST's mode) fails with ErrCorruption instead of dropping the last
// record in silence. A real torn write (the file cut inside the fragment)
// still reads as a tail.
func TestLastLengthFlip(t *testing.T) {
	recs := [][]byte{pattern(1, 200), pattern(2, 300)}
	data, ends := writeLog(t, 7, checksum.XXH3, recs)
	lenOff := int(ends[0]) + 4 // the last fragment's length field
	length := int(binary.LittleEndian.Uint16(data[lenOff:]))
	for b := range 16 {
		if length^(1<<b) <= len(data)-int(ends[0])-FragmentHeaderSize {
			continue // shorter: the checksum catches it (covered elsewhere)
		}
		t.Run(fmt.Sprintf("bit%d", b), func(t *testing.T) {
			bad := append([]byte(nil), data...)
			binary.LittleEndian.PutUint16(bad[lenOff:], uint16(length^(1<<b)))
			res := readAll(t, bad, TolerateCorruptedTailRecords)
			if !errors.Is(res.err, base.ErrCorruption) {
				t.Fatalf("records %d, err %v: want ErrCorruption", len(res.recs), res.err)
			}
			res = readAll(t, bad, PointInTime)
			if res.err == nil && res.stopped == nil {
				t.Fatalf("PointInTime: %d records, no error and nothing reported stopped", len(res.recs))
			}
		})
	}
	// Torn: the file ends 50 bytes into the last record's payload.
	res := readAll(t, data[:len(data)-50], TolerateCorruptedTailRecords)
	if res.err != nil || !equalRecs(res.recs, recs[:1]) {
		t.Fatalf("torn tail: %d records, err %v; want the first record and no error", len(res.recs), res.err)
	}
}
