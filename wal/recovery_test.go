package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/invariants"
)

// longTests enables the exhaustive variants (every offset of multi-block
// logs): VIGIL_WAL_LONG=1 go test -run MultiBlock -timeout 30m ./wal (about
// ten minutes on a loaded 2-core machine).
var longTests = os.Getenv("VIGIL_WAL_LONG") != ""

// layout is a log written by the Writer plus where each record's bytes are.
type layout struct {
	data       []byte
	recs       [][]byte
	starts     []int64 // offset of record k's first fragment
	ends       []int64 // offset just past record k
	cleanEnds  map[int64]bool
	boundaries []int64 // every fragment start, record end and block boundary
}

func newLayout(t testing.TB, logNum uint64, ct checksum.Type, recs [][]byte) *layout {
	t.Helper()
	data, ends := writeLog(t, logNum, ct, recs)
	l := &layout{data: data, recs: recs, ends: ends, cleanEnds: map[int64]bool{FileHeaderSize: true}}
	prev := int64(FileHeaderSize)
	for k := range recs {
		s := prev
		if BlockSize-s%BlockSize < FragmentHeaderSize {
			s += BlockSize - s%BlockSize
		}
		l.starts = append(l.starts, s)
		prev = ends[k]
		l.cleanEnds[prev] = true
		if r := prev % BlockSize; r != 0 && BlockSize-r < FragmentHeaderSize {
			// A log cut right after the padding that ends a block is as
			// clean as one cut at the record end: nothing of the next
			// record is there.
			l.cleanEnds[prev+BlockSize-r] = true
		}
	}
	// Fragment starts, from the file itself.
	for off := int64(FileHeaderSize); off < int64(len(data)); {
		if BlockSize-off%BlockSize < FragmentHeaderSize {
			off += BlockSize - off%BlockSize
			l.boundaries = append(l.boundaries, off)
			continue
		}
		l.boundaries = append(l.boundaries, off)
		off += FragmentHeaderSize + int64(binary.LittleEndian.Uint16(data[off+4:]))
	}
	l.boundaries = append(l.boundaries, ends...)
	for b := int64(BlockSize); b < int64(len(data)); b += BlockSize {
		l.boundaries = append(l.boundaries, b)
	}
	return l
}

// locate returns the record whose bytes include offset i, or, for block
// padding, the number of records before it and padding=true.
func (l *layout) locate(i int64) (k int, padding bool) {
	for k := range l.recs {
		if i < l.starts[k] {
			return k, true
		}
		if i < l.ends[k] {
			return k, false
		}
	}
	panic(fmt.Sprintf("offset %d past the last record", i))
}

// damageRange returns the file range an error about damage in record k (or
// in the block padding before it) may name: from the end of the record
// before to the end of record k, or to its start for padding.
func (l *layout) damageRange(k int, padding bool) (lo, hi int64) {
	lo = FileHeaderSize
	if k > 0 {
		lo = l.ends[k-1]
	}
	if padding {
		return lo, l.starts[k]
	}
	return lo, l.ends[k]
}

// errorOffset returns the offset named by a reader error about the file
// name ("wal: name: offset N: ..."), or -1.
func errorOffset(err error, name string) int64 {
	if err == nil {
		return -1
	}
	msg := err.Error()
	prefix := "wal: " + name + ": offset "
	i := strings.Index(msg, prefix)
	if i < 0 {
		return -1
	}
	var off int64
	if _, err := fmt.Sscanf(msg[i+len(prefix):], "%d:", &off); err != nil {
		return -1
	}
	return off
}

// errorNamesOffsetIn reports whether err wraps base.ErrCorruption and names
// the file and an offset in [lo, hi).
func errorNamesOffsetIn(err error, name string, lo, hi int64) bool {
	off := errorOffset(err, name)
	return errors.Is(err, base.ErrCorruption) && off >= lo && off < hi
}

