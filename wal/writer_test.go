package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/cockroachdb/pebble/vfs/errorfs"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/bgsys"
)

// roundTrip writes recs, reads them back in every mode and checks that
// every mode returns exactly recs with no error, and that each record's end
// offset is where the reader says the record ended.
func roundTrip(t *testing.T, ct checksum.Type, recs [][]byte) []byte {
	t.Helper()
	data, ends := writeLog(t, 42, ct, recs)
	if want := ends[len(ends)-1]; int64(len(data)) != want {
		t.Fatalf("file is %d bytes, last record ends at %d", len(data), want)
	}
	for _, mode := range allModes {
		r, err := NewReader(bytes.NewReader(data), "log", mode)
		if err != nil {
			t.Fatalf("%s: NewReader: %v", mode, err)
		}
		if r.ChecksumType() != ct || r.LogNumber() != 42 {
			t.Fatalf("%s: header says type %s log %d, want %s 42", mode, r.ChecksumType(), r.LogNumber(), ct)
		}
		for i, want := range recs {
			got, err := r.Next()
			if err != nil {
				t.Fatalf("%s: record %d: %v", mode, i, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: record %d: got %d bytes, want %d (contents differ: %v)", mode, i, len(got), len(want), len(got) == len(want))
			}
			if r.Offset() != ends[i] {
				t.Fatalf("%s: record %d: reader offset %d, writer end %d", mode, i, r.Offset(), ends[i])
			}
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("%s: after the last record: %v, want io.EOF", mode, err)
		}
		st := r.Stats()
		if st.Records != int64(len(recs)) || st.DroppedBytes != 0 || st.DroppedRecords != 0 || st.Corruptions != 0 || r.Stopped() != nil {
			t.Fatalf("%s: stats %+v, stopped %v", mode, st, r.Stopped())
		}
	}
	return data
}

func TestRoundTripSizes(t *testing.T) {
	rng := newRand(1)
	for _, ct := range allTypes {
		t.Run(ct.String(), func(t *testing.T) {
			sizes := []int{0, 1, BlockSize - 1, BlockSize, 3 * BlockSize, 0, 0, 1, MaxFragmentPayload, MaxFragmentPayload + 1}
			for range 20 {
				sizes = append(sizes, rng.IntN(3*BlockSize))
			}
			for range 50 {
				sizes = append(sizes, rng.IntN(200))
			}
			var recs [][]byte
			for i, n := range sizes {
				recs = append(recs, pattern(i, n))
			}
			roundTrip(t, ct, recs)
			// Each size alone, as the only record of a log.
			for i, n := range sizes[:10] {
				roundTrip(t, ct, [][]byte{pattern(i, n)})
			}
		})
	}
}

// TestRoundTripBlockEdges leaves exactly k bytes at the end of block 0 for
// every k around the fragment header size, then appends more records: k < 7
// must be zero padding, k == 7 an empty FIRST fragment.
func TestRoundTripBlockEdges(t *testing.T) {
	for _, ct := range []checksum.Type{checksum.None, checksum.CRC32c, checksum.XXH3} {
		for k := 0; k <= 2*FragmentHeaderSize+1; k++ {
			first := BlockSize - FileHeaderSize - FragmentHeaderSize - k
			recs := [][]byte{pattern(1, first), pattern(2, 10), nil, pattern(3, BlockSize+5)}
			data := roundTrip(t, ct, recs)
			// Check the layout at the block boundary directly.
			tail := data[BlockSize-k : BlockSize]
			switch {
			case k < FragmentHeaderSize:
				if !allZero(tail) {
					t.Fatalf("k=%d: padding %x is not zero", k, tail)
				}
				if typ := data[BlockSize+6]; typ != fragFull {
					t.Fatalf("k=%d: first fragment of block 1 has type %d, want FULL", k, typ)
				}
			case k == FragmentHeaderSize:
				if typ, n := tail[6], binary.LittleEndian.Uint16(tail[4:6]); typ != fragFirst || n != 0 {
					t.Fatalf("k=%d: fragment in the last 7 bytes is %s length %d, want an empty FIRST", k, fragTypeName(typ), n)
				}
			}
		}
	}
}

func TestWriterSize(t *testing.T) {
	fs := vfs.NewMem()
	f, _ := fs.Create("log")
	w, err := NewWriter(f, "log", 1, checksum.XXH3)
	if err != nil {
		t.Fatal(err)
	}
	if w.Size() != FileHeaderSize {
		t.Fatalf("empty log size %d", w.Size())
	}
	for i := range 100 {
		end, err := w.WriteRecord(pattern(i, i*997%70000))
		if err != nil {
			t.Fatal(err)
		}
		if end != w.Size() {
			t.Fatalf("record %d ends at %d but Size is %d", i, end, w.Size())
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	if st.Size() != w.Size() {
		t.Fatalf("after Flush the file has %d bytes, Size is %d", st.Size(), w.Size())
	}
	size := w.Size()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(readFile(t, fs, "log")); int64(n) != size {
		t.Fatalf("closed file has %d bytes, Size was %d", n, size)
	}
	s := w.Stats()
	if s.Records != 100 || s.Fragments < 100 || s.Syncs != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestWriterEmptyLog: a log with no records is just the header.
func TestWriterEmptyLog(t *testing.T) {
	for _, ct := range allTypes {
		data, _ := writeLog(t, 9, ct, nil)
		if len(data) != FileHeaderSize {
			t.Fatalf("%s: empty log has %d bytes", ct, len(data))
		}
		for _, mode := range allModes {
			res := readAll(t, data, mode)
			if res.err != nil || len(res.recs) != 0 || res.r.LogNumber() != 9 || res.r.ChecksumType() != ct {
				t.Fatalf("%s %s: %+v", ct, mode, res)
			}
		}
	}
}

// TestWriterReusesCallerBuffer: the record is copied, so the caller may
// overwrite p right after WriteRecord returns.
func TestWriterReusesCallerBuffer(t *testing.T) {
	fs := vfs.NewMem()
	f, _ := fs.Create("log")
	w, _ := NewWriter(f, "log", 1, checksum.CRC32c)
	buf := make([]byte, 3000)
	var want [][]byte
	for i := range 50 {
		copy(buf, pattern(i, len(buf)))
		if _, err := w.WriteRecord(buf); err != nil {
			t.Fatal(err)
		}
		want = append(want, bytes.Clone(buf))
		clear(buf)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	res := readAll(t, readFile(t, fs, "log"), AbsoluteConsistency)
	if res.err != nil || !equalRecs(res.recs, want) {
		t.Fatalf("err %v, got %d records", res.err, len(res.recs))
	}
}

// TestConcurrentSyncTo: many goroutines append (serialized by a mutex, as
// the DB's commit mutex does) and wait in SyncTo concurrently, while others
// call Flush, Sync and Size. Run with -race. Every SyncTo must return only
// once its record is durable, and the log must hold every record once.
func TestConcurrentSyncTo(t *testing.T) {
	const goroutines, perG = 8, 60
	fs := vfs.NewMem()
	f, _ := fs.Create("log")
	cf := &countingFile{File: f}
	w, err := NewWriter(cf, "log", 3, checksum.XXH3)
	if err != nil {
		t.Fatal(err)
	}
	var commitMu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*perG+10)
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				rec := fmt.Appendf(nil, "g%d-i%d-%s", g, i, bytes.Repeat([]byte{'x'}, (g*131+i*71)%5000))
				commitMu.Lock()
				end, err := w.WriteRecord(rec)
				commitMu.Unlock()
				if err != nil {
					errs <- err
					return
				}
				if err := w.SyncTo(end); err != nil {
					errs <- err
					return
				}
				w.mu.Lock()
				synced := w.syncedOff
				w.mu.Unlock()
				if synced < end {
					errs <- fmt.Errorf("SyncTo(%d) returned with only %d synced", end, synced)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			if err := w.Flush(); err != nil {
				errs <- err
			}
			_ = w.Size()
			if err := w.Sync(); err != nil {
				errs <- err
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, syncs := cf.counts()
	t.Logf("%d SyncTo calls (plus 50 Sync) made %d fsyncs", goroutines*perG, syncs)
	res := readAll(t, readFile(t, fs, "log"), AbsoluteConsistency)
	if res.err != nil {
		t.Fatal(res.err)
	}
	seen := map[string]bool{}
	next := make([]int, goroutines)
	for _, r := range res.recs {
		var g, i int
		if _, err := fmt.Sscanf(string(r), "g%d-i%d-", &g, &i); err != nil {
			t.Fatalf("bad record %q", r[:min(len(r), 20)])
		}
		if seen[string(r)] || i != next[g] {
			t.Fatalf("record g%d-i%d out of order or duplicated (want i%d)", g, i, next[g])
		}
		seen[string(r)] = true
		next[g]++
	}
	if len(res.recs) != goroutines*perG {
		t.Fatalf("read %d records, wrote %d", len(res.recs), goroutines*perG)
	}
}

// TestGroupCommit shows that concurrent SyncTo callers share fsyncs: while
// the first fsync is held, N-1 more writers append and wait; releasing it
// must satisfy all of them with exactly one more fsync (2 in all, not N).
func TestGroupCommit(t *testing.T) {
	flusherRoundsOnly(t)
	const n = 16
	fs := vfs.NewMem()
	f, _ := fs.Create("log")
	cf := &countingFile{File: f, gate: make(chan struct{}), inSync: make(chan struct{}, 1)}
	w, err := NewWriter(cf, "log", 5, checksum.CRC32c)
	if err != nil {
		t.Fatal(err)
	}
	var commitMu sync.Mutex
	errs := make(chan error, n)
	write := func(i int) {
		commitMu.Lock()
		end, err := w.WriteRecord(pattern(i, 100))
		commitMu.Unlock()
		if err != nil {
			errs <- err
			return
		}
		errs <- w.SyncTo(end)
	}
	go write(0)
	<-cf.inSync // the flusher is inside fsync #1, held at the gate
	for i := 1; i < n; i++ {
		go write(i)
	}
	waitWaiters(t, w, n) // all n callers are blocked in SyncTo
	close(cf.gate)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if _, syncs := cf.counts(); syncs != 2 {
		t.Fatalf("%d concurrent SyncTo callers caused %d fsyncs, want 2 (one held, one shared)", n, syncs)
	}
	if s := w.Stats(); s.Syncs != 2 {
		t.Fatalf("writer counted %d syncs", s.Syncs)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, syncs := cf.counts(); syncs != 2 {
		t.Fatalf("Close of a fully synced log made another fsync (%d in all)", syncs)
	}
}

func TestWriterStickyWriteError(t *testing.T) {
	fs := vfs.NewMem()
	f, _ := fs.Create("log")
	cf := &countingFile{File: f}
	w, _ := NewWriter(cf, "000007.log", 7, checksum.XXH3)
	// Let the header reach the file first: the flusher writes it right
	// away, and a failure there would make the writer fail before the
	// record below is even appended.
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	cf.mu.Lock()
	cf.failWrite = errTestIO
	cf.mu.Unlock()
	end, err := w.WriteRecord([]byte("buffered, so no error yet"))
	if err != nil {
		t.Fatalf("WriteRecord made a system call? %v", err)
	}
	err = w.SyncTo(end)
	if !errors.Is(err, errTestIO) {
		t.Fatalf("SyncTo: %v, want the write error", err)
	}
	if !bytes.Contains([]byte(err.Error()), []byte("000007.log")) {
		t.Fatalf("error %q does not name the file", err)
	}
	cf.mu.Lock()
	cf.failWrite = nil // the file recovers, the writer must not
	cf.mu.Unlock()
	if _, err2 := w.WriteRecord([]byte("x")); err2 != err {
		t.Fatalf("WriteRecord after failure: %v, want the sticky %v", err2, err)
	}
	for name, fn := range map[string]func() error{"Flush": w.Flush, "Sync": w.Sync, "SyncTo": func() error { return w.SyncTo(0) }} {
		if err2 := fn(); err2 != err {
			t.Fatalf("%s after failure: %v, want the sticky error", name, err2)
		}
	}
	if err2 := w.Close(); err2 != err {
		t.Fatalf("Close: %v", err2)
	}
	if err2 := w.Close(); err2 != err {
		t.Fatalf("second Close: %v", err2)
	}
}

func TestWriterStickySyncError(t *testing.T) {
	fs := vfs.NewMem()
	f, _ := fs.Create("log")
	cf := &countingFile{File: f, failSync: errTestIO}
	w, _ := NewWriter(cf, "log", 7, checksum.XXH3)
	end, _ := w.WriteRecord([]byte("a"))
	if err := w.SyncTo(end); !errors.Is(err, errTestIO) {
		t.Fatalf("SyncTo: %v", err)
	}
	cf.mu.Lock()
	cf.failSync = nil
	cf.mu.Unlock()
	// A failed fsync is not retried: the data may be gone from the page cache.
	if err := w.Sync(); !errors.Is(err, errTestIO) {
		t.Fatalf("Sync after a failed sync: %v", err)
	}
	if _, err := w.WriteRecord([]byte("b")); !errors.Is(err, errTestIO) {
		t.Fatalf("WriteRecord after a failed sync: %v", err)
	}
	if err := w.Close(); !errors.Is(err, errTestIO) {
		t.Fatalf("Close: %v", err)
	}
}

// TestWriterErrorFS: errorfs injects errors on Sync (not on SyncData, which
// is why fault injectors over it go through vfsutil.SyncDataAsSync: with a
// reserve the writer's syncs are mostly SyncData).
func TestWriterErrorFS(t *testing.T) {
	mem := vfs.NewMem()
	inj := errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if op == errorfs.OpFileSync {
			return errorfs.ErrInjected
		}
		return nil
	})
	fs := errorfs.Wrap(mem, inj)
	f, err := fs.Create("log")
	if err != nil {
		t.Fatal(err)
	}
	w, _ := NewWriter(f, "log", 1, checksum.CRC64)
	end, _ := w.WriteRecord([]byte("x"))
	if err := w.SyncTo(end); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("SyncTo: %v", err)
	}
	_ = w.Close()
}

func TestWriterClose(t *testing.T) {
	fs := vfs.NewMem()
	f, _ := fs.Create("log")
	cf := &countingFile{File: f}
	w, _ := NewWriter(cf, "log", 1, checksum.XXHash64)
	end, _ := w.WriteRecord([]byte("last words"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, syncs := cf.counts(); syncs != 1 {
		t.Fatalf("Close made %d fsyncs, want 1", syncs)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := w.WriteRecord([]byte("x")); !errors.Is(err, base.ErrClosed) {
		t.Fatalf("WriteRecord after Close: %v", err)
	}
	// Close synced everything: waiting for it afterwards succeeds.
	if err := w.SyncTo(end); err != nil {
		t.Fatalf("SyncTo after Close: %v", err)
	}
	if err := w.Flush(); err != nil {
		t.Fatalf("Flush after Close: %v", err)
	}
	res := readAll(t, readFile(t, fs, "log"), AbsoluteConsistency)
	if res.err != nil || len(res.recs) != 1 || string(res.recs[0]) != "last words" {
		t.Fatalf("%+v", res)
	}
	// The file was closed: a vfs mem file refuses further writes? It does
	// not, so check through the goroutine instead: the flusher has exited.
	select {
	case <-w.done:
	default:
		t.Fatal("flusher still running after Close")
	}
}

func TestWriterBadArguments(t *testing.T) {
	fs := vfs.NewMem()
	f, _ := fs.Create("log")
	if _, err := NewWriter(f, "log", 1, checksum.Type(checksum.NumTypes)); !errors.Is(err, base.ErrInvalidArgument) || !errors.Is(err, checksum.ErrInvalidArgument) {
		t.Fatalf("bad checksum type: %v", err)
	}
	if _, err := NewWriter(nil, "log", 1, checksum.XXH3); !errors.Is(err, base.ErrInvalidArgument) {
		t.Fatalf("nil file: %v", err)
	}
	// The zero type is the default, XXH3, and the writer says which.
	f0, _ := fs.Create("log0")
	if w0, err := NewWriter(f0, "log0", 1, checksum.Default); err != nil || w0.ChecksumType() != checksum.XXH3 {
		t.Fatalf("default checksum type: %v", err)
	} else {
		w0.Close()
	}
	w, _ := NewWriter(f, "log", 1, checksum.XXH3)
	end, _ := w.WriteRecord([]byte("a"))
	if err := w.SyncTo(end + 1); !errors.Is(err, base.ErrInvalidArgument) {
		t.Fatalf("SyncTo beyond the end: %v", err)
	}
	// A caller error does not fail the writer.
	if err := w.SyncTo(end); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWriterBackpressure: with the file stuck, WriteRecord stops once
// maxBlocks blocks are out (the current one and two full ones waiting),
// instead of buffering without bound.
func TestWriterBackpressure(t *testing.T) {
	gate := make(chan struct{})
	w, _ := NewWriter(&blockingFile{gate: gate}, "log", 1, checksum.XXH3)
	w.mu.Lock()
	w.maxBlocks = 3
	w.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, err := w.WriteRecord(make([]byte, 8*BlockSize))
		done <- err
	}()
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("an 8-block record was buffered while the file was stuck (err %v)", err)
		default:
		}
		w.mu.Lock()
		queued, blocks := len(w.full), w.blocks
		w.mu.Unlock()
		if queued > 2 || blocks > 3 {
			t.Fatalf("%d blocks queued, %d in all; limits 2 and 3", queued, blocks)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWriterLargeRecordReusesBlocks: a record far larger than the block
// bound goes through at most maxBlocks blocks, each reused as soon as the
// flusher has written it, rather than through new blocks while the flusher
// holds a full queue's worth (which left about twice the record's size of
// garbage), without an fsync per round; and once the flusher has caught
// up, the writer keeps only idleFreeBlocks of them.
func TestWriterLargeRecordReusesBlocks(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	w, _ := NewWriter(discardFile{}, "log", 1, checksum.XXH3)
	w.SetBytesPerSync(1 << 20)
	rec := pattern(7, 4*defaultMaxBlocks*BlockSize) // 64 MiB
	allocs := testing.AllocsPerRun(1, func() {
		if _, err := w.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	})
	if limit := float64(defaultMaxBlocks + 8); allocs > limit {
		t.Errorf("a %d-block record took %.0f allocations, want at most %.0f", len(rec)/BlockSize, allocs, limit)
	}
	// Behind a large record the bytes-per-sync fsyncs come every 4 MiB,
	// not after each 1 MiB round.
	if st := w.Stats(); st.Syncs > st.Bytes/(4<<20)+8 {
		t.Errorf("%d fsyncs for %d MiB with bytes-per-sync 1 MiB, want about one per 4 MiB", st.Syncs, st.Bytes>>20)
	}
	// The flusher trims the free list when it goes idle.
	deadline := time.Now().Add(5 * time.Second)
	for {
		w.mu.Lock()
		blocks, free, idle := w.blocks, len(w.free), w.idle
		w.mu.Unlock()
		if idle && blocks == free+1 && free <= idleFreeBlocks {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle writer keeps %d blocks (%d free), want at most %d free", blocks, free, idleFreeBlocks)
		}
		time.Sleep(time.Millisecond)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWriterSyncUnderSustainedAppends: a Sync while an appender keeps the
// flusher behind (a slow file, 64 KiB records without pause) returns once
// the flusher has written and synced up to where the log was when it was
// asked, instead of waiting for the appends to stop (a sync only at the end
// of the queue, which they keep moving, never came).
func TestWriterSyncUnderSustainedAppends(t *testing.T) {
	w, _ := NewWriter(&slowFile{delay: 200 * time.Microsecond}, "log", 1, checksum.XXH3)
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		rec := make([]byte, 64<<10)
		for !stop.Load() {
			if _, err := w.WriteRecord(rec); err != nil {
				return
			}
		}
	}()
	defer func() {
		stop.Store(true)
		<-done
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	}()
	time.Sleep(50 * time.Millisecond) // the queue fills
	synced := make(chan error, 1)
	go func() { synced <- w.Sync() }()
	select {
	case err := <-synced:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		w.mu.Lock()
		queued, syncs := len(w.full), w.stats.Syncs
		w.mu.Unlock()
		t.Fatalf("Sync still waiting after 20 s of appends (%d blocks queued, %d syncs)", queued, syncs)
	}
}

// slowFile takes delay for every Write.
type slowFile struct {
	discardFile
	delay time.Duration
}

func (s *slowFile) Write(p []byte) (int, error) {
	time.Sleep(s.delay)
	return len(p), nil
}

type blockingFile struct {
	discardFile
	gate chan struct{}
}

func (b *blockingFile) Write(p []byte) (int, error) {
	<-b.gate
	return len(p), nil
}

// TestWriterNoAllocs: in steady state WriteRecord allocates nothing, for
// every checksum type, and neither does the flusher (AllocsPerRun counts
// every goroutine's allocations).
func TestWriterNoAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	for _, ct := range allTypes {
		for _, size := range []int{100, 4096} {
			w, _ := NewWriter(discardFile{}, "log", 1, ct)
			rec := pattern(1, size)
			for range 3000 { // warm up: fill the free list
				if _, err := w.WriteRecord(rec); err != nil {
					t.Fatal(err)
				}
			}
			_ = w.Flush()
			allocs := testing.AllocsPerRun(2000, func() {
				if _, err := w.WriteRecord(rec); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("%s size %d: WriteRecord allocates %.2f times per record", ct, size, allocs)
			}
			syncAllocs := testing.AllocsPerRun(200, func() {
				end, _ := w.WriteRecord(rec)
				if err := w.SyncTo(end); err != nil {
					t.Fatal(err)
				}
			})
			if syncAllocs != 0 {
				t.Errorf("%s size %d: WriteRecord+SyncTo allocates %.2f times per record", ct, size, syncAllocs)
			}
			_ = w.Close()
		}
	}
	runtime.GC()
}

// A held writer hands nothing to the file until Release; Release with an
// error fails it without writing.
func TestHoldAndRelease(t *testing.T) {
	for _, fail := range []bool{false, true} {
		fs := vfs.NewMem()
		f, err := fs.Create("log")
		if err != nil {
			t.Fatal(err)
		}
		w, err := NewWriter(f, "log", 1, checksum.XXH3)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		w.Hold()
		end, err := w.WriteRecord([]byte("held record"))
		if err != nil {
			t.Fatal(err)
		}
		synced := make(chan error, 1)
		go func() { synced <- w.SyncTo(end) }()
		select {
		case err := <-synced:
			t.Fatalf("SyncTo of a held writer returned %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if got := len(readFile(t, fs, "log")); got != FileHeaderSize {
			t.Fatalf("held writer wrote: file has %d bytes, want the %d-byte header", got, FileHeaderSize)
		}
		var relErr error
		if fail {
			relErr = errors.New("predecessor failed")
		}
		w.Release(relErr)
		err = <-synced
		if fail {
			if err == nil || !strings.Contains(err.Error(), "predecessor failed") {
				t.Fatalf("SyncTo after Release(err) = %v", err)
			}
			if got := len(readFile(t, fs, "log")); got != FileHeaderSize {
				t.Fatalf("a writer released with an error wrote %d bytes", got-FileHeaderSize)
			}
			w.Close()
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if recs := readAll(t, readFile(t, fs, "log"), AbsoluteConsistency).recs; len(recs) != 1 || string(recs[0]) != "held record" {
			t.Fatalf("records after release: %q", recs)
		}
	}
}

// With SetBytesPerSync the flusher syncs on its own as data reaches the
// file, without anyone asking.
func TestBytesPerSync(t *testing.T) {
	fs := vfs.NewMem()
	f, err := fs.Create("log")
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(f, "log", 1, checksum.XXH3)
	if err != nil {
		t.Fatal(err)
	}
	w.SetBytesPerSync(1 << 20)
	rec := make([]byte, 100<<10)
	for i := 0; i < 40; i++ { // 4 MB
		if _, err := w.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if s := w.Stats(); s.Syncs < 3 {
		t.Fatalf("4 MB handed to the file with bytes-per-sync 1 MB: %d syncs", s.Syncs)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// gateProbeFile records, at each sync, how many bgsys.Do calls are in
// progress: 1 means the sync went through the background gate (this test's
// sync is the only one in the process), 0 that it went at once.
type gateProbeFile struct {
	discardFile
	mu    sync.Mutex
	gated []int
}

func (g *gateProbeFile) Sync() error {
	g.mu.Lock()
	g.gated = append(g.gated, bgsys.InProgress())
	g.mu.Unlock()
	return nil
}

func (g *gateProbeFile) SyncData() error { return g.Sync() }

func (g *gateProbeFile) last(t *testing.T) int {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.gated) == 0 {
		t.Fatal("no sync reached the file")
	}
	return g.gated[len(g.gated)-1]
}

// TestWriterSyncGate checks which syncs are background calls (bgsys.Do,
// at most GOMAXPROCS-1 at once in the process) and which go at once: a
// sync a writer waits for is the foreground; bytes-per-sync, the final
// sync of Close and every sync of a SetBackground log are background.
func TestWriterSyncGate(t *testing.T) {
	rec := pattern(1, 100)
	// A synced write: foreground.
	f := &gateProbeFile{}
	w, _ := NewWriter(f, "log", 1, checksum.XXH3)
	end, _ := w.WriteRecord(rec)
	if err := w.SyncTo(end); err != nil {
		t.Fatal(err)
	}
	if g := f.last(t); g != 0 {
		t.Errorf("a synced write's fsync went through the background gate")
	}
	// Close's final sync: background (the DB closes its old WAL in the
	// background after a rotation).
	if _, err := w.WriteRecord(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if g := f.last(t); g != 1 {
		t.Errorf("Close's fsync did not go through the background gate")
	}

	// A background log: even a waited sync is gated.
	f = &gateProbeFile{}
	w, _ = NewWriter(f, "MANIFEST", 1, checksum.XXH3)
	w.SetBackground()
	end, _ = w.WriteRecord(rec)
	if err := w.SyncTo(end); err != nil {
		t.Fatal(err)
	}
	if g := f.last(t); g != 1 {
		t.Errorf("a SetBackground log's sync did not go through the background gate")
	}
	_ = w.Close()

	// Bytes-per-sync: background.
	f = &gateProbeFile{}
	w, _ = NewWriter(f, "log", 1, checksum.XXH3)
	w.SetBytesPerSync(BlockSize)
	for range 2 * BlockSize / len(rec) {
		if _, err := w.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		f.mu.Lock()
		n := len(f.gated)
		f.mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if g := f.last(t); g != 1 {
		t.Errorf("a bytes-per-sync fsync did not go through the background gate")
	}
	_ = w.Close()
}

// TestGroupCommitGathers checks that a synced round waits for the writers
// the previous fsync released: writer 0's first record is in fsync #1,
// held at the gate while writers 1..n-1 queue for fsync #2; once released,
// writer 0 writes again, and fsync #2 waits for it instead of starting at
// once without it. Without gathering the three rounds would alternate
// (3 fsyncs); with it, 2.
func TestGroupCommitGathers(t *testing.T) {
	defer func(g, q time.Duration) { maxGather, gatherQuiet = g, q }(maxGather, gatherQuiet)
	// The window is then a quarter of fsync #1's time, and the returning
	// writer (slow under -race) cannot end it by the quiet gap.
	maxGather, gatherQuiet = time.Hour, time.Hour
	const n = 4
	w, cf, write := gatedSyncWriter(t)
	errs := make(chan error, n)
	go func() {
		if err := write(0); err != nil {
			errs <- err
			return
		}
		errs <- write(n)
	}()
	<-cf.inSync // fsync #1 holds writer 0's first record
	for i := 1; i < n; i++ {
		go func() { errs <- write(i) }()
	}
	waitWaiters(t, w, n)
	// Hold fsync #1 long enough that its quarter is a window no scheduler
	// hiccup outlasts.
	time.Sleep(200 * time.Millisecond)
	close(cf.gate)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	s := w.Stats()
	if _, syncs := cf.counts(); syncs != 2 || s.Syncs != 2 {
		t.Fatalf("%d fsyncs (writer counted %d), want 2: fsync #2 did not wait for the writer fsync #1 released", syncs, s.Syncs)
	}
	if s.Gathers != 1 {
		t.Fatalf("%d gathers, want 1", s.Gathers)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestGroupCommitGatherBounded checks that a writer the last fsync
// released and that does not come back holds the others up only until the
// gather gives up, and the round still syncs them: by the window (a
// quarter of the fsync's time, at most maxGather) or, first, by the quiet
// gap (no released writer arriving for gatherQuiet).
func TestGroupCommitGatherBounded(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxGather  time.Duration
		quiet      time.Duration
		hold       time.Duration // fsync #1's time beyond the setup
		wantQuiets int64
	}{
		// The quiet gap never ends it: the window (<= 1 ms) does.
		{"window", maxGather, time.Hour, 0, 0},
		// A 50 ms window (200 ms / 4): the 20 µs quiet gap ends it.
		{"quiet", time.Hour, gatherQuiet, 200 * time.Millisecond, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(g, q time.Duration) { maxGather, gatherQuiet = g, q }(maxGather, gatherQuiet)
			maxGather, gatherQuiet = tc.maxGather, tc.quiet
			const n = 4
			w, cf, write := gatedSyncWriter(t)
			errs := make(chan error, n)
			go func() { errs <- write(0) }() // writes once, never again
			<-cf.inSync
			for i := 1; i < n; i++ {
				go func() { errs <- write(i) }()
			}
			waitWaiters(t, w, n)
			time.Sleep(tc.hold)
			close(cf.gate)
			for range n {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			s := w.Stats()
			if s.Syncs != 2 || s.Gathers != 1 {
				t.Fatalf("%d syncs, %d gathers: want 2 and 1 (fsync #2 gathered, in vain, then synced)", s.Syncs, s.Gathers)
			}
			if s.GatherQuiets != tc.wantQuiets {
				t.Fatalf("%d gathers ended by the quiet gap, want %d", s.GatherQuiets, tc.wantQuiets)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// gatedSyncWriter returns a Writer on a mem file whose syncs wait at
// cf.gate, and write(i): append record i (under a commit mutex, as the DB
// does) and wait until it is synced.
func gatedSyncWriter(t *testing.T) (w *Writer, cf *countingFile, write func(i int) error) {
	t.Helper()
	flusherRoundsOnly(t)
	f, _ := vfs.NewMem().Create("log")
	cf = &countingFile{File: f, gate: make(chan struct{}), inSync: make(chan struct{}, 1)}
	w, err := NewWriter(cf, "log", 5, checksum.CRC32c)
	if err != nil {
		t.Fatal(err)
	}
	var commitMu sync.Mutex
	write = func(i int) error {
		commitMu.Lock()
		end, err := w.WriteRecord(pattern(i, 100))
		commitMu.Unlock()
		if err != nil {
			return err
		}
		return w.SyncTo(end)
	}
	return w, cf, write
}

// flusherRoundsOnly turns direct rounds off for the test: tests that hold
// the first fsync and count the callers waiting in SyncTo need the first
// write to go through the flusher. Had the flusher gone idle first (it
// depends on the machine's load), that write would make its round itself
// (syncDirect) and never wait, and the count would stop one short.
func flusherRoundsOnly(t *testing.T) {
	prev := directRounds
	directRounds = false
	t.Cleanup(func() { directRounds = prev })
}

// waitWaiters waits until n goroutines are blocked in w.SyncTo.
func waitWaiters(t *testing.T, w *Writer, n int) {
	t.Helper()
	for {
		w.mu.Lock()
		waiting := w.waiters
		w.mu.Unlock()
		if waiting == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// writeHoldFile holds its writes at hold once armed (signalling inWrite
// first) and makes each sync take syncTime.
type writeHoldFile struct {
	vfs.File
	mu       sync.Mutex
	hold     chan struct{}
	inWrite  chan struct{}
	syncTime time.Duration
}

func (f *writeHoldFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		f.inWrite <- struct{}{}
		<-hold
	}
	return f.File.Write(p)
}

func (f *writeHoldFile) Sync() error {
	time.Sleep(f.syncTime)
	return f.File.Sync()
}

func (f *writeHoldFile) SyncData() error { return f.Sync() }

// TestGroupCommitGatherCount checks what a sync counts as released: the
// waiters whose records its round took, not one that arrived during the
// round's writes with a record beyond it (that one waits for the next
// sync, and gathering for it would wait the whole window for nothing).
func TestGroupCommitGatherCount(t *testing.T) {
	defer func(g, q time.Duration) { maxGather, gatherQuiet = g, q }(maxGather, gatherQuiet)
	// The gather lasts its window, a quarter of the 400 ms sync, long
	// enough for its count to be seen.
	maxGather, gatherQuiet = time.Hour, time.Hour
	mf, _ := vfs.NewMem().Create("log")
	f := &writeHoldFile{File: mf, inWrite: make(chan struct{}), syncTime: 400 * time.Millisecond}
	w, err := NewWriter(f, "log", 5, checksum.CRC32c)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil { // the header
		t.Fatal(err)
	}
	f.mu.Lock()
	f.hold = make(chan struct{})
	f.mu.Unlock()
	errs := make(chan error, 2)
	// Held, so that the first round to take A's record is a synced one.
	w.Hold()
	endA, _ := w.WriteRecord(pattern(1, 100))
	go func() { errs <- w.SyncTo(endA) }()
	waitWaiters(t, w, 1)
	w.Release(nil)
	<-f.inWrite // the round that takes A's record is in its write
	endB, _ := w.WriteRecord(pattern(2, 100))
	go func() { errs <- w.SyncTo(endB) }()
	waitWaiters(t, w, 2)
	f.mu.Lock()
	close(f.hold)
	f.hold = nil
	f.mu.Unlock()
	// After the first sync A is released and never comes back, B waits:
	// the next round gathers for the one waiter released.
	var want int
	for want == 0 {
		w.mu.Lock()
		want = w.gatherWant
		gathers := w.stats.Gathers
		w.mu.Unlock()
		if want == 0 && gathers > 0 {
			t.Fatal("the gather ended before its count was seen")
		}
		time.Sleep(100 * time.Microsecond)
	}
	if want != 1 {
		t.Fatalf("the first sync counted %d released waiters, want 1 (B's record was beyond its round)", want)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
