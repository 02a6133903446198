package wal

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// recycleRecords returns n records of sizes from a few bytes to a few
// blocks, different per seed.
func recycleRecords(seed, n int) [][]byte {
	rng := newRand(uint64(seed))
	recs := make([][]byte, n)
	for i := range recs {
		size := rng.IntN(200)
		if rng.IntN(8) == 0 {
			size = rng.IntN(3 * BlockSize)
		}
		recs[i] = pattern(seed*1000+i, size)
	}
	return recs
}

// writeRecycled writes the old records as log oldNum, then recycles the
// file as log newNum (WriteRecycledHeader, NewRecycledWriter) and writes
// the new records over it. It returns the file's bytes, the old log's
// bytes, and the new records' end offsets.
func writeRecycled(t *testing.T, ct checksum.Type, oldRecs, newRecs [][]byte) (file, old []byte, ends []int64) {
	t.Helper()
	fs := vfs.NewMem()
	f, err := fs.Create("log")
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(f, "log", 5, ct)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range oldRecs {
		if _, err := w.WriteRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	old = readFile(t, fs, "log")
	if f, err = fs.OpenReadWrite("log"); err != nil {
		t.Fatal(err)
	}
	if err := WriteRecycledHeader(f, 9, ct); err != nil {
		t.Fatal(err)
	}
	if w, err = NewRecycledWriter(f, "log", 9, ct, int64(len(old))); err != nil {
		t.Fatal(err)
	}
	for _, r := range newRecs {
		end, err := w.WriteRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, end)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return readFile(t, fs, "log"), old, ends
}

// TestRecycledLog: a log written over an older one's blocks reads back
// exactly its own records, in every mode, with the older bytes counted
// as stale, not as damage.
func TestRecycledLog(t *testing.T) {
	for _, ct := range checkedTypes {
		for seed := range 4 {
			oldRecs, newRecs := recycleRecords(seed, 300), recycleRecords(seed+100, 40)
			file, old, _ := writeRecycled(t, ct, oldRecs, newRecs)
			if len(file) != len(old) {
				t.Fatalf("the recycled file changed size: %d, was %d", len(file), len(old))
			}
			for _, mode := range allModes {
				res := readAll(t, file, mode)
				what := fmt.Sprintf("%s seed %d %s", ct, seed, mode)
				if res.err != nil || res.stopped != nil || !equalRecs(res.recs, newRecs) {
					t.Fatalf("%s: %d records (want %d), err %v, stopped %v", what, len(res.recs), len(newRecs), res.err, res.stopped)
				}
				if res.stats.Corruptions != 0 || res.stats.DroppedBytes != 0 || res.stats.StaleBytes == 0 {
					t.Fatalf("%s: stats %+v", what, res.stats)
				}
				if res.r.LogNumber() != 9 {
					t.Fatalf("%s: log number %d", what, res.r.LogNumber())
				}
			}
		}
	}
}

// TestRecycledLogTorn: a crash may leave any prefix of the new log's
// bytes over the old ones. PointInTime and SkipAnyCorruptedRecords (the
// modes the DB allows with recycling) return, without an error, exactly
// the records whose bytes all made it.
func TestRecycledLogTorn(t *testing.T) {
	for _, ct := range []checksum.Type{checksum.CRC32c, checksum.XXH3} {
		oldRecs, newRecs := recycleRecords(7, 200), recycleRecords(8, 30)
		file, old, ends := writeRecycled(t, ct, oldRecs, newRecs)
		rng := newRand(3)
		for range 300 {
			cut := FileHeaderSize + rng.IntN(int(ends[len(ends)-1])-FileHeaderSize+1)
			img := append(append([]byte{}, file[:cut]...), old[cut:]...)
			want := 0
			for want < len(ends) && ends[want] <= int64(cut) {
				want++
			}
			for _, mode := range []RecoveryMode{PointInTime, SkipAnyCorruptedRecords} {
				res := readAll(t, img, mode)
				if res.err != nil || !equalRecs(res.recs, newRecs[:want]) {
					t.Fatalf("%s %s cut at %d: %d records (want %d), err %v", ct, mode, cut, len(res.recs), want, res.err)
				}
				if mode == SkipAnyCorruptedRecords && res.stats.Corruptions != 0 {
					t.Fatalf("%s cut at %d: the older bytes counted as %d corruptions", ct, cut, res.stats.Corruptions)
				}
			}
		}
	}
}

// TestRecycledLogDamage: damage inside the new log, with its records
// after it, is still corruption: an error in PointInTime, a dropped
// record in SkipAnyCorruptedRecords.
func TestRecycledLogDamage(t *testing.T) {
	oldRecs, newRecs := recycleRecords(11, 200), recycleRecords(12, 30)
	for i := range newRecs {
		newRecs[i] = pattern(500+i, 100) // one FULL fragment each
	}
	file, _, ends := writeRecycled(t, checksum.XXH3, oldRecs, newRecs)
	img := append([]byte{}, file...)
	img[ends[9]+20] ^= 0x10 // inside record 10
	res := readAll(t, img, PointInTime)
	if !errors.Is(res.err, base.ErrCorruption) || len(res.recs) != 10 {
		t.Fatalf("PointInTime: %d records, err %v; want 10 and a corruption", len(res.recs), res.err)
	}
	res = readAll(t, img, SkipAnyCorruptedRecords)
	want := append(append([][]byte{}, newRecs[:10]...), newRecs[11:]...)
	if res.err != nil || !equalRecs(res.recs, want) || res.stats.Corruptions != 1 || res.stats.StaleBytes == 0 {
		t.Fatalf("SkipAny: %d records, err %v, stats %+v", len(res.recs), res.err, res.stats)
	}
}

// TestRecycledNeedsChecksums: without checksums nothing tells the new
// log's end from the older bytes, so neither a writer nor a header may
// say recycled.
func TestRecycledNeedsChecksums(t *testing.T) {
	if _, err := NewRecycledWriter(discardFile{}, "log", 9, checksum.None, 1<<20); !errors.Is(err, base.ErrInvalidArgument) {
		t.Fatalf("NewRecycledWriter with None: %v", err)
	}
	var h [FileHeaderSize]byte
	encodeFileHeader(h[:], 9, checksum.None, true)
	if _, err := NewReader(bytes.NewReader(h[:]), "log", PointInTime); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("a recycled header without checksums: %v", err)
	}
}