// nearBoundaries returns every offset within d of a boundary, plus every
// stride-th offset, in [lo, hi).
func (l *layout) nearBoundaries(lo, hi, d, stride int64) []int64 {
	set := map[int64]bool{}
	for _, b := range l.boundaries {
		for x := b - d; x <= b+d; x++ {
			set[x] = true
		}
	}
	for x := lo; x < hi; x += stride {
		set[x] = true
	}
	var out []int64
	for x := range set {
		if x >= lo && x < hi {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out
}

func without(recs [][]byte, k int) [][]byte {
	out := slices.Clone(recs[:k])
	return append(out, recs[k+1:]...)
}

func smallRecords() [][]byte {
	var recs [][]byte
	for i, n := range []int{0, 1, 10, 100, 7, 300, 1000, 3, 50, 0, 200, 64} {
		recs = append(recs, pattern(100+i, n))
	}
	return recs
}

// multiBlockRecords span four blocks: block 0 ends in 3 bytes of padding, a
// record spans blocks 1 and 2, another ends in block 3.
func multiBlockRecords() [][]byte {
	var recs [][]byte
	for i, n := range []int{BlockSize - FileHeaderSize - FragmentHeaderSize - 3, 100, 40000, 5, 0, 20000, 300, 12} {
		recs = append(recs, pattern(200+i, n))
	}
	return recs
}

// checkTruncated reads l's log cut at T in every mode: no error except in
// AbsoluteConsistency (when the cut is not at a record end), and exactly
// the records that ended before T.
func checkTruncated(t *testing.T, l *layout, T int64) {
	t.Helper()
	data := l.data[:T]
	n := 0
	for n < len(l.ends) && l.ends[n] <= T {
		n++
	}
	want := l.recs[:n]
	lastClean := int64(0)
	for c := range l.cleanEnds {
		if c <= T && c > lastClean {
			lastClean = c
		}
	}
	// A cut whose bytes after the last clean end are all zeros (a header's
	// leading zero bytes, block padding) reads as unwritten space: the log
	// ends at that boundary in every mode.
	zeroRest := T > lastClean && lastClean >= FileHeaderSize && !slices.ContainsFunc(l.data[lastClean:T], func(b byte) bool { return b != 0 })
	for _, mode := range allModes {
		res := readAll(t, data, mode)
		if T < FileHeaderSize {
			if mode == AbsoluteConsistency {
				if !res.newErr || !errors.Is(res.err, base.ErrCorruption) {
					t.Fatalf("T=%d %s: torn header gave %v, want a corruption error from NewReader", T, mode, res.err)
				}
			} else if res.err != nil || len(res.recs) != 0 || res.stats.TailDroppedBytes != T {
				t.Fatalf("T=%d %s: torn header gave err %v, %d records, stats %+v", T, mode, res.err, len(res.recs), res.stats)
			}
			continue
		}
		if !equalRecs(res.recs, want) {
			t.Fatalf("T=%d %s: got records %v, want %v (err %v)", T, mode, describe(res.recs), describe(want), res.err)
		}
		if zeroRest {
			if res.err != nil || res.stopped != nil || res.stats.UnwrittenBytes != T-lastClean || res.stats.TailDroppedBytes != 0 || res.stats.Corruptions != 0 {
				t.Fatalf("T=%d %s: zeros after the record end at %d: err %v, stopped %v, stats %+v, want them unwritten", T, mode, lastClean, res.err, res.stopped, res.stats)
			}
			continue
		}
		if mode == AbsoluteConsistency && !l.cleanEnds[T] {
			if res.err == nil || !errors.Is(res.err, base.ErrCorruption) || !strings.Contains(res.err.Error(), "torn") {
				t.Fatalf("T=%d %s: got err %v, want a torn-tail corruption error", T, mode, res.err)
			}
			continue
		}
		if res.err != nil || res.stopped != nil {
			t.Fatalf("T=%d %s: err %v, stopped %v", T, mode, res.err, res.stopped)
		}
		if res.stats.TailDroppedBytes != T-lastClean || res.stats.Corruptions != 0 {
			t.Fatalf("T=%d %s: stats %+v, want %d tail bytes dropped", T, mode, res.stats, T-lastClean)
		}
		wantOff := int64(FileHeaderSize)
		if n > 0 {
			wantOff = l.ends[n-1]
		}
		if res.r.Offset() != wantOff {
			t.Fatalf("T=%d %s: Offset %d, want %d", T, mode, res.r.Offset(), wantOff)
		}
	}
}

// TestTruncateEveryOffset cuts a small log at every byte offset: a crash
// mid-append. Every mode but AbsoluteConsistency must recover exactly the
// complete records, silently.
func TestTruncateEveryOffset(t *testing.T) {
	for _, ct := range allTypes {
		l := newLayout(t, 11, ct, smallRecords())
		for T := int64(0); T <= int64(len(l.data)); T++ {
			checkTruncated(t, l, T)
		}
	}
}

// sampledTypes returns types, or only the first of them under the race
// detector or -short, to keep the package's test time low.
func sampledTypes(types ...checksum.Type) []checksum.Type {
	if (invariants.RaceEnabled || testing.Short()) && !longTests {
		return types[:1]
	}
	return types
}

func TestTruncateMultiBlock(t *testing.T) {
	for _, ct := range sampledTypes(checksum.XXH3, checksum.None, checksum.CRC32c) {
		l := newLayout(t, 12, ct, multiBlockRecords())
		offsets := l.nearBoundaries(0, int64(len(l.data))+1, 9, 211)
		if longTests {
			offsets = offsets[:0]
			for T := int64(0); T <= int64(len(l.data)); T++ {
				offsets = append(offsets, T)
			}
		}
		for _, T := range offsets {
			checkTruncated(t, l, T)
		}
	}
}

// checkFlip flips one bit at offset i and checks each mode's outcome:
// AbsoluteConsistency fails; TolerateCorruptedTailRecords and PointInTime
// return the records before the damaged one and fail unless the damage is
// in the last record (which may pass for a torn tail, and which PointInTime
// may end the log at quietly), with an error naming the damaged offset;
// SkipAnyCorruptedRecords returns every other record.
func checkFlip(t *testing.T, l *layout, i int64, bit uint) {
	t.Helper()
	data := bytes.Clone(l.data)
	data[i] ^= 1 << bit
	if i < FileHeaderSize {
		for _, mode := range allModes {
			res := readAll(t, data, mode)
			if !res.newErr || !errors.Is(res.err, base.ErrCorruption) {
				t.Fatalf("flip in file header byte %d, %s: %v, want a corruption error from NewReader", i, mode, res.err)
			}
		}
		return
	}
	k, padding := l.locate(i)
	last := !padding && k == len(l.recs)-1
	where := fmt.Sprintf("flip bit %d of byte %d (record %d, padding %v)", bit, i, k, padding)
	for _, mode := range allModes {
		res := readAll(t, data, mode)
		if res.newErr {
			t.Fatalf("%s, %s: NewReader: %v", where, mode, res.err)
		}
		if res.err != nil && !errors.Is(res.err, base.ErrCorruption) {
			t.Fatalf("%s, %s: error %v does not wrap ErrCorruption", where, mode, res.err)
		}
		prefix := l.recs[:k]
		if res.err != nil && mode != SkipAnyCorruptedRecords {
			if lo, hi := l.damageRange(k, padding); !errorNamesOffsetIn(res.err, "log", lo, hi) {
				t.Fatalf("%s, %s: error %v does not name an offset in [%d, %d)", where, mode, res.err, lo, hi)
			}
		}
		switch mode {
		case AbsoluteConsistency, TolerateCorruptedTailRecords:
			if !equalRecs(res.recs, prefix) {
				t.Fatalf("%s, %s: got %v, want the %d records before the damage", where, mode, describe(res.recs), k)
			}
			if res.err == nil && (mode == AbsoluteConsistency || !last) {
				t.Fatalf("%s, %s: no error", where, mode)
			}
		case PointInTime:
			if !equalRecs(res.recs, prefix) {
				t.Fatalf("%s, %s: err %v, got %v, want the %d records before the damage", where, mode, res.err, describe(res.recs), k)
			}
			if res.err != nil {
				if res.stopped != nil {
					t.Fatalf("%s, %s: error %v, and Stopped() = %v too", where, mode, res.err, res.stopped)
				}
				break
			}
			if !last {
				t.Fatalf("%s, %s: damage followed by intact records ended the log quietly (stopped %v)", where, mode, res.stopped)
			}
			if res.stopped == nil && res.stats.TailDroppedBytes == 0 {
				t.Fatalf("%s, %s: Stopped() is nil and no tail was dropped", where, mode)
			}
			if res.stopped != nil && !errors.Is(res.stopped, base.ErrCorruption) {
				t.Fatalf("%s, %s: Stopped() = %v", where, mode, res.stopped)
			}
		case SkipAnyCorruptedRecords:
			want := l.recs
			if !padding {
				want = without(l.recs, k)
			}
			if res.err != nil || !equalRecs(res.recs, want) {
				t.Fatalf("%s, %s: err %v, got %v, want %v", where, mode, res.err, describe(res.recs), describe(want))
			}
			if res.stats.Corruptions == 0 && !(last && res.stats.TailDroppedBytes > 0) {
				t.Fatalf("%s, %s: damage not counted: %+v", where, mode, res.stats)
			}
			if !padding && res.stats.DroppedRecords == 0 {
				t.Fatalf("%s, %s: dropped record not counted: %+v", where, mode, res.stats)
			}
		}
	}
}

// TestBitFlipEveryByte flips a bit in every byte of a small log, for every
// checksummed type and every mode.
func TestBitFlipEveryByte(t *testing.T) {
	for _, ct := range checkedTypes {
		l := newLayout(t, 13, ct, smallRecords())
		for i := range int64(len(l.data)) {
			checkFlip(t, l, i, uint(i*5)%8)
		}
	}
}

func TestBitFlipMultiBlock(t *testing.T) {
	for _, ct := range sampledTypes(checksum.CRC32c, checksum.XXH3, checksum.CRC64) {
		l := newLayout(t, 14, ct, multiBlockRecords())
		offsets := l.nearBoundaries(0, int64(len(l.data)), 8, 397)
		if longTests {
			offsets = offsets[:0]
			for i := range int64(len(l.data)) {
				offsets = append(offsets, i)
			}
		}
		for _, i := range offsets {
			checkFlip(t, l, i, uint(i*3)%8)
		}
	}
}

// TestChecksumTypeFromHeader: the reader takes the checksum type from the
// file, so a log written under one setting reads back under any other (the
// reader is not even told the setting).
func TestChecksumTypeFromHeader(t *testing.T) {
	recs := smallRecords()
	for _, ct := range allTypes {
		data, _ := writeLog(t, 15, ct, recs)
		res := readAll(t, data, AbsoluteConsistency)
		if res.err != nil || !equalRecs(res.recs, recs) || res.r.ChecksumType() != ct {
			t.Fatalf("%s: err %v, type %s", ct, res.err, res.r.ChecksumType())
		}
		// Forging the type byte (with a recomputed header CRC) makes every
		// fragment fail: the type really is what the fragments are checked with.
		if ct == checksum.None {
			continue
		}
		forged := bytes.Clone(data)
		other := checksum.TypeFromCode(1 + ct.Code()%5) // another checked type
		forged[9] = other.Code()
		binary.LittleEndian.PutUint32(forged[20:], headerChecksum(forged[:20]))
		res = readAll(t, forged, SkipAnyCorruptedRecords)
		if res.err != nil || len(res.recs) != 0 || res.stats.Corruptions == 0 {
			t.Fatalf("%s forged as %s: err %v, %d records survived", ct, other, res.err, len(res.recs))
		}
		// Without the recomputed CRC the header itself fails.
		forged = bytes.Clone(data)
		forged[9] = other.Code()
		if res := readAll(t, forged, PointInTime); !res.newErr || !strings.Contains(res.err.Error(), "file header checksum mismatch") {
			t.Fatalf("%s: changed type byte: %v", ct, res.err)
		}
	}
}

func TestFileHeaderErrors(t *testing.T) {
	good, _ := writeLog(t, 16, checksum.XXH3, [][]byte{[]byte("hello")})
	withHeader := func(edit func(h []byte)) []byte {
		d := bytes.Clone(good)
		edit(d)
		binary.LittleEndian.PutUint32(d[20:], headerChecksum(d[:20]))
		return d
	}
	cases := []struct {
		name string
		data []byte
		msg  string
	}{
		{"bad magic", append([]byte("NOTALOG!"), good[8:]...), "bad magic"},
		{"garbage short file", []byte("garbage"), "bad magic"},
		{"header crc", append(bytes.Clone(good[:20]), append([]byte{1, 2, 3, 4}, good[24:]...)...), "file header checksum mismatch"},
		{"version", withHeader(func(h []byte) { h[8] = 3 }), "unsupported record log format version 3 (this build reads version 2)"},
		// Version 1 checksummed only a fragment's type and payload; Vigil
		// had made no release, so it is refused, not read.
		{"version 1", withHeader(func(h []byte) { h[8] = 1 }), "unsupported record log format version 1 (this build reads version 2); version 1, whose fragment checksums do not cover the fragment header, is no longer read"},
		{"checksum type", withHeader(func(h []byte) { h[9] = 6 }), "unknown checksum type 6"},
		{"reserved", withHeader(func(h []byte) { h[10] = 2 }), "reserved header bytes"},
		{"zeroed header then data", append(make([]byte, FileHeaderSize), good[FileHeaderSize:]...), "zeroed file header, but data follows"},
		{"zeroed header then data in a later block", append(make([]byte, 2*BlockSize+5), 1), "data follows at offset 65541"},
	}
	for _, c := range cases {
		for _, mode := range allModes {
			_, err := NewReader(bytes.NewReader(c.data), "000016.log", mode)
			if !errors.Is(err, base.ErrCorruption) || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), "000016.log") {
				t.Errorf("%s, %s: %v, want a corruption error naming the file and saying %q", c.name, mode, err, c.msg)
			}
		}
	}
	// Torn or zeroed headers: an empty log, except in AbsoluteConsistency.
	empties := map[string][]byte{
		"empty":            nil,
		"torn magic":       []byte("VIGL"),
		"torn after magic": good[:FileHeaderSize-1],
		"zeros":            make([]byte, 10),
		"zeroed file":      make([]byte, BlockSize+100),
	}
	for name, data := range empties {
		for _, mode := range allModes {
			res := readAll(t, data, mode)
			if mode == AbsoluteConsistency {
				if !res.newErr || !errors.Is(res.err, base.ErrCorruption) {
					t.Errorf("%s, %s: %v", name, mode, res.err)
				}
				continue
			}
			if res.err != nil || len(res.recs) != 0 || res.stats.DroppedBytes != int64(len(data)) || res.r.CheckLogNumber(99) != nil {
				t.Errorf("%s, %s: err %v, %d records, stats %+v", name, mode, res.err, len(res.recs), res.stats)
			}
		}
	}
	if _, err := NewReader(bytes.NewReader(good), "x", RecoveryMode(4)); !errors.Is(err, base.ErrInvalidArgument) {
		t.Errorf("invalid mode: %v", err)
	}
}

