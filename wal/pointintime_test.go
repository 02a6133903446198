package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/invariants"
)

// handLog builds a one-block log of number 1 from fragment specs, each a
// type letter (F FULL, 1 FIRST, M MIDDLE, L LAST, ? the unknown type 9)
// and a payload, with correct checksums for ct: intact fragments in
// whatever order the test wants.
func handLog(ct checksum.Type, frags ...string) []byte {
	var hdr [FileHeaderSize]byte
	encodeFileHeader(hdr[:], 1, ct, false)
	d := hdr[:]
	for _, f := range frags {
		typ := map[byte]byte{'F': fragFull, '1': fragFirst, 'M': fragMiddle, 'L': fragLast, '?': 9}[f[0]]
		off := int64(len(d))
		d = binary.LittleEndian.AppendUint32(d, 0)
		d = binary.LittleEndian.AppendUint16(d, uint16(len(f)-1))
		d = append(d, typ)
		d = append(d, f[1:]...)
		if ct != checksum.None {
			binary.LittleEndian.PutUint32(d[off:], fragmentChecksum(ct, 1, off, d[off+checksumSize:]))
		}
	}
	return d
}

// handOffset returns the file offset of fragment i of a handLog.
func handOffset(frags []string, i int) int64 {
	off := int64(FileHeaderSize)
	for _, f := range frags[:i] {
		off += FragmentHeaderSize + int64(len(f)-1)
	}
	return off
}

// handRecords returns the payloads of the given specs, for want lists.
func handRecords(specs ...string) [][]byte {
	out := [][]byte{}
	for _, s := range specs {
		out = append(out, []byte(s))
	}
	return out
}

// retype gives the fragment at off the type typ and a checksum that
// matches it, so that only the type is wrong.
func retype(d []byte, ct checksum.Type, logNum uint64, off int64, typ byte) {
	length := int64(binary.LittleEndian.Uint16(d[off+4:]))
	d[off+6] = typ
	binary.LittleEndian.PutUint32(d[off:], fragmentChecksum(ct, logNum, off, d[off+checksumSize:off+FragmentHeaderSize+length]))
}

// pitCase is one corruption, placed either before intact records (an
// error in PointInTime) or as the last thing in the file (a quiet stop).
type pitCase struct {
	name string
	data []byte
	want [][]byte // records returned
	off  int64    // the offset the error or Stopped must name
	msg  string   // what it must say
	// err: Next must fail. Otherwise the log ends quietly: Stopped reports
	// msg at off, or, if torn, Stopped is nil and the bytes from off on
	// are a dropped torn tail.
	err, torn bool
}

