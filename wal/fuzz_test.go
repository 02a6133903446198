package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
)

// fuzzSeeds are the committed seed corpus of FuzzReader (small logs, so the
// files stay readable) by file name.
func fuzzSeeds(t testing.TB) map[string][]byte {
	recs := [][]byte{nil, []byte("a"), []byte("hello, vigil"), bytes.Repeat([]byte("z"), 300)}
	seeds := map[string][]byte{}
	for _, ct := range allTypes {
		data, _ := writeLog(t, 3, ct, recs)
		seeds["log-"+ct.String()] = data
	}
	good := seeds["log-xxh3"]
	seeds["torn-body"] = good[:len(good)-5]
	seeds["torn-header"] = good[:FileHeaderSize+3]
	flipped := bytes.Clone(good)
	flipped[40] ^= 4
	seeds["flipped"] = flipped
	seeds["zero-tail"] = append(bytes.Clone(good), make([]byte, 20)...)
	seeds["empty"] = nil
	// PointInTime's two outcomes: damage in the last record (a quiet stop)
	// and damage followed by intact data of each kind (an error).
	flippedLast := bytes.Clone(good)
	flippedLast[len(good)-100] ^= 0x20
	seeds["flipped-last"] = flippedLast
	zeroedMid := bytes.Clone(good)
	clear(zeroedMid[39:58]) // the record "hello, vigil"
	seeds["zeroed-mid"] = zeroedMid
	typed := bytes.Clone(good)
	retype(typed, checksum.XXH3, 3, 39, 9)
	seeds["type-xxh3"] = typed
	seeds["orphan-xxh3"] = handLog(checksum.XXH3, "Fa", "Mb", "Fc")
	seeds["partial-xxh3"] = handLog(checksum.XXH3, "1a", "Fb")
	seeds["huge-length"] = binary.LittleEndian.AppendUint16(append(bytes.Clone(good[:FileHeaderSize]), 1, 2, 3, 4), 0xffff)
	// A record spanning a block boundary (payload of one letter, so the
	// corpus file stays compact).
	span, _ := writeLog(t, 4, checksum.CRC32c, [][]byte{bytes.Repeat([]byte("s"), BlockSize), []byte("after")})
	seeds["span-crc32c"] = span
	// The last fragment's length run past end of file by a flipped bit:
	// the fragment is whole (it verifies with the length it was written
	// with), so corruption, not a torn write; then the same with zeros
	// after it (a reserve), and with a torn append after it.
	two, ends := writeLog(t, 9, checksum.XXH3, [][]byte{pattern(1, 200), pattern(2, 300)})
	lengthPast := bytes.Clone(two)
	lengthPast[ends[0]+5] ^= 0x80
	seeds["length-past-eof"] = lengthPast
	seeds["length-past-eof-zeros"] = append(bytes.Clone(lengthPast), make([]byte, 64)...)
	three, _ := writeLog(t, 9, checksum.XXH3, [][]byte{pattern(1, 200), pattern(2, 300), pattern(3, 100)})
	tornAfter := bytes.Clone(three[:len(two)+40])
	tornAfter[ends[0]+5] ^= 0x80
	seeds["length-past-eof-torn-after"] = tornAfter
	// A log of the previous format version, refused.
	v1 := bytes.Clone(good)
	v1[8] = 1
	binary.LittleEndian.PutUint32(v1[20:], headerChecksum(v1[:20]))
	seeds["version-1"] = v1
	return seeds
}

func corpusFile(data []byte) string {
	return "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n"
}

// TestFuzzCorpus checks that the committed seed corpus is the one
// fuzzSeeds generates (VIGIL_WAL_WRITE_CORPUS=1 rewrites it).
func TestFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReader")
	for name, data := range fuzzSeeds(t) {
		path := filepath.Join(dir, name)
		if os.Getenv("VIGIL_WAL_WRITE_CORPUS") != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(corpusFile(data)), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != corpusFile(data) {
			t.Errorf("seed %s is missing or stale (err %v); rerun with VIGIL_WAL_WRITE_CORPUS=1", name, err)
		}
	}
}

// fuzzOutcome is what one mode made of an input, recorded without
// allocating inside the measured region.
type fuzzOutcome struct {
	newErr  error
	err     error
	hashes  []uint64 // FNV-64 of each record
	bytes   int64
	stats   ReaderStats
	alloc   uint64
	stopped error
	bufCap  int // the reader's buffers after reading
	recCap  int
	ctype   checksum.Type
}

