package wal

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
)

// TestBlocksFreed checks that a writer's blocks, which live outside the Go
// heap, are all freed: those beyond the free list as soon as they are
// written, the rest at Close, on the success path and after a failure.
func TestBlocksFreed(t *testing.T) {
	for _, fail := range []bool{false, true} {
		before := blockAlloc.Stats().Buffers
		fs := vfs.NewMem()
		f, err := fs.Create("000001.log")
		if err != nil {
			t.Fatal(err)
		}
		w, err := NewWriter(f, "000001.log", 1, checksum.XXH3)
		if err != nil {
			t.Fatal(err)
		}
		// Held, the flusher writes nothing: every block stays queued.
		w.Hold()
		rec := make([]byte, 1000)
		const blocks = 3 * maxFreeBlocks
		for range blocks * BlockSize / len(rec) {
			if _, err := w.WriteRecord(rec); err != nil {
				t.Fatal(err)
			}
		}
		if n := blockAlloc.Stats().Buffers - before; n < blocks {
			t.Fatalf("fail=%v: %d blocks allocated for %d blocks of records", fail, n, blocks)
		}
		var injected error
		if fail {
			injected = errors.New("injected")
		}
		w.Release(injected)
		if !fail {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			// Written: at most the free list and the current block remain.
			if n := blockAlloc.Stats().Buffers - before; n > maxFreeBlocks+1 {
				t.Errorf("%d blocks still allocated after the flush; the free list keeps %d", n, maxFreeBlocks)
			}
		}
		err = w.Close()
		if fail != (err != nil) {
			t.Fatalf("fail=%v: Close: %v", fail, err)
		}
		if n := blockAlloc.Stats().Buffers - before; n != 0 {
			t.Errorf("fail=%v: %d blocks still allocated after Close", fail, n)
		}
		if _, err := w.WriteRecord(rec); err == nil {
			t.Errorf("fail=%v: WriteRecord after Close succeeded", fail)
		}
		if got := w.Size(); got <= 0 {
			t.Errorf("fail=%v: Size after Close = %d", fail, got)
		}
	}
}