func TestCheckLogNumber(t *testing.T) {
	data, _ := writeLog(t, 1<<40+5, checksum.CRC32c, nil)
	r, err := NewReader(bytes.NewReader(data), "000005.log", PointInTime)
	if err != nil {
		t.Fatal(err)
	}
	if r.LogNumber() != 1<<40+5 || r.CheckLogNumber(1<<40+5) != nil {
		t.Fatalf("log number %d", r.LogNumber())
	}
	if err := r.CheckLogNumber(5); !errors.Is(err, base.ErrCorruption) || !strings.Contains(err.Error(), "log number mismatch") {
		t.Fatalf("mismatch: %v", err)
	}
}

// TestZeroedTail: zeros from a record boundary to end of file (space
// reserved past the log, or a file extended before its data reached disk)
// are the end of the log in every mode, counted as unwritten; zeros that
// cut a record short are a torn tail; zeros followed by data are
// corruption.
func TestZeroedTail(t *testing.T) {
	recs := smallRecords()
	data, _ := writeLog(t, 17, checksum.XXH3, recs)
	for _, n := range []int{1, 6, 7, 100, BlockSize, 3 * BlockSize} {
		z := append(bytes.Clone(data), make([]byte, n)...)
		for _, mode := range allModes {
			res := readAll(t, z, mode)
			if res.err != nil || res.stopped != nil || !equalRecs(res.recs, recs) || res.stats.UnwrittenBytes != int64(n) ||
				res.stats.DroppedBytes != 0 || res.stats.Corruptions != 0 || res.r.Offset() != int64(len(data)) {
				t.Fatalf("%d zeros, %s: err %v stopped %v, %d records, stats %+v", n, mode, res.err, res.stopped, len(res.recs), res.stats)
			}
		}
	}
	// Zeros after the FIRST and a MIDDLE fragment of a record whose LAST never came: a
	// torn record, dropped except in AbsoluteConsistency.
	long := append(smallRecords(), pattern(7, 3*BlockSize))
	ldata, _ := writeLog(t, 19, checksum.XXH3, long)
	if len(ldata) < 3*BlockSize {
		t.Fatalf("the long record should span blocks 0..3; the log has %d bytes", len(ldata))
	}
	cut := append(bytes.Clone(ldata[:2*BlockSize]), make([]byte, BlockSize/2)...)
	for _, mode := range allModes {
		res := readAll(t, cut, mode)
		if mode == AbsoluteConsistency {
			if res.err == nil || !strings.Contains(res.err.Error(), "torn") {
				t.Fatalf("zeros inside a record, %s: %v", mode, res.err)
			}
			continue
		}
		if res.err != nil || !equalRecs(res.recs, long[:len(long)-1]) || res.stats.DroppedRecords != 1 || res.stats.UnwrittenBytes != 0 || res.stats.TailDroppedBytes == 0 {
			t.Fatalf("zeros inside a record, %s: err %v, %d records, stats %+v", mode, res.err, len(res.recs), res.stats)
		}
	}
	// Zeros in the middle: a whole block zeroed in a three-block log.
	var big [][]byte
	for i := range 40 {
		big = append(big, pattern(300+i, 2500))
	}
	l := newLayout(t, 18, checksum.XXH3, big)
	z := bytes.Clone(l.data)
	clear(z[BlockSize : 2*BlockSize])
	var survivors [][]byte
	firstLost := -1
	for k := range big {
		if l.ends[k] <= BlockSize || l.starts[k] >= 2*BlockSize {
			survivors = append(survivors, big[k])
		} else if firstLost < 0 {
			firstLost = k
		}
	}
	res := readAll(t, z, SkipAnyCorruptedRecords)
	if res.err != nil || !equalRecs(res.recs, survivors) || res.stats.Corruptions != 1 {
		t.Fatalf("zeroed block, skip: err %v, got %d records, want %d; stats %+v", res.err, len(res.recs), len(survivors), res.stats)
	}
	var lostBytes, lostRecs int64
	for k := range big {
		if l.ends[k] > BlockSize && l.starts[k] < 2*BlockSize {
			lostBytes += l.ends[k] - l.starts[k]
			lostRecs++
		}
	}
	// The records in the zeroed block are all lost, but only the damaged
	// one before it and the orphan after it can be counted.
	if res.stats.DroppedBytes != lostBytes || res.stats.DroppedRecords != 1 {
		t.Fatalf("zeroed block, skip: dropped %d bytes and %d records, want %d bytes (%d records lost)", res.stats.DroppedBytes, res.stats.DroppedRecords, lostBytes, lostRecs)
	}
	// Intact records follow the zeroed block, so PointInTime must not
	// end the log there quietly.
	res = readAll(t, z, PointInTime)
	if want := "wal: log: offset 32768: zeroed bytes followed by data at offset 65536; a valid fragment follows at offset 65536"; res.err == nil ||
		!errors.Is(res.err, base.ErrCorruption) || !strings.Contains(res.err.Error(), want) || !equalRecs(res.recs, big[:firstLost]) || res.stopped != nil {
		t.Fatalf("zeroed block, PIT: err %v (want %q) stopped %v, %d records", res.err, want, res.stopped, len(res.recs))
	}
	// The same zeros with only zeros and garbage after them (nothing that
	// verifies) end the log quietly.
	g := bytes.Clone(z[:2*BlockSize+100])
	copy(g[2*BlockSize:], bytes.Repeat([]byte{0xa5}, 100))
	res = readAll(t, g, PointInTime)
	if res.err != nil || !equalRecs(res.recs, big[:firstLost]) || res.stopped == nil || !strings.Contains(res.stopped.Error(), "zeroed bytes followed by data") {
		t.Fatalf("zeroed block then garbage, PIT: err %v stopped %v, %d records", res.err, res.stopped, len(res.recs))
	}
	if res.stats.DroppedBytes != int64(len(g))-l.starts[firstLost] {
		t.Fatalf("PIT dropped %d bytes, want %d", res.stats.DroppedBytes, int64(len(g))-l.starts[firstLost])
	}
	for _, mode := range []RecoveryMode{TolerateCorruptedTailRecords, AbsoluteConsistency} {
		if res := readAll(t, z, mode); !errors.Is(res.err, base.ErrCorruption) {
			t.Fatalf("zeroed block, %s: %v", mode, res.err)
		}
	}
}

