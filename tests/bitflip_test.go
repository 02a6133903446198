package tests

// Bit-flip sweeps over the files recovery reads: every byte of a synced WAL
// (in each recovery mode, after a clean Close and after a crash), of a
// MANIFEST that recorded several flushes and a compaction, and every bit of
// CURRENT. After each flip, Open must fail with ErrCorruption or the DB
// must read back exactly what was acknowledged; the one exception is a flip
// in the last record of a WAL cut by a crash, which looks exactly like a
// torn tail. Never a panic.

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/internal/invariants"
	"github.com/vigildb/vigil/wal"
)

// flipCounts tallies the outcomes of a sweep.
type flipCounts struct {
	flips, detected, noEffect int
	// tail: only the last write lost, by a flip in the last record of a
	// crashed WAL (indistinguishable from a crash-cut tail).
	tail int
	// counted: skip-any mode dropped records and counted them.
	counted int
	// missed: acknowledged data lost or changed without an error.
	missed int
	// otherErr: Open failed with an error that is not ErrCorruption.
	otherErr int
	examples []string
}

func (c *flipCounts) String() string {
	return fmt.Sprintf("%d flips: %d detected (ErrCorruption), %d no effect, %d tail-like, %d dropped and counted (skip-any), %d missed, %d other errors",
		c.flips, c.detected, c.noEffect, c.tail, c.counted, c.missed, c.otherErr)
}

func (c *flipCounts) example(format string, args ...any) {
	if len(c.examples) < 5 {
		c.examples = append(c.examples, fmt.Sprintf(format, args...))
	}
}

func readAll(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeAll(t *testing.T, fs vfs.FS, name string, b []byte) {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// newestFile returns the path in dir of the newest file whose name has the
// prefix or suffix.
func newestFile(t *testing.T, fs vfs.FS, dir string, match func(string) bool) string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range names {
		if match(n) {
			got = append(got, n)
		}
	}
	if len(got) == 0 {
		t.Fatalf("no matching file in %s: %v", dir, names)
	}
	sort.Strings(got)
	return fs.PathJoin(dir, got[len(got)-1])
}

// largestFile returns the path in dir of the largest matching file (a live
// DB also has the next WAL, created ahead of time and empty).
func largestFile(t *testing.T, fs vfs.FS, dir string, match func(string) bool) string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	best, bestSize := "", int64(-1)
	for _, n := range names {
		if !match(n) {
			continue
		}
		st, err := fs.Stat(fs.PathJoin(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > bestSize {
			best, bestSize = fs.PathJoin(dir, n), st.Size()
		}
	}
	if best == "" {
		t.Fatalf("no matching file in %s", dir)
	}
	return best
}

// openAndCheck opens a damaged copy and classifies the outcome against the
// acknowledged state. inTail says whether the flip is in the last record of
// a crashed WAL, where losing exactly the last write is allowed.
func openAndCheck(t *testing.T, c *flipCounts, fs vfs.FS, opts vigil.Options, want map[string]string, last string, inTail bool, what string) {
	t.Helper()
	c.flips++
	opts.FS = fs
	// Small memtables and cache: each Open allocates a memtable arena.
	opts.WriteBufferSize = 256 << 10
	opts.BlockCacheSize = 1 << 20
	var db *vigil.DB
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("%s: Open panicked: %v", what, r)
			}
		}()
		db, err = vigil.Open("db", &opts)
	}()
	if err != nil {
		if errors.Is(err, vigil.ErrCorruption) {
			c.detected++
			return
		}
		c.otherErr++
		c.example("%s: Open: %v", what, err)
		return
	}
	defer db.Close()
	got, err := dump(db)
	if err != nil {
		if errors.Is(err, vigil.ErrCorruption) {
			c.detected++
			return
		}
		c.otherErr++
		c.example("%s: reading: %v", what, err)
		return
	}
	if equalMaps(got, want) {
		c.noEffect++
		return
	}
	var lost, wrong []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			lost = append(lost, k)
		} else if g != v {
			wrong = append(wrong, k)
		}
	}
	sort.Strings(lost)
	switch {
	case len(wrong) == 0 && len(got) <= len(want) && inTail && len(lost) == 1 && lost[0] == last:
		c.tail++
	case len(wrong) == 0 && len(got) <= len(want) && opts.WALRecoveryMode == vigil.WALSkipAnyCorrupted &&
		(db.Metrics().Recovery.DroppedRecords > 0 || db.Metrics().Recovery.Skipped > 0):
		c.counted++
	default:
		c.missed++
		c.example("%s: opened and lost %d keys %v, %d wrong values, %d extra", what, len(lost), lost[:min(len(lost), 4)], len(wrong), len(got)-len(want)+len(lost))
	}
}