func pointInTimeCases(t *testing.T) []pitCase {
	const ct = checksum.XXH3
	small := newLayout(t, 1, ct, smallRecords())
	n := len(small.recs)
	edit := func(l *layout, f func(d []byte)) []byte {
		d := bytes.Clone(l.data)
		f(d)
		return d
	}
	// A log whose last record fills block 0 exactly: the file is one full
	// block, so a bad length there is ckLength with nothing after it.
	fullRecs := [][]byte{pattern(1, 10), pattern(2, BlockSize-FileHeaderSize-2*FragmentHeaderSize-10)}
	full := newLayout(t, 1, ct, fullRecs)
	if len(full.data) != BlockSize {
		t.Fatalf("full-block log has %d bytes", len(full.data))
	}
	// multiBlockRecords: record 0 ends block 0 with 3 bytes of padding.
	multi := newLayout(t, 1, ct, multiBlockRecords())
	padOff := int64(BlockSize - 3)
	var cases []pitCase
	add := func(c pitCase) { cases = append(cases, c) }

	// Checksum mismatch (a flipped payload bit).
	add(pitCase{name: "checksum/followed", err: true, off: small.starts[5], msg: "checksum mismatch", want: small.recs[:5],
		data: edit(small, func(d []byte) { d[small.starts[5]+20] ^= 0x10 })})
	add(pitCase{name: "checksum/last", off: small.starts[n-1], msg: "checksum mismatch", want: small.recs[:n-1],
		data: edit(small, func(d []byte) { d[small.starts[n-1]+20] ^= 0x10 })})
	// A flipped length bit: the checksum covers the wrong bytes and the
	// next fragment is not where the length points, so it is found by the
	// search, not by the hint.
	add(pitCase{name: "checksum via length/followed", err: true, off: small.starts[5], msg: "checksum mismatch", want: small.recs[:5],
		data: edit(small, func(d []byte) { d[small.starts[5]+4] ^= 0x02 })})
	add(pitCase{name: "checksum via length/last", off: small.starts[n-1], msg: "checksum mismatch", want: small.recs[:n-1],
		data: edit(small, func(d []byte) { d[small.starts[n-1]+4] ^= 0x40 })}) // 64 becomes 0 (a longer length would run past end of file: "length past EOF/last")
	// Bad length in a full block.
	add(pitCase{name: "length in full block/followed", err: true, off: FileHeaderSize, msg: "bad fragment length 32761: only 32737 bytes left in the block", want: nil,
		data: edit(multi, func(d []byte) { binary.LittleEndian.PutUint16(d[FileHeaderSize+4:], MaxFragmentPayload) })})
	add(pitCase{name: "length in full block/last", off: full.starts[1], msg: "bad fragment length", want: fullRecs[:1],
		data: edit(full, func(d []byte) { binary.LittleEndian.PutUint16(d[full.starts[1]+4:], uint16(len(fullRecs[1])+1)) })})
	// Length past end of file: with a valid fragment after it, corruption
	// by definition; as the last thing in the file, corruption if the
	// fragment is whole (it verifies with the length it was written with),
	// a torn write if it is not.
	add(pitCase{name: "length past EOF/followed", err: true, off: small.starts[3], want: small.recs[:3],
		msg:  fmt.Sprintf("bad fragment length 5000 runs past end of file, but a valid fragment follows at offset %d", small.starts[4]),
		data: edit(small, func(d []byte) { binary.LittleEndian.PutUint16(d[small.starts[3]+4:], 5000) })})
	add(pitCase{name: "length past EOF/last", off: small.starts[n-1], want: small.recs[:n-1],
		msg:  fmt.Sprintf("bad fragment length 5000 runs past end of file, but the FULL fragment is whole: it verifies with length %d", len(small.recs[n-1])),
		data: edit(small, func(d []byte) { binary.LittleEndian.PutUint16(d[small.starts[n-1]+4:], 5000) })})
	add(pitCase{name: "length past EOF/last, cut", torn: true, off: small.starts[n-1], want: small.recs[:n-1],
		data: edit(small, func(d []byte) { binary.LittleEndian.PutUint16(d[small.starts[n-1]+4:], 5000) })[:len(small.data)-1]})
	// Unknown type under a checksum that matches (a writer bug, or a 2^-32
	// accident): the checksum does not catch it, the structure does.
	add(pitCase{name: "type/followed", err: true, off: small.starts[5], msg: "bad fragment type 9", want: small.recs[:5],
		data: edit(small, func(d []byte) { retype(d, ct, 1, small.starts[5], 9) })})
	add(pitCase{name: "type/last", off: small.starts[n-1], msg: "bad fragment type 9", want: small.recs[:n-1],
		data: edit(small, func(d []byte) { retype(d, ct, 1, small.starts[n-1], 9) })})
	// Non-zero block padding: no record is damaged, but intact records
	// after it make it corruption all the same.
	add(pitCase{name: "padding/followed", err: true, off: padOff, msg: "3 bytes of block padding are not zero", want: multi.recs[:1],
		data: edit(multi, func(d []byte) { d[padOff+1] = 0x20 })})
	add(pitCase{name: "padding/last", off: padOff, msg: "3 bytes of block padding are not zero", want: multi.recs[:1],
		data: edit(multi, func(d []byte) { d[padOff+1] = 0x20 })[:BlockSize]})
	// Zeroed bytes followed by data: by intact records, or only by the
	// rest of the zeroed record.
	add(pitCase{name: "zeroed/followed", err: true, off: small.starts[5], msg: fmt.Sprintf("zeroed bytes followed by data at offset %d", small.starts[6]), want: small.recs[:5],
		data: edit(small, func(d []byte) { clear(d[small.starts[5]:small.ends[5]]) })})
	add(pitCase{name: "zeroed/last", off: small.starts[n-1], msg: fmt.Sprintf("zeroed bytes followed by data at offset %d", small.starts[n-1]+20), want: small.recs[:n-1],
		data: edit(small, func(d []byte) { clear(d[small.starts[n-1] : small.starts[n-1]+20]) })})
	// Fragments out of order, each intact: the fragment that reveals the
	// disorder verifies, so these are followed by intact data even at the
	// very end of the file. Only without checksums (the blind spot below)
	// does PointInTime end the log at them quietly.
	for _, o := range []struct {
		name  string
		frags []string
		at    int // fragment the error names
		want  [][]byte
		msg   string
	}{
		{"orphan middle/followed", []string{"Fa", "Mb", "Fc"}, 1, handRecords("a"), "MIDDLE fragment (length 1) without a FIRST"},
		{"orphan last/at end", []string{"Fa", "Lb"}, 1, handRecords("a"), "LAST fragment (length 1) without a FIRST"},
		{"partial then full/followed", []string{"Fz", "1a", "Fb", "Fc"}, 1, handRecords("z"), "has no LAST fragment; a FULL fragment follows at offset 40"},
		{"partial then first/at end", []string{"Fz", "1a", "Mb", "1c", "Ld"}, 1, handRecords("z"), "has no LAST fragment; a FIRST fragment follows at offset 48"},
	} {
		add(pitCase{name: o.name, err: true, off: handOffset(o.frags, o.at), msg: o.msg, want: o.want, data: handLog(ct, o.frags...)})
	}

	// The blind spot: with checksum type None nothing verifies, so every
	// corruption ends the log quietly, even with intact records after it.
	none := newLayout(t, 1, checksum.None, smallRecords())
	add(pitCase{name: "none: type/followed", off: none.starts[5], msg: "bad fragment type 9", want: none.recs[:5],
		data: edit(none, func(d []byte) { d[none.starts[5]+6] = 9 })})
	add(pitCase{name: "none: zeroed/followed", off: none.starts[5], msg: "zeroed bytes followed by data", want: none.recs[:5],
		data: edit(none, func(d []byte) { clear(d[none.starts[5]:none.ends[5]]) })})
	for _, o := range []struct {
		name  string
		frags []string
		at    int
		want  [][]byte
		msg   string
	}{
		{"none: orphan/followed", []string{"Fa", "Mb", "Fc"}, 1, handRecords("a"), "MIDDLE fragment (length 1) without a FIRST"},
		{"none: partial/followed", []string{"1a", "Fb", "Fc"}, 0, nil, "has no LAST fragment; a FULL fragment follows at offset 32"},
	} {
		add(pitCase{name: o.name, off: handOffset(o.frags, o.at), msg: o.msg, want: o.want, data: handLog(checksum.None, o.frags...)})
	}
	return cases
}