// TestFragmentFromAnotherLog splices a fragment of log 7 into log 8 at the
// same offset. Both are valid fragments with valid checksums of their own;
// the log number bound into the checksum rejects it, and the error says so.
//
// The splice is at record 6 (offset 484), where the context values of logs
// 7 and 8 differ by 11. Where they differ by a power of two (at record 5,
// offset 177, by exactly 1), the two checksums differ in a single bit for
// about half of all payloads, and the diagnosis then names the likelier
// cause, a flipped bit in the stored checksum (TestChecksumFieldFlipDiagnosis):
// one 32-bit value cannot tell the two apart.
func TestFragmentFromAnotherLog(t *testing.T) {
	const k = 6
	recs := smallRecords()
	other := slices.Clone(recs)
	other[k] = pattern(999, len(recs[k])) // same size, other bytes
	a := newLayout(t, 7, checksum.XXH3, other)
	b := newLayout(t, 8, checksum.XXH3, recs)
	if d := fragmentContext(7, b.starts[k]) - fragmentContext(8, b.starts[k]); d&(d-1) == 0 || -d&(-d-1) == 0 {
		t.Fatalf("at offset %d the contexts differ by %#x, a power of two: pick another record", b.starts[k], d)
	}
	spliced := bytes.Clone(b.data)
	copy(spliced[b.starts[k]:b.ends[k]], a.data[a.starts[k]:a.ends[k]])

	// Intact records follow the spliced one: PointInTime fails.
	res := readAll(t, spliced, PointInTime)
	if res.err == nil || !equalRecs(res.recs, recs[:k]) || res.stopped != nil {
		t.Fatalf("PIT: err %v, %d records, stopped %v", res.err, len(res.recs), res.stopped)
	}
	msg := res.err.Error()
	for _, want := range []string{"log number mismatch", "computed for log 7 at this offset (this is log 8", fmt.Sprintf("offset %d", b.starts[k]), "checksum mismatch"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("error %q does not say %q", msg, want)
		}
	}
	res = readAll(t, spliced, SkipAnyCorruptedRecords)
	if res.err != nil || !equalRecs(res.recs, without(recs, k)) || res.stats.Corruptions != 1 || res.stats.DroppedRecords != 1 {
		t.Fatalf("Skip: err %v, %d records, stats %+v", res.err, len(res.recs), res.stats)
	}
	if !strings.Contains(res.r.LastCorruption().Error(), "log 7") {
		t.Fatalf("LastCorruption: %v", res.r.LastCorruption())
	}
}

