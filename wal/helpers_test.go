package wal

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
)

// allTypes lists every checksum type, None included.
var allTypes = []checksum.Type{checksum.None, checksum.CRC32c, checksum.XXHash, checksum.XXHash64, checksum.XXH3, checksum.CRC64}

// checkedTypes lists the types that actually check something.
var checkedTypes = allTypes[1:]

var allModes = []RecoveryMode{TolerateCorruptedTailRecords, AbsoluteConsistency, PointInTime, SkipAnyCorruptedRecords}

// pattern returns n deterministic bytes that differ per seed, so a record
// returned in place of another is noticed.
func pattern(seed, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// writeLog writes recs to a new in-memory log and returns the file's bytes
// and each record's end offset as WriteRecord reported it.
func writeLog(t testing.TB, logNum uint64, ct checksum.Type, recs [][]byte) ([]byte, []int64) {
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
	ends := make([]int64, len(recs))
	for i, r := range recs {
		if ends[i], err = w.WriteRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return readFile(t, fs, "log"), ends
}

func readFile(t testing.TB, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// readResult is everything a read of a whole log produced.
type readResult struct {
	recs    [][]byte
	err     error // from NewReader or the final Next (nil if io.EOF)
	newErr  bool  // err came from NewReader
	stopped error
	stats   ReaderStats
	r       *Reader
}

func readAll(t testing.TB, data []byte, mode RecoveryMode) readResult {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data), "log", mode)
	if err != nil {
		return readResult{err: err, newErr: true}
	}
	var res readResult
	res.r = r
	for {
		rec, err := r.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				res.err = err
			}
			break
		}
		res.recs = append(res.recs, bytes.Clone(rec))
		if len(res.recs) > len(data)+1 {
			t.Fatalf("more records than bytes in the file")
		}
	}
	// Sticky end: a second call returns the same thing.
	if _, err2 := r.Next(); (res.err == nil) != errors.Is(err2, io.EOF) || (res.err != nil && err2.Error() != res.err.Error()) {
		t.Fatalf("Next after the end returned %v, first end was %v", err2, res.err)
	}
	res.stopped = r.Stopped()
	res.stats = r.Stats()
	return res
}

// equalRecs reports whether got equals want exactly.
func equalRecs(got, want [][]byte) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			return false
		}
	}
	return true
}

func describe(recs [][]byte) []int {
	s := make([]int, len(recs))
	for i, r := range recs {
		s[i] = len(r)
	}
	return s
}

// countingFile wraps a vfs.File, counts Write, Sync and SyncData calls,
// and can hold the syncs (both kinds) at a gate or fail them.
type countingFile struct {
	vfs.File
	mu        sync.Mutex
	writes    int
	syncs     int // Sync and SyncData calls
	dataSyncs int // SyncData calls
	// gate, if set, is received from before each Sync returns.
	gate chan struct{}
	// inSync is signalled (non-blocking) when a Sync starts.
	inSync chan struct{}
	// failWrite / failSync make the next Write / Sync fail.
	failWrite, failSync error
}

var errTestIO = errors.New("test: injected I/O error")

func (c *countingFile) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	err := c.failWrite
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return c.File.Write(p)
}

func (c *countingFile) Sync() error { return c.sync(false) }

func (c *countingFile) SyncData() error { return c.sync(true) }

func (c *countingFile) sync(data bool) error {
	c.mu.Lock()
	c.syncs++
	if data {
		c.dataSyncs++
	}
	err := c.failSync
	gate, in := c.gate, c.inSync
	c.mu.Unlock()
	if in != nil {
		select {
		case in <- struct{}{}:
		default:
		}
	}
	if gate != nil {
		<-gate
	}
	if err != nil {
		return err
	}
	if data {
		return c.File.SyncData()
	}
	return c.File.Sync()
}

func (c *countingFile) counts() (writes, syncs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes, c.syncs
}

// discardFile is a vfs.File that accepts and forgets everything, for
// allocation tests and benchmarks of the writer alone.
type discardFile struct{ vfs.File }

func (discardFile) Write(p []byte) (int, error)            { return len(p), nil }
func (discardFile) Sync() error                            { return nil }
func (discardFile) SyncData() error                        { return nil }
func (discardFile) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }
func (discardFile) Close() error                           { return nil }

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