// totalAlloc returns the bytes allocated so far by the process. Under the
// fuzzing engine it returns 0: runtime.ReadMemStats stops the world, which
// there slows execution a hundredfold, so the fuzz target relies on the
// exact buffer-capacity check instead.
func totalAlloc() uint64 {
	if fuzzing() {
		return 0
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// readMeasured reads data in mode and measures the bytes the reader
// allocated. hashes must have capacity for every possible record.
func readMeasured(data []byte, mode RecoveryMode, hashes []uint64) fuzzOutcome {
	var o fuzzOutcome
	h := fnv.New64a()
	o.hashes = hashes[:0]
	before := totalAlloc()
	r, err := NewReader(bytes.NewReader(data), "fuzz", mode)
	if err != nil {
		o.alloc = totalAlloc() - before
		o.newErr = err
		return o
	}
	for {
		rec, err := r.Next()
		if err != nil {
			if err != io.EOF {
				o.err = err
			}
			break
		}
		h.Reset()
		h.Write(rec)
		if len(o.hashes) < cap(o.hashes) {
			o.hashes = append(o.hashes, h.Sum64())
		} else {
			o.err = errors.New("more records than the input can hold")
			break
		}
		o.bytes += int64(len(rec))
	}
	o.alloc = totalAlloc() - before
	o.bufCap, o.recCap = cap(r.buf), cap(r.rec)
	o.stats = r.Stats()
	o.stopped = r.Stopped()
	o.ctype = r.ChecksumType()
	return o
}

func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// allocSlack covers the Reader itself, error messages and MemStats noise.
const allocSlack = 16 << 10

// checkInput runs every mode over data and checks the reader's promises:
// no panic, errors that wrap ErrCorruption, no allocation beyond a small
// multiple of the input, stats that add up, and modes that agree (they see
// the same bytes, so they must return the same records up to the point
// where their policies differ, and PointInTime ends a log quietly only
// where nothing verifiable follows, so where Skip finds nothing more).
func checkInput(t *testing.T, data []byte) {
	var out [4]fuzzOutcome
	for _, mode := range allModes {
		hashes := make([]uint64, 0, len(data)/FragmentHeaderSize+2)
		o := readMeasured(data, mode, hashes)
		for _, err := range []error{o.newErr, o.err, o.stopped} {
			if err != nil && !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("%s: error %v does not wrap ErrCorruption", mode, err)
			}
		}
		// Measured: everything NewReader and Next allocated.
		if limit := 4*uint64(len(data)) + allocSlack; o.alloc > limit {
			t.Fatalf("%s: reading %d bytes allocated %d bytes (limit %d)", mode, len(data), o.alloc, limit)
		}
		// Exact: the only buffers that grow are the block buffer (doubling
		// from 1 KiB with the bytes read) and the record buffer (append,
		// with the fragments read); neither may outgrow the input.
		if o.bufCap > max(1024, 2*len(data)) || o.recCap > 2*len(data)+64 {
			t.Fatalf("%s: %d input bytes grew buffers to %d and %d bytes", mode, len(data), o.bufCap, o.recCap)
		}
		st := o.stats
		if o.newErr == nil && (st.Records != int64(len(o.hashes)) || st.Bytes != o.bytes || st.Bytes > int64(len(data)) ||
			st.DroppedBytes > int64(len(data)) || st.TailDroppedBytes > st.DroppedBytes || st.DroppedBytes < 0 || st.DroppedRecords < 0) {
			t.Fatalf("%s: stats %+v for %d records, %d bytes, %d input bytes", mode, st, len(o.hashes), o.bytes, len(data))
		}
		if mode == PointInTime && o.err != nil && o.stopped != nil {
			t.Fatalf("PointInTime returned an error from Next (%v) and Stopped says %v", o.err, o.stopped)
		}
		if mode == SkipAnyCorruptedRecords && o.err != nil {
			t.Fatalf("SkipAnyCorruptedRecords returned an error from Next: %v", o.err)
		}
		out[mode] = o
	}
	pit, abs, tol, skip := out[PointInTime], out[AbsoluteConsistency], out[TolerateCorruptedTailRecords], out[SkipAnyCorruptedRecords]
	if (pit.newErr == nil) != (tol.newErr == nil) || (pit.newErr == nil) != (skip.newErr == nil) || (pit.newErr != nil && abs.newErr == nil) {
		t.Fatalf("modes disagree on the header: pit %v tol %v skip %v abs %v", pit.newErr, tol.newErr, skip.newErr, abs.newErr)
	}
	if pit.newErr != nil {
		return
	}
	eq := slices.Equal[[]uint64]
	if !eq(tol.hashes, pit.hashes) {
		t.Fatalf("Tolerate returned %d records, PointInTime %d", len(tol.hashes), len(pit.hashes))
	}
	if abs.newErr == nil && !eq(abs.hashes, pit.hashes) {
		t.Fatalf("Absolute returned %d records, PointInTime %d", len(abs.hashes), len(pit.hashes))
	}
	if len(skip.hashes) < len(pit.hashes) || !eq(skip.hashes[:len(pit.hashes)], pit.hashes) {
		t.Fatalf("PointInTime's %d records are not a prefix of Skip's %d", len(pit.hashes), len(skip.hashes))
	}
	if abs.newErr == nil && abs.err == nil {
		// A log AbsoluteConsistency accepts is clean: every mode agrees.
		if !eq(skip.hashes, pit.hashes) || pit.stopped != nil || pit.err != nil || tol.err != nil || skip.stats.Corruptions != 0 || pit.stats.DroppedBytes != 0 {
			t.Fatalf("clean log read differently: pit stopped %v, tol %v, skip %d records vs %d", pit.stopped, tol.err, len(skip.hashes), len(pit.hashes))
		}
	}
	// Both end at the first corruption that is not a torn tail: Tolerate
	// with its error, PointInTime with the same error (plus where intact
	// data follows) or quietly.
	if (pit.stopped != nil || pit.err != nil) != (tol.err != nil) {
		t.Fatalf("PointInTime stopped on %v / failed with %v but Tolerate says %v", pit.stopped, pit.err, tol.err)
	}
	if pit.err != nil && !strings.HasPrefix(pit.err.Error(), tol.err.Error()) {
		t.Fatalf("PointInTime failed with %v, Tolerate with %v", pit.err, tol.err)
	}
	// A quiet stop means nothing after the damage verifies; every record
	// Skip returns after it would be made of fragments that verify.
	if pit.stopped != nil && pit.ctype != checksum.None && len(skip.hashes) > len(pit.hashes) {
		t.Fatalf("PointInTime stopped quietly on %v after %d records, but Skip found %d", pit.stopped, len(pit.hashes), len(skip.hashes))
	}
}

// FuzzReader feeds arbitrary bytes to the reader in every recovery mode.
func FuzzReader(f *testing.F) {
	for _, data := range fuzzSeeds(f) {
		f.Add(data)
	}
	// Larger generated seeds: multi-block logs, whole and damaged.
	for _, ct := range []checksum.Type{checksum.XXH3, checksum.None} {
		data, _ := writeLog(f, 8, ct, multiBlockRecords())
		f.Add(data)
		f.Add(data[:BlockSize+100])
		d := bytes.Clone(data)
		d[BlockSize+3] ^= 1
		f.Add(d)
	}
	// A recycled log over an older one's blocks: its end is where the
	// older fragments begin.
	old, _ := writeLog(f, 5, checksum.XXH3, multiBlockRecords())
	newer, _ := writeLog(f, 9, checksum.XXH3, [][]byte{[]byte("new"), bytes.Repeat([]byte("n"), 3000)})
	rec := append(bytes.Clone(newer), old[len(newer):]...)
	encodeFileHeader(rec[:FileHeaderSize], 9, checksum.XXH3, true)
	f.Add(rec)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkInput(t, data)
	})
}

