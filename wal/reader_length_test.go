package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// lengthCase is a log whose last whole fragment (at off, of length length)
// had its length field damaged so that it runs past end of file.
type lengthCase struct {
	name   string
	data   []byte
	off    int64
	length int      // the length written
	want   [][]byte // the records before it
}

// checkWholeLength checks that c reads as corruption, not as a torn tail, in
// every mode: an error naming the offset and the length the fragment
// verifies with in TolerateCorruptedTailRecords and AbsoluteConsistency, a
// quiet stop saying the same in PointInTime (nothing verifiable follows),
// a counted corruption in SkipAnyCorruptedRecords.
func checkWholeLength(t *testing.T, c lengthCase) {
	t.Helper()
	msg := fmt.Sprintf("offset %d: bad fragment length", c.off)
	whole := fmt.Sprintf("is whole: it verifies with length %d", c.length)
	for _, mode := range allModes {
		res := readAll(t, c.data, mode)
		if !equalRecs(res.recs, c.want) {
			t.Fatalf("%s, %s: records %v, want %v (err %v)", c.name, mode, describe(res.recs), describe(c.want), res.err)
		}
		got := res.err
		switch mode {
		case PointInTime:
			if res.err != nil {
				t.Fatalf("%s, %s: err %v, want a quiet stop", c.name, mode, res.err)
			}
			got = res.stopped
		case SkipAnyCorruptedRecords:
			if res.err != nil || res.stats.Corruptions < 1 || res.stats.DroppedRecords < 1 {
				t.Fatalf("%s, %s: err %v, stats %+v", c.name, mode, res.err, res.stats)
			}
			if res.stats.Corruptions > 1 {
				// Skip went on past it, to the junk of a torn header
				// in the reserve, which is corruption of its own.
				continue
			}
			got = res.r.LastCorruption()
		}
		if !errors.Is(got, base.ErrCorruption) || !strings.Contains(got.Error(), msg) || !strings.Contains(got.Error(), whole) {
			t.Fatalf("%s, %s: got %v, want a corruption saying %q and %q", c.name, mode, got, msg, whole)
		}
	}
}