// TestPointInTimeCorruptionKinds: for each kind of corruption the reader
// knows, PointInTime fails (naming the file and the offset of the damage)
// when anything verifiable follows the damage, and ends the log quietly
// (Stopped reports it, Stats count the dropped bytes) when the damage is
// the last thing in the file, which a crash-cut tail could have left.
// Tolerate fails with the same error in both cases (but a torn tail), and
// the records returned are the same in every mode but Skip.
func TestPointInTimeCorruptionKinds(t *testing.T) {
	for _, c := range pointInTimeCases(t) {
		t.Run(c.name, func(t *testing.T) {
			res := readAll(t, c.data, PointInTime)
			if res.newErr {
				t.Fatalf("NewReader: %v", res.err)
			}
			if !equalRecs(res.recs, c.want) {
				t.Fatalf("got records %v, want %v (err %v)", describe(res.recs), describe(c.want), res.err)
			}
			tol := readAll(t, c.data, TolerateCorruptedTailRecords)
			if !equalRecs(tol.recs, c.want) || (tol.err == nil) != c.torn {
				t.Fatalf("Tolerate: records %v, err %v", describe(tol.recs), tol.err)
			}
			switch {
			case c.err:
				if res.err == nil || !errors.Is(res.err, base.ErrCorruption) || errorOffset(res.err, "log") != c.off || !strings.Contains(res.err.Error(), c.msg) {
					t.Fatalf("err %v, want a corruption error at offset %d saying %q", res.err, c.off, c.msg)
				}
				if res.stopped != nil {
					t.Fatalf("Stopped() = %v after an error", res.stopped)
				}
				if !strings.HasPrefix(res.err.Error(), tol.err.Error()) {
					t.Fatalf("PointInTime: %v\nTolerate: %v", res.err, tol.err)
				}
				if res.r.LastCorruption().Error() != res.err.Error() {
					t.Fatalf("LastCorruption %v, Next %v", res.r.LastCorruption(), res.err)
				}
			case c.torn:
				if res.err != nil || res.stopped != nil || res.stats.TailDroppedBytes != int64(len(c.data))-c.off || res.stats.Corruptions != 0 {
					t.Fatalf("torn tail: err %v, stopped %v, stats %+v", res.err, res.stopped, res.stats)
				}
			default:
				if res.err != nil {
					t.Fatalf("err %v, want a quiet stop", res.err)
				}
				if res.stopped == nil || !errors.Is(res.stopped, base.ErrCorruption) || errorOffset(res.stopped, "log") != c.off || !strings.Contains(res.stopped.Error(), c.msg) {
					t.Fatalf("Stopped() = %v, want a corruption at offset %d saying %q", res.stopped, c.off, c.msg)
				}
				if strings.Contains(res.stopped.Error(), "follows at offset") && !strings.Contains(c.msg, "follows at offset") {
					t.Fatalf("Stopped() = %v claims intact data follows", res.stopped)
				}
				// Everything from the damage (or the start of the record
				// it cut) to end of file is dropped.
				var kept int64
				if len(c.want) > 0 {
					kept = res.r.Offset()
				} else {
					kept = FileHeaderSize
				}
				if res.stats.DroppedBytes < int64(len(c.data))-c.off || res.stats.DroppedBytes > int64(len(c.data))-kept || res.stats.Corruptions != 1 {
					t.Fatalf("stats %+v: want %d..%d bytes dropped", res.stats, int64(len(c.data))-c.off, int64(len(c.data))-kept)
				}
				if tol.err.Error() != res.stopped.Error() {
					t.Fatalf("Stopped() = %v, Tolerate %v", res.stopped, tol.err)
				}
			}
			// Absolute agrees on the records; Skip returns at least them.
			if abs := readAll(t, c.data, AbsoluteConsistency); !equalRecs(abs.recs, c.want) || abs.err == nil {
				t.Fatalf("Absolute: records %v, err %v", describe(abs.recs), abs.err)
			}
			if skip := readAll(t, c.data, SkipAnyCorruptedRecords); skip.err != nil || len(skip.recs) < len(c.want) || !equalRecs(skip.recs[:len(c.want)], c.want) {
				t.Fatalf("Skip: records %v, err %v", describe(skip.recs), skip.err)
			}
		})
	}
}