// TestMisplacedFragment swaps two same-size records inside one log: each
// fragment is intact, but the offset bound into its checksum is wrong.
func TestMisplacedFragment(t *testing.T) {
	recs := [][]byte{pattern(1, 40), pattern(2, 40), pattern(3, 40), pattern(4, 40)}
	l := newLayout(t, 3, checksum.CRC32c, recs)
	d := bytes.Clone(l.data)
	copy(d[l.starts[1]:l.ends[1]], l.data[l.starts[2]:l.ends[2]])
	copy(d[l.starts[2]:l.ends[2]], l.data[l.starts[1]:l.ends[1]])
	res := readAll(t, d, SkipAnyCorruptedRecords)
	// One incident: the resync after the first bad fragment finds the
	// second one bad too and skips both.
	if res.err != nil || !equalRecs(res.recs, [][]byte{recs[0], recs[3]}) || res.stats.Corruptions != 1 || res.stats.DroppedBytes != l.ends[2]-l.starts[1] {
		t.Fatalf("err %v, got %v, stats %+v", res.err, describe(res.recs), res.stats)
	}
	// The fragment found at starts[1] was written for starts[2].
	msg := res.r.LastCorruption().Error()
	if want := fmt.Sprintf("offset %d: FULL fragment (length 40): checksum mismatch", l.starts[1]); !strings.Contains(msg, want) {
		t.Fatalf("error %q does not say %q", msg, want)
	}
	if want := fmt.Sprintf("or for offset %d of this log (a misplaced fragment)", l.starts[2]); !strings.Contains(msg, want) {
		t.Fatalf("error %q does not say %q", msg, want)
	}
}

