package sst

import (
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manual"
)

// TestHashBuf checks the hashes survive every doubling in order, and that
// release returns exactly what was mapped.
func TestHashBuf(t *testing.T) {
	before := manual.Allocated()
	var h hashBuf
	const n = 5*minHashCap + 17 // three doublings and a partial buffer
	for i := range n {
		h.add(uint64(i) * 0x9e3779b97f4a7c15)
	}
	got := h.hashes()
	if len(got) != n || h.len() != n {
		t.Fatalf("%d hashes (len %d), want %d", len(got), h.len(), n)
	}
	for i, v := range got {
		if want := uint64(i) * 0x9e3779b97f4a7c15; v != want {
			t.Fatalf("hash %d = %#x, want %#x", i, v, want)
		}
	}
	if m := manual.Allocated() - before; m != int64(cap(h.s))*8 {
		t.Fatalf("%d bytes mapped for a capacity of %d hashes: old buffers not unmapped", m, cap(h.s))
	}
	h.release()
	if m := manual.Allocated() - before; m != 0 || h.len() != 0 {
		t.Fatalf("after release: %d bytes still mapped, %d hashes", m, h.len())
	}
	h.add(1) // reusable after release
	if h.len() != 1 {
		t.Fatalf("%d hashes after reuse", h.len())
	}
	h.release()
	var nilBuf *hashBuf
	nilBuf.release()
	if nilBuf.len() != 0 || nilBuf.hashes() != nil {
		t.Fatal("nil hashBuf is not empty")
	}
}

// TestWriterReleasesHashes checks that Close and Abort both unmap the
// filter hashes of a table writer.
func TestWriterReleasesHashes(t *testing.T) {
	fs := vfs.NewMem()
	for _, abort := range []bool{false, true} {
		before := manual.Allocated()
		f, err := fs.Create("t.sst")
		if err != nil {
			t.Fatal(err)
		}
		w := NewWriter(f, WriterOptions{BloomBitsPerKey: 10})
		key := make([]byte, 8)
		for i := range 3 * minHashCap {
			key[0], key[1], key[2] = byte(i>>16), byte(i>>8), byte(i)
			if err := w.Add(base.MakeInternalKey(key, 1, base.KindSet), nil); err != nil {
				t.Fatal(err)
			}
		}
		if manual.Allocated() == before {
			t.Fatal("no hashes mapped while writing")
		}
		if abort {
			w.Abort()
		} else if _, err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if m := manual.Allocated() - before; m != 0 {
			t.Errorf("abort=%v: %d bytes still mapped after the writer finished", abort, m)
		}
	}
}