// TestPointInTimeSearchNoAlloc: the search for intact data after damage
// reuses the one block buffer and formats nothing until it decides, so a
// damaged last record followed by 3 or by 30 blocks of bytes that never
// verify costs the same allocations, and a small constant number of them.
func TestPointInTimeSearchNoAlloc(t *testing.T) {
	if invariants.RaceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	data, _ := writeLog(t, 1, checksum.XXH3, smallRecords())
	data[len(data)-10] ^= 1 // damage the last record
	rng := newRand(9)
	measure := func(blocks int) float64 {
		d := bytes.Clone(data)
		for range blocks * BlockSize {
			d = append(d, byte(rng.Uint32()))
		}
		var stopped error
		allocs := testing.AllocsPerRun(10, func() {
			r, err := NewReader(bytes.NewReader(d), "log", PointInTime)
			if err != nil {
				t.Fatal(err)
			}
			for {
				if _, err := r.Next(); err != nil {
					break
				}
			}
			stopped = r.Stopped()
		})
		if stopped == nil {
			t.Fatalf("%d blocks of garbage: no quiet stop", blocks)
		}
		return allocs
	}
	few, many := measure(3), measure(30)
	// The Reader, its block buffer (grown by doubling to BlockSize), the
	// record buffer, and the Stopped error.
	if few != many || many > 30 {
		t.Fatalf("%.0f allocations with 3 blocks after the damage, %.0f with 30", few, many)
	}
}

// TestPointInTimeSearchIOError: an I/O error while PointInTime looks past
// damage for intact data is returned as it is, neither as corruption nor as
// a quiet stop, since the reader cannot tell which it would have been.
func TestPointInTimeSearchIOError(t *testing.T) {
	recs := multiBlockRecords()
	data, _ := writeLog(t, 6, checksum.XXH3, recs)
	data[FileHeaderSize+100] ^= 1 // record 0 fills block 0: nothing verifies after it there
	r, err := NewReader(io.MultiReader(bytes.NewReader(data[:BlockSize]), iotest.ErrReader(errTestIO)), "000006.log", PointInTime)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Next()
	if !errors.Is(err, errTestIO) || errors.Is(err, base.ErrCorruption) || !strings.Contains(err.Error(), "000006.log") || r.Stopped() != nil {
		t.Fatalf("Next: %v, Stopped %v", err, r.Stopped())
	}
}