// TestFragmentOrder: intact fragments in an impossible order (written here
// with checksum None so the test can build them by hand).
func TestFragmentOrder(t *testing.T) {
	build := func(frags ...string) []byte {
		var hdr [FileHeaderSize]byte
		encodeFileHeader(hdr[:], 1, checksum.None, false)
		d := hdr[:]
		for _, f := range frags {
			typ := map[byte]byte{'F': fragFull, '1': fragFirst, 'M': fragMiddle, 'L': fragLast}[f[0]]
			payload := f[1:]
			d = binary.LittleEndian.AppendUint32(d, 0)
			d = binary.LittleEndian.AppendUint16(d, uint16(len(payload)))
			d = append(d, typ)
			d = append(d, payload...)
		}
		return d
	}
	cases := []struct {
		name  string
		data  []byte
		skip  []string // records SkipAnyCorruptedRecords returns
		pit   []string // records PointInTime returns
		msg   string
		tail  bool // the anomaly is a torn tail
		nCorr int
	}{
		{"orphan middle", build("Fa", "Mb", "Fc"), []string{"a", "c"}, []string{"a"}, "MIDDLE fragment (length 1) without a FIRST", false, 1},
		{"orphan last", build("La", "Fb"), []string{"b"}, nil, "LAST fragment (length 1) without a FIRST", false, 1},
		{"first then full", build("1a", "Fb"), []string{"b"}, nil, "has no LAST fragment; a FULL fragment follows at offset 32", false, 1},
		{"first then first", build("1a", "1b", "Lc", "Fd"), []string{"bc", "d"}, nil, "has no LAST fragment; a FIRST fragment follows", false, 1},
		{"first middle then full", build("1a", "Mb", "Fc"), []string{"c"}, nil, "no LAST fragment", false, 1},
		{"incomplete at end", build("Fa", "1b", "Mc"), []string{"a"}, []string{"a"}, "torn tail: the record starting here has no LAST fragment", true, 0},
		{"good", build("Fa", "1b", "Mc", "Ld", "F"), []string{"a", "bcd", ""}, []string{"a", "bcd", ""}, "", false, 0},
	}
	strs := func(recs [][]byte) []string {
		s := []string{}
		for _, r := range recs {
			s = append(s, string(r))
		}
		return s
	}
	for _, c := range cases {
		res := readAll(t, c.data, SkipAnyCorruptedRecords)
		if res.err != nil || !slices.Equal(strs(res.recs), append([]string{}, c.skip...)) || res.stats.Corruptions != c.nCorr {
			t.Errorf("%s, skip: err %v, got %q, want %q, stats %+v", c.name, res.err, strs(res.recs), c.skip, res.stats)
		}
		res = readAll(t, c.data, PointInTime)
		if res.err != nil || !slices.Equal(strs(res.recs), append([]string{}, c.pit...)) {
			t.Errorf("%s, PIT: err %v, got %q, want %q", c.name, res.err, strs(res.recs), c.pit)
		}
		if c.msg == "" {
			continue
		}
		res = readAll(t, c.data, AbsoluteConsistency)
		if res.err == nil || !strings.Contains(res.err.Error(), c.msg) {
			t.Errorf("%s, absolute: %v, want %q", c.name, res.err, c.msg)
		}
		res = readAll(t, c.data, TolerateCorruptedTailRecords)
		if (res.err == nil) != c.tail {
			t.Errorf("%s, tolerate: %v", c.name, res.err)
		}
	}
}