// TestReaderHostileLengths: length fields far beyond the input, in many
// places, never make the reader allocate by them.
func TestReaderHostileLengths(t *testing.T) {
	good, _ := writeLog(t, 1, checksum.XXH3, [][]byte{[]byte("ok")})
	hdr := good[:FileHeaderSize]
	frag := func(typ byte, length uint16) []byte {
		b := []byte{0xde, 0xad, 0xbe, 0xef}
		b = binary.LittleEndian.AppendUint16(b, length)
		return append(b, typ)
	}
	var inputs [][]byte
	for _, typ := range []byte{fragFull, fragFirst, fragMiddle, fragLast, 0, 9} {
		inputs = append(inputs, append(bytes.Clone(hdr), frag(typ, 0xffff)...))
		inputs = append(inputs, append(bytes.Clone(good), frag(typ, 0xffff)...))
	}
	// Many headers claiming the maximum, each followed by a little data.
	many := bytes.Clone(hdr)
	for i := 0; len(many) < 3*BlockSize; i++ {
		many = append(many, frag(byte(1+i%4), 0xffff)...)
		many = append(many, 1, 2, 3)
	}
	inputs = append(inputs, many)
	// A block in which every position looks like a fitting header (the
	// resync worst case), under the checksum type None and XXH3.
	for _, ct := range []checksum.Type{checksum.None, checksum.XXH3} {
		var h [FileHeaderSize]byte
		encodeFileHeader(h[:], 1, ct, false)
		crafted := append(h[:], bytes.Repeat([]byte{1}, 3*BlockSize)...)
		inputs = append(inputs, crafted)
	}
	// Random garbage after a valid header.
	rng := newRand(5)
	garbage := bytes.Clone(hdr)
	for len(garbage) < 200<<10 {
		garbage = append(garbage, byte(rng.Uint32()))
	}
	inputs = append(inputs, garbage)
	for _, in := range inputs {
		checkInput(t, in)
	}
}

// TestReaderDamagedSeeds runs checkInput over every truncation and a bit
// flip of each seed (a cheap deterministic stand-in for fuzzing in CI).
func TestReaderDamagedSeeds(t *testing.T) {
	for _, data := range fuzzSeeds(t) {
		if len(data) > 4096 {
			continue
		}
		for i := range len(data) {
			checkInput(t, data[:i])
			d := bytes.Clone(data)
			d[i] ^= 1 << (i % 8)
			checkInput(t, d)
		}
	}
}