// writeSyncedLog writes recs, syncing after each, as the DB does for synced
// batches, and returns the file's bytes.
func writeSyncedLog(t testing.TB, logNum uint64, ct checksum.Type, recs [][]byte) []byte {
	t.Helper()
	fs := vfs.NewMem()
	f, err := fs.Create("log")
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(f, "log", logNum, ct)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		end, err := w.WriteRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.SyncTo(end); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return readFile(t, fs, "log")
}

// sweepCounts classifies the outcomes of one mode over a bit-flip sweep.
type sweepCounts struct {
	flips        int
	header       int // NewReader failed (the file header was hit)
	lostErr      int // records missing, Next returned ErrCorruption
	lostLast     int // the last record missing, quietly, and the damage was in it
	lostSilently int // records missing quietly with damage elsewhere: must be 0
	errNoLoss    int // every record returned, and an error (damaged padding)
	noLoss       int // every record returned, no error
	skipCounted  int // Skip: records missing, all counted in Stats
}

func (c sweepCounts) String() string {
	return fmt.Sprintf("%d flips: header %d, lost with error %d, lost quietly in the last record %d, lost quietly elsewhere %d, error without loss %d, no loss %d, Skip counted %d",
		c.flips, c.header, c.lostErr, c.lostLast, c.lostSilently, c.errNoLoss, c.noLoss, c.skipCounted)
}

// isSubsequence reports whether got is want with some records left out.
func isSubsequence(got, want [][]byte) bool {
	i := 0
	for _, g := range got {
		for i < len(want) && !bytes.Equal(want[i], g) {
			i++
		}
		if i == len(want) {
			return false
		}
		i++
	}
	return true
}

// sweepFlip reads l's log with bit of byte i flipped in every mode and adds
// the outcome to counts, failing on any broken promise: never a panic
// (readAll would propagate it); in Tolerate, Absolute and PointInTime the
// records are a prefix of those written, and a missing record means an
// ErrCorruption from Next naming the file and the damaged range, or damage
// in the last record (indistinguishable from a crash-cut tail); in Skip
// the records are a subsequence of those written and every missing one is
// counted in Stats.
func sweepFlip(t *testing.T, l *layout, i int64, bit uint, counts *[4]sweepCounts) {
	data := bytes.Clone(l.data)
	data[i] ^= 1 << bit
	n := len(l.recs)
	for _, mode := range allModes {
		c := &counts[mode]
		c.flips++
		where := fmt.Sprintf("flip bit %d of byte %d, %s", bit, i, mode)
		res := readAll(t, data, mode)
		if res.err != nil && !errors.Is(res.err, base.ErrCorruption) {
			t.Fatalf("%s: error %v does not wrap ErrCorruption", where, res.err)
		}
		if res.newErr {
			if i >= FileHeaderSize {
				t.Fatalf("%s: NewReader: %v", where, res.err)
			}
			c.header++
			continue
		}
		k, padding := l.locate(i)
		missing := n - len(res.recs)
		if mode == SkipAnyCorruptedRecords {
			if res.err != nil || !isSubsequence(res.recs, l.recs) {
				t.Fatalf("%s: err %v, records %v are not a subsequence of those written", where, res.err, describe(res.recs))
			}
			switch {
			case missing == 0:
				c.noLoss++
			case res.stats.DroppedRecords >= int64(missing):
				c.skipCounted++
			default:
				t.Fatalf("%s: %d records missing, stats %+v", where, missing, res.stats)
			}
			continue
		}
		if !equalRecs(res.recs, l.recs[:len(res.recs)]) {
			t.Fatalf("%s: records %v are not a prefix of those written", where, describe(res.recs))
		}
		if res.err != nil {
			if lo, hi := l.damageRange(k, padding); !errorNamesOffsetIn(res.err, "log", lo, hi) {
				t.Fatalf("%s: error %v does not name an offset in [%d, %d)", where, res.err, lo, hi)
			}
		}
		switch {
		case missing == 0 && res.err != nil:
			c.errNoLoss++
		case missing == 0:
			c.noLoss++
		case res.err != nil:
			c.lostErr++
		case k == n-1 && !padding:
			c.lostLast++
			if mode == PointInTime && res.stopped == nil && res.stats.TailDroppedBytes == 0 {
				t.Fatalf("%s: last record lost, but Stopped() is nil and no tail was dropped", where)
			}
		default:
			c.lostSilently++
			t.Errorf("%s: %d records lost without an error (damage in record %d of %d, padding %v, stopped %v)", where, missing, k, n, padding, res.stopped)
		}
	}
}