// recordStarts returns the file offset at which each record of a record log
// starts, reading it intact.
func recordStarts(t *testing.T, b []byte, name string) []int64 {
	t.Helper()
	r, err := wal.NewReader(strings.NewReader(string(b)), name, wal.AbsoluteConsistency)
	if err != nil {
		t.Fatal(err)
	}
	starts := []int64{wal.FileHeaderSize}
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		starts = append(starts, r.Offset())
	}
	return starts[:len(starts)-1]
}

func walFlipFixture(t *testing.T, clean bool, n, valueLen int) (vfs.FS, map[string]string, string) {
	fs := vfs.NewMem()
	db, err := vigil.Open("db", &vigil.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	var last string
	for i := 0; i < n; i++ {
		k, v := fmt.Sprintf("key%03d", i), fmt.Sprintf("value-%03d-%s", i, strings.Repeat("x", i*valueLen))
		if err := db.Put([]byte(k), []byte(v), vigil.Sync); err != nil {
			t.Fatal(err)
		}
		want[k], last = v, k
	}
	if clean {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		return fs, want, last
	}
	// A crash after the last synced write: the disk holds what was synced.
	crashed := cloneFS(t, fs)
	db.Close()
	return crashed, want, last
}

func TestBitFlipSweepWAL(t *testing.T) {
	var sample func(int) bool
	if invariants.RaceEnabled {
		// Under the race detector every Open is ~10x slower: a third of
		// the bytes. CI also runs the sweeps in full without it.
		sample = func(off int) bool { return off%3 == 0 }
	}
	sweepWAL(t, 24, 3, sample)
}

// TestBitFlipSweepWALBlocks sweeps a WAL of several 32 KiB blocks, with
// records spanning block boundaries: a sample of offsets plus every byte
// near each boundary.
func TestBitFlipSweepWALBlocks(t *testing.T) {
	sweepWAL(t, 100, 14, func(off int) bool {
		d := off % wal.BlockSize
		if invariants.RaceEnabled {
			return off%251 == 0 || d < 12 || d > wal.BlockSize-12
		}
		return off%61 == 0 || d < 48 || d > wal.BlockSize-48
	})
}

// walSweepSpan is how much of a WAL the sweeps flip: everything up to its
// last non-zero byte and the first 64 bytes of the zero reserve after it
// (wal.Writer.SetReserve), which is often much larger than the records and
// all alike.
func walSweepSpan(b []byte) int { return min(len(b), dataEnd(b)+64) }

// dataEnd returns the offset just past the last non-zero byte of b: the end
// of what was written into a WAL, past which it holds its zero reserve.
func dataEnd(b []byte) int {
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	return end
}

// sweepWAL flips one bit of each byte (those sample accepts, all if nil)
// of a WAL of n synced writes, for each recovery mode, after a clean Close
// and after a crash.
func sweepWAL(t *testing.T, n, valueLen int, sample func(int) bool) {
	modes := []vigil.WALRecoveryMode{vigil.WALRecoverPointInTime, vigil.WALTolerateCorruptedTail, vigil.WALAbsoluteConsistency, vigil.WALSkipAnyCorrupted}
	for _, clean := range []bool{true, false} {
		base, want, last := walFlipFixture(t, clean, n, valueLen)
		walName := largestFile(t, base, "db", func(n string) bool { return strings.HasSuffix(n, ".log") })
		orig := readAll(t, base, walName)
		starts := recordStarts(t, orig, walName)
		// After a clean Close the last record is the close record; the
		// last batch is the one before it.
		lastBatchStart := starts[len(starts)-1]
		if clean {
			lastBatchStart = starts[len(starts)-2]
		}
		for _, mode := range modes {
			name := fmt.Sprintf("clean=%v/%s", clean, mode)
			t.Run(name, func(t *testing.T) {
				var c flipCounts
				for off := range walSweepSpan(orig) {
					if sample != nil && !sample(off) {
						continue
					}
					b := append([]byte(nil), orig...)
					b[off] ^= 1 << (off % 8)
					fs := cloneFS(t, base)
					writeAll(t, fs, walName, b)
					inTail := !clean && int64(off) >= lastBatchStart
					openAndCheck(t, &c, fs, vigil.Options{ReadOnly: true, WALRecoveryMode: mode}, want, last, inTail,
						fmt.Sprintf("WAL byte %d", off))
				}
				t.Logf("WAL of %d bytes (%d swept), %s: %s", len(orig), walSweepSpan(orig), name, &c)
				for _, e := range c.examples {
					t.Log(e)
				}
				if c.missed > 0 || c.otherErr > 0 {
					t.Fatalf("%d flips lost acknowledged writes silently, %d gave other errors", c.missed, c.otherErr)
				}
			})
		}
	}
}

// manifestFixture writes a DB with several flushes and a compaction, closes
// it, and returns it with its acknowledged contents.
func manifestFixture(t *testing.T) (vfs.FS, map[string]string) {
	fs := vfs.NewMem()
	opts := &vigil.Options{FS: fs, DisableAutomaticCompactions: true, L0StopWritesTrigger: 100}
	db, err := vigil.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for round := 0; round < 6; round++ {
		for i := 0; i < 50; i++ {
			k := fmt.Sprintf("key%03d", (round*37+i*7)%200)
			v := fmt.Sprintf("r%d-%d", round, i)
			if err := db.Put([]byte(k), []byte(v), nil); err != nil {
				t.Fatal(err)
			}
			want[k] = v
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		if round == 3 {
			if err := db.Compact(nil, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return fs, want
}

func TestBitFlipSweepManifest(t *testing.T) {
	base, want := manifestFixture(t)
	name := newestFile(t, base, "db", func(n string) bool { return strings.HasPrefix(n, "MANIFEST-") })
	orig := readAll(t, base, name)
	var c flipCounts
	for off := range orig {
		b := append([]byte(nil), orig...)
		b[off] ^= 1 << (off % 8)
		fs := cloneFS(t, base)
		writeAll(t, fs, name, b)
		openAndCheck(t, &c, fs, vigil.Options{}, want, "", false, fmt.Sprintf("MANIFEST byte %d", off))
	}
	t.Logf("MANIFEST of %d bytes (%d records): %s", len(orig), len(recordStarts(t, orig, name)), &c)
	for _, e := range c.examples {
		t.Log(e)
	}
	if c.missed > 0 || c.otherErr > 0 {
		t.Fatalf("%d flips lost acknowledged writes silently, %d gave other errors", c.missed, c.otherErr)
	}
}

func TestBitFlipSweepCurrent(t *testing.T) {
	base, want := manifestFixture(t)
	orig := readAll(t, base, "db/CURRENT")
	var c flipCounts
	for bit := 0; bit < 8*len(orig); bit++ {
		b := append([]byte(nil), orig...)
		b[bit/8] ^= 1 << (bit % 8)
		fs := cloneFS(t, base)
		writeAll(t, fs, "db/CURRENT", b)
		openAndCheck(t, &c, fs, vigil.Options{}, want, "", false, fmt.Sprintf("CURRENT bit %d", bit))
	}
	t.Logf("CURRENT of %d bytes, every bit: %s", len(orig), &c)
	for _, e := range c.examples {
		t.Log(e)
	}
	if c.missed > 0 || c.otherErr > 0 {
		t.Fatalf("%d flips lost acknowledged writes silently, %d gave other errors", c.missed, c.otherErr)
	}
}