// TestLastLengthFlip damages the length of a log's last fragment so that
// it runs past end of file. The fragment checksum covers the length (format
// version 2), so the reader can verify the fragment under the length it was
// written with: a whole fragment with a damaged length is corruption, in
// TolerateCorruptedTailRecords (the MANIFEST's mode) an error, where it
// would otherwise be taken for a torn write and the last, synced record
// dropped in silence. Any damage to the length is found this way, not only
// a flipped bit, and so is the same damage with zeros after the fragment
// (the WAL's reserve) or a torn append after it (a crash after the last
// sync). A fragment really cut by end of file still reads as a torn tail.
func TestLastLengthFlip(t *testing.T) {
	recs := [][]byte{pattern(1, 200), pattern(2, 300)}
	for _, ct := range checkedTypes {
		data, ends := writeLog(t, 7, ct, recs)
		off := ends[0]
		setLength := func(d []byte, l int) []byte {
			d = bytes.Clone(d)
			binary.LittleEndian.PutUint16(d[off+4:], uint16(l))
			return d
		}
		avail := len(data) - int(off) - FragmentHeaderSize
		var lengths []int
		for b := range 16 {
			if l := len(recs[1]) ^ (1 << b); l > avail {
				lengths = append(lengths, l) // one flipped bit
			}
		}
		lengths = append(lengths, 301, 0x1234, 0xffff, 300|0x0c00) // any other damage
		for _, l := range lengths {
			c := lengthCase{name: fmt.Sprintf("%s, length %d", ct, l), off: off, length: len(recs[1]), want: recs[:1]}
			// The fragment ends the file (a MANIFEST, a WAL after Close).
			c.data = setLength(data, l)
			checkWholeLength(t, c)
			// Zeros follow it: the WAL's reserve ending in this block.
			c.name += ", zeros after"
			c.data = append(setLength(data, l), make([]byte, 100)...)
			if l > avail+100 {
				checkWholeLength(t, c)
			}
		}
		// A torn append follows it: a crash cut the next record short,
		// in its payload or in its header.
		torn, _ := writeLog(t, 7, ct, append(recs, pattern(3, 500)))
		for _, cut := range []int{len(data) + 3, len(data) + FragmentHeaderSize, len(data) + 250} {
			c := lengthCase{name: fmt.Sprintf("%s, torn record after, cut at %d", ct, cut), off: off, length: len(recs[1]), want: recs[:1]}
			c.data = setLength(torn[:cut], 0xffff)
			checkWholeLength(t, c)
			// The same torn append in the reserve: the rest of it is zeros.
			c.name += ", zeros"
			c.data = append(setLength(torn[:cut], 0xffff), make([]byte, len(torn)-cut+200)...)
			checkWholeLength(t, c)
		}
		// A payload that ends in zeros, then the reserve's zeros.
		zrecs := [][]byte{recs[0], append(pattern(2, 290), make([]byte, 10)...)}
		zdata, _ := writeLog(t, 7, ct, zrecs)
		checkWholeLength(t, lengthCase{name: fmt.Sprintf("%s, payload ending in zeros", ct), off: off, length: 300, want: recs[:1],
			data: append(setLength(zdata, 0xffff), make([]byte, 50)...)})

		// Torn: the file ends inside the last record, at every offset of
		// its payload, in every mode but AbsoluteConsistency no error.
		for cut := int(off) + FragmentHeaderSize; cut < len(data); cut++ {
			for _, mode := range []RecoveryMode{TolerateCorruptedTailRecords, PointInTime, SkipAnyCorruptedRecords} {
				res := readAll(t, data[:cut], mode)
				if res.err != nil || res.stopped != nil || !equalRecs(res.recs, recs[:1]) || res.stats.TailDroppedBytes != int64(cut)-off {
					t.Fatalf("%s, torn at %d, %s: %d records, err %v, stopped %v, stats %+v; want the first record and a torn tail",
						ct, cut, mode, len(res.recs), res.err, res.stopped, res.stats)
				}
			}
		}
	}
	// With checksum type None nothing can be verified: a length past end
	// of file is always a torn tail (the blind spot).
	data, ends := writeLog(t, 7, checksum.None, recs)
	d := bytes.Clone(data)
	binary.LittleEndian.PutUint16(d[ends[0]+4:], 0xffff)
	if res := readAll(t, d, TolerateCorruptedTailRecords); res.err != nil || !equalRecs(res.recs, recs[:1]) || res.stats.TailDroppedBytes == 0 {
		t.Fatalf("None: %d records, err %v, stats %+v; want a torn tail", len(res.recs), res.err, res.stats)
	}
}

// TestWholeLengthFirstFragment: a FIRST (or MIDDLE) fragment fills its
// block, so in the last, short block it is cut by end of file whatever its
// length field says: a torn tail, and no search.
func TestWholeLengthFirstFragment(t *testing.T) {
	recs := [][]byte{pattern(1, 100), pattern(2, 2*BlockSize)}
	data, ends := writeLog(t, 3, checksum.XXH3, recs)
	cut := data[:BlockSize+BlockSize/2] // inside the MIDDLE fragment in block 1
	res := readAll(t, cut, TolerateCorruptedTailRecords)
	if res.err != nil || !equalRecs(res.recs, recs[:1]) || res.stats.TailDroppedBytes != int64(len(cut))-ends[0] {
		t.Fatalf("%d records, err %v, stats %+v", len(res.recs), res.err, res.stats)
	}
}

// TestWholeLengthBudget: the search for a fragment's written length is
// bounded by the block's resyncBudget. The worst case is a torn fragment
// followed by zeros to end of file (an append cut in the reserve): every
// end in the zeros is a candidate, each costing a hash of the fragment.
func TestWholeLengthBudget(t *testing.T) {
	var hdr [FileHeaderSize]byte
	encodeFileHeader(hdr[:], 1, checksum.XXH3, false)
	d := append(hdr[:], 0xde, 0xad, 0xbe, 0xef, 0xff, 0xff, fragFull)
	d = append(d, pattern(1, 100)...)
	d = append(d, make([]byte, BlockSize-200-len(d))...)
	r, err := NewReader(bytes.NewReader(d), "log", TolerateCorruptedTailRecords)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != io.EOF || r.Stats().TailDroppedBytes != int64(len(d)-FileHeaderSize) {
		t.Fatalf("Next: %v, stats %+v; want a torn tail", err, r.Stats())
	}
	if r.budget > 0 || r.budget < -(MaxFragmentPayload+3) {
		t.Fatalf("budget left %d: want it used up, by at most one hash more", r.budget)
	}
}