// TestBitFlipSweep flips every bit of a small synced log of several
// records, for every checksummed type, in every mode, and checks that no
// acknowledged record is lost silently but where a crash could have lost
// it. It logs the outcome counts per mode (go test -v -run BitFlipSweep).
func TestBitFlipSweep(t *testing.T) {
	recs := [][]byte{pattern(1, 0), pattern(2, 5), pattern(3, 40), pattern(4, 300), pattern(5, 1), pattern(6, 120), pattern(7, 64)}
	total := [4]sweepCounts{}
	for _, ct := range checkedTypes {
		data := writeSyncedLog(t, 31, ct, recs)
		l := newLayout(t, 31, ct, recs)
		if !bytes.Equal(data, l.data) {
			t.Fatalf("%s: synced and unsynced logs differ", ct)
		}
		var counts [4]sweepCounts
		for i := range int64(len(l.data)) {
			for bit := range uint(8) {
				sweepFlip(t, l, i, bit, &counts)
			}
		}
		for _, mode := range allModes {
			t.Logf("%s, %s: %v", ct, mode, counts[mode])
			addCounts(&total[mode], counts[mode])
		}
	}
	for _, mode := range allModes {
		t.Logf("all types, %s: %v", mode, total[mode])
	}
}

// TestBitFlipSweepMultiBlock is the sweep over a log with block padding and
// records spanning blocks, at offsets near every boundary and a sample of
// the rest (every offset with VIGIL_WAL_LONG), three bits per byte.
func TestBitFlipSweepMultiBlock(t *testing.T) {
	recs := [][]byte{pattern(1, BlockSize-FileHeaderSize-FragmentHeaderSize-3), pattern(2, 100), pattern(3, 40000), pattern(4, 5), pattern(5, 12), pattern(6, BlockSize+50)}
	for _, ct := range sampledTypes(checksum.CRC32c, checksum.XXH3) {
		l := newLayout(t, 32, ct, recs)
		offsets := l.nearBoundaries(0, int64(len(l.data)), 8, 1009)
		if longTests {
			offsets = offsets[:0]
			for i := range int64(len(l.data)) {
				offsets = append(offsets, i)
			}
		}
		var counts [4]sweepCounts
		for _, i := range offsets {
			for _, bit := range []uint{0, 3, 7} {
				sweepFlip(t, l, i, bit, &counts)
			}
		}
		for _, mode := range allModes {
			t.Logf("%s, %s: %v", ct, mode, counts[mode])
		}
	}
}

func addCounts(dst *sweepCounts, c sweepCounts) {
	dst.flips += c.flips
	dst.header += c.header
	dst.lostErr += c.lostErr
	dst.lostLast += c.lostLast
	dst.lostSilently += c.lostSilently
	dst.errNoLoss += c.errNoLoss
	dst.noLoss += c.noLoss
	dst.skipCounted += c.skipCounted
}

// A flip in the stored checksum field is named as such, not misread as a
// fragment from a nearby log or offset.
func TestChecksumFieldFlipDiagnosis(t *testing.T) {
	recs := [][]byte{pattern(1, 100), pattern(2, 100), pattern(3, 100)}
	for _, ct := range []checksum.Type{checksum.CRC32c, checksum.XXH3} {
		for bit := 0; bit < 32; bit++ {
			data, _ := writeLog(t, 7, ct, recs)
			data[FileHeaderSize+bit/8] ^= 1 << (bit % 8) // the first fragment's checksum
			res := readAll(t, data, TolerateCorruptedTailRecords)
			if res.err == nil || !strings.Contains(res.err.Error(), "exactly one bit") || strings.Contains(res.err.Error(), "computed for") {
				t.Fatalf("%s, checksum bit %d: %v", ct, bit, res.err)
			}
		}
	}
}