// TestBadLengthAndType: with checksum None only the structure can be
// checked; a length past the block and an unknown type are still caught.
func TestBadLengthAndType(t *testing.T) {
	recs := [][]byte{pattern(1, BlockSize), pattern(2, 10), pattern(3, 20)}
	l := newLayout(t, 2, checksum.None, recs)
	// Record 1 sits in block 1, which is full because record 2 ... is not
	// enough to fill it; so damage record 0's FIRST fragment in block 0.
	d := bytes.Clone(l.data)
	binary.LittleEndian.PutUint16(d[l.starts[0]+4:], MaxFragmentPayload)
	res := readAll(t, d, AbsoluteConsistency)
	if res.err == nil || !strings.Contains(res.err.Error(), "bad fragment length 32761: only 32737 bytes left in the block") {
		t.Fatalf("bad length: %v", res.err)
	}
	d = bytes.Clone(l.data)
	d[l.starts[1]+6] = 9
	res = readAll(t, d, AbsoluteConsistency)
	if res.err == nil || !strings.Contains(res.err.Error(), "bad fragment type 9") {
		t.Fatalf("bad type: %v", res.err)
	}
	res = readAll(t, d, SkipAnyCorruptedRecords)
	if res.err != nil || !equalRecs(res.recs, recs[:1]) {
		// With None nothing can be verified, so Skip resyncs at the next
		// block; records 1 and 2 share the damaged block.
		t.Fatalf("bad type, skip: %v, %v", res.err, describe(res.recs))
	}
}

// TestLengthPastEOFWithDataAfter: in the last block, a length that runs past
// end of file is a torn write only if nothing valid follows and the
// fragment is not whole under a shorter length.
func TestLengthPastEOFWithDataAfter(t *testing.T) {
	recs := smallRecords()
	l := newLayout(t, 4, checksum.XXH3, recs)
	d := bytes.Clone(l.data)
	binary.LittleEndian.PutUint16(d[l.starts[3]+4:], 5000) // record 3 claims 5000 bytes
	res := readAll(t, d, TolerateCorruptedTailRecords)
	want := fmt.Sprintf("bad fragment length 5000 runs past end of file, but a valid fragment follows at offset %d", l.starts[4])
	if res.err == nil || !strings.Contains(res.err.Error(), want) {
		t.Fatalf("got %v, want %q", res.err, want)
	}
	res = readAll(t, d, SkipAnyCorruptedRecords)
	if res.err != nil || !equalRecs(res.recs, without(recs, 3)) {
		t.Fatalf("skip: %v %v", res.err, describe(res.recs))
	}
	// The same damage on the last record: nothing follows it, but the
	// fragment is whole and verifies with the length it was written with
	// (the checksum covers the length), so it is no torn write either.
	d = bytes.Clone(l.data)
	n := len(recs) - 1
	binary.LittleEndian.PutUint16(d[l.starts[n]+4:], 5000)
	res = readAll(t, d, TolerateCorruptedTailRecords)
	want = fmt.Sprintf("offset %d: bad fragment length 5000 runs past end of file, but the FULL fragment is whole: it verifies with length %d", l.starts[n], len(recs[n]))
	if res.err == nil || !strings.Contains(res.err.Error(), want) || !equalRecs(res.recs, recs[:n]) {
		t.Fatalf("last record: %v %v, want %q", res.err, describe(res.recs), want)
	}
	// Cut short as well, it is a torn write: its bytes are not all there.
	res = readAll(t, d[:len(d)-1], TolerateCorruptedTailRecords)
	if res.err != nil || !equalRecs(res.recs, recs[:n]) || res.stats.TailDroppedBytes != l.ends[n]-l.starts[n]-1 {
		t.Fatalf("last record, cut: %v %v %+v", res.err, describe(res.recs), res.stats)
	}
}

