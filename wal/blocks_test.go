package wal

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/cockroachdb/pebble/vfs/errorfs"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/manual"
)

// newFSWriter opens a writer of log 1 on fs.
func newFSWriter(t *testing.T, fs vfs.FS) *Writer {
	t.Helper()
	f, err := fs.Create("000001.log")
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(f, "000001.log", 1, checksum.XXH3)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// writeHeld holds w and appends about blocks blocks of records, which all
// stay queued.
func writeHeld(t *testing.T, w *Writer, blocks int) {
	t.Helper()
	w.Hold()
	rec := make([]byte, 1000)
	for range blocks * BlockSize / len(rec) {
		if _, err := w.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
}

// waitAllocatedAtMost waits up to 10 s for the blocks allocated since
// before to fall to limit bytes, and returns what they are.
func waitAllocatedAtMost(before, limit int64) int64 {
	deadline := time.Now().Add(10 * time.Second)
	for manual.Allocated()-before > limit && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	return manual.Allocated() - before
}

// TestBlocksFreed checks that a writer's blocks, which live outside the Go
// heap, are all freed: those beyond the idle free list once the flusher has
// caught up, the rest at Close; on the success path, after a writer failed
// by Release, and after a write to the file failed mid-round (the round's
// blocks are then only in the flusher's hands).
func TestBlocksFreed(t *testing.T) {
	for _, tc := range []string{"ok", "released-with-error", "write-fails"} {
		t.Run(tc, func(t *testing.T) {
			drainPool()
			before := manual.Allocated()
			var fs vfs.FS = vfs.NewMem()
			injected := errors.New("injected")
			var armed atomic.Bool // the flusher may write the header before Hold
			if tc == "write-fails" {
				fs = errorfs.Wrap(fs, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
					if op == errorfs.OpFileWrite && armed.Load() {
						return injected
					}
					return nil
				}))
			}
			w := newFSWriter(t, fs)
			// Held, the flusher writes nothing: every block stays queued.
			const blocks = 3 * idleFreeBlocks
			writeHeld(t, w, blocks)
			if n := manual.Allocated() - before; n < blocks*BlockSize {
				t.Fatalf("%d bytes allocated outside the heap for %d blocks of records", n, blocks)
			}
			var rerr error
			if tc == "released-with-error" {
				rerr = injected
			}
			armed.Store(true)
			w.Release(rerr)
			if tc == "ok" {
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				// Caught up: the flusher trims the free list when it next
				// waits for work, into the pool and beyond it to the OS.
				limit := int64(idleFreeBlocks+blockPoolMax+1) * BlockSize
				if n := waitAllocatedAtMost(before, limit); n > limit {
					t.Errorf("%d bytes still allocated after the flush; the idle free list keeps %d blocks, the pool %d, and the current one", n, idleFreeBlocks, blockPoolMax)
				}
			}
			err := w.Close()
			if (tc == "ok") != (err == nil) {
				t.Fatalf("Close: %v", err)
			}
			if tc != "ok" && !errors.Is(err, injected) {
				t.Fatalf("Close: %v, want the injected error", err)
			}
			// Close pools what the pool takes and frees the rest.
			if n := manual.Allocated() - before; n > blockPoolMax*BlockSize {
				t.Errorf("%d bytes of blocks neither freed nor pooled after Close", n)
			}
			drainPool()
			if n := manual.Allocated() - before; n != 0 {
				t.Errorf("%d bytes of blocks not freed after Close and drainPool", n)
			}
			if n := w.Stats().BufferBytes; n != 0 {
				t.Errorf("Stats().BufferBytes = %d after Close", n)
			}
		})
	}
}

// TestBlocksTrimmedWhenIdle: a writer that has appended nothing for
// idleTrimAfter keeps only idleKeepBlocks free blocks (and its current
// one); writing again afterwards works and maps new blocks.
func TestBlocksTrimmedWhenIdle(t *testing.T) {
	defer func(d time.Duration) { idleTrimAfter = d }(idleTrimAfter)
	idleTrimAfter = 10 * time.Millisecond
	drainPool()
	before := manual.Allocated()
	w := newFSWriter(t, vfs.NewMem())
	defer w.Close()
	for round := range 2 {
		writeHeld(t, w, 2*idleFreeBlocks)
		w.Release(nil)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		limit := int64(idleKeepBlocks+1) * BlockSize
		if n := waitAllocatedAtMost(before, limit); n > limit {
			t.Fatalf("round %d: %d bytes of blocks held by an idle writer, want at most %d", round, n, limit)
		}
		if got, want := w.Stats().BufferBytes, manual.Allocated()-before; got != want {
			t.Errorf("round %d: Stats().BufferBytes = %d, the allocator says %d", round, got, want)
		}
		if got := w.Stats().IdleTrims; got != int64(round+1) {
			t.Errorf("round %d: %d idle trims, want %d", round, got, round+1)
		}
	}
}

// TestTrimOutsideLock checks that the flusher frees the surplus blocks the
// pool does not take without holding the writer's lock: each free waits
// for every processor's TLB to drop the block's pages, which can take
// milliseconds, and a trace caught appends waiting 22 ms behind a trim.
// The release of the first surplus block is held here until an append has
// gone through.
func TestTrimOutsideLock(t *testing.T) {
	entered := make(chan struct{})
	proceed := make(chan struct{})
	var once sync.Once
	drainPool() // before the hook, which holds the first release
	defer func(prev func(*block)) { releaseBlock = prev }(releaseBlock)
	releaseBlock = func(b *block) {
		once.Do(func() {
			close(entered)
			<-proceed
		})
		b.release()
	}
	w := newFSWriter(t, vfs.NewMem())
	// Enough blocks that the trim, once the pool is full, frees some.
	writeHeld(t, w, 3*idleFreeBlocks+blockPoolMax)
	w.Release(nil)
	// The flusher trims right after the round Flush waits for: Flush
	// returns only if the trim lets go of the lock.
	flushed := make(chan error, 1)
	go func() { flushed <- w.Flush() }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the flusher did not trim its free list")
	}
	appended := make(chan error, 1)
	go func() {
		_, err := w.WriteRecord([]byte("during the trim"))
		appended <- err
	}()
	for _, step := range []struct {
		what string
		done chan error
	}{{"Flush", flushed}, {"an append", appended}} {
		select {
		case err := <-step.done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			close(proceed)
			t.Fatalf("%s waited for the trim's block releases", step.what)
		}
	}
	close(proceed)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBlockPool checks that blocks a writer trims or leaves at Close go to
// the pool, up to blockPoolMax, and that the next writer maps none while
// the pool has some.
func TestBlockPool(t *testing.T) {
	drainPool()
	w := newFSWriter(t, vfs.NewMem())
	writeHeld(t, w, 2*idleFreeBlocks)
	w.Release(nil)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	blockPool.mu.Lock()
	pooled := len(blockPool.blocks)
	blockPool.mu.Unlock()
	if pooled != blockPoolMax {
		t.Fatalf("%d blocks pooled after closing a writer of %d, want %d", pooled, 2*idleFreeBlocks, blockPoolMax)
	}
	before := manual.Allocated()
	w = newFSWriter(t, vfs.NewMem())
	writeHeld(t, w, blockPoolMax/2)
	if n := manual.Allocated() - before; n != 0 {
		t.Errorf("a new writer mapped %d bytes while the pool had %d blocks", n, pooled)
	}
	w.Release(nil)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	drainPool()
}