// TestSkipStats: Skip mode's counters add up.
func TestSkipStats(t *testing.T) {
	recs := smallRecords()
	l := newLayout(t, 5, checksum.CRC64, recs)
	d := bytes.Clone(l.data)
	for _, k := range []int{2, 6, 9} {
		d[l.ends[k]-1] ^= 0x40 // damage the last byte of records 2, 6, 9 (9 is empty: its checksum byte... no, its type byte)
	}
	res := readAll(t, d, SkipAnyCorruptedRecords)
	want := without(without(without(recs, 9), 6), 2)
	if res.err != nil || !equalRecs(res.recs, want) {
		t.Fatalf("err %v, got %v", res.err, describe(res.recs))
	}
	st := res.stats
	var dropped int64
	for _, k := range []int{2, 6, 9} {
		dropped += l.ends[k] - l.starts[k]
	}
	var bytesOK int64
	for _, r := range want {
		bytesOK += int64(len(r))
	}
	if st.Corruptions != 3 || st.DroppedRecords != 3 || st.DroppedBytes != dropped || st.Records != int64(len(want)) || st.Bytes != bytesOK {
		t.Fatalf("stats %+v, want 3 corruptions, 3 records and %d bytes dropped", st, dropped)
	}
}

func TestRecoveryModeNames(t *testing.T) {
	for m, name := range map[RecoveryMode]string{PointInTime: "PointInTime", TolerateCorruptedTailRecords: "TolerateCorruptedTailRecords",
		AbsoluteConsistency: "AbsoluteConsistency", SkipAnyCorruptedRecords: "SkipAnyCorruptedRecords", 4: "RecoveryMode(4)", 255: "RecoveryMode(255)"} {
		if m.String() != name || m.Valid() != (m <= 3) {
			t.Errorf("%d: %q valid %v", int(m), m.String(), m.Valid())
		}
	}
	var zero RecoveryMode
	if zero != PointInTime {
		t.Errorf("zero mode is %v, want PointInTime (the default)", zero)
	}
	for rocks, want := range map[int]RecoveryMode{0: TolerateCorruptedTailRecords, 1: AbsoluteConsistency, 2: PointInTime, 3: SkipAnyCorruptedRecords} {
		if got, err := RecoveryModeFromRocksDB(rocks); err != nil || got != want || got.RocksDB() != rocks {
			t.Errorf("FromRocksDB(%d) = %v, %v", rocks, got, err)
		}
	}
	if _, err := RecoveryModeFromRocksDB(4); !errors.Is(err, base.ErrInvalidArgument) {
		t.Errorf("FromRocksDB(4): %v", err)
	}
	for in, want := range map[string]RecoveryMode{"2": PointInTime, "pointintime": PointInTime, "kPointInTimeRecovery": PointInTime, " 0 ": TolerateCorruptedTailRecords, "kAbsoluteConsistency": AbsoluteConsistency, "3": SkipAnyCorruptedRecords} {
		if got, err := ParseRecoveryMode(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"4", "-1", "", "pit"} {
		if _, err := ParseRecoveryMode(in); !errors.Is(err, base.ErrInvalidArgument) {
			t.Errorf("Parse(%q): %v", in, err)
		}
	}
}

// TestReaderShortReads: the reader does not depend on how the io.Reader
// splits the bytes.
func TestReaderShortReads(t *testing.T) {
	recs := multiBlockRecords()
	data, _ := writeLog(t, 6, checksum.XXHash, recs)
	for name, rd := range map[string]io.Reader{
		"one byte":      iotest.OneByteReader(bytes.NewReader(data)),
		"half":          iotest.HalfReader(bytes.NewReader(data)),
		"data with EOF": iotest.DataErrReader(bytes.NewReader(data)),
	} {
		r, err := NewReader(rd, "log", AbsoluteConsistency)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, want := range recs {
			got, err := r.Next()
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: record %d: %v", name, i, err)
			}
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// TestReaderIOError: an I/O error is not corruption and ends reading in
// every mode, PointInTime included (a log that cannot be read is not a log
// that ends there).
func TestReaderIOError(t *testing.T) {
	recs := multiBlockRecords()
	data, _ := writeLog(t, 6, checksum.XXH3, recs)
	for _, mode := range allModes {
		rd := io.MultiReader(bytes.NewReader(data[:BlockSize+10]), iotest.ErrReader(errTestIO))
		r, err := NewReader(rd, "000006.log", mode)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		for {
			_, err = r.Next()
			if err != nil {
				break
			}
			n++
		}
		if !errors.Is(err, errTestIO) || errors.Is(err, base.ErrCorruption) || !strings.Contains(err.Error(), "000006.log") {
			t.Fatalf("%s: %v", mode, err)
		}
		if n != 1 {
			t.Fatalf("%s: %d records before the error, want 1", mode, n)
		}
	}
}
