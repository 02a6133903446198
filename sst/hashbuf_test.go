package sst

import (
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/invariants"
	"github.com/vigildb/vigil/internal/manual"
)

// dropSpareHashes frees the spare hash buffer, so that a test starts from
// nothing mapped for hashes.
func dropSpareHashes() { manual.FreeSlice(takeSpareHashes()) }

// TestHashBuf checks the hashes survive every doubling in order, and that
// release keeps exactly what was mapped as the spare (it is small enough),
// or frees it in invariants builds, which keep no spare.
func TestHashBuf(t *testing.T) {
	dropSpareHashes()
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
	kept, reused := int64(cap(h.s))*8, int64(cap(h.s))*8 // the spare, then the spare again
	if invariants.Enabled {
		kept, reused = 0, minHashCap*8 // freed, then a first buffer
	}
	h.release()
	if m := manual.Allocated() - before; m != kept || h.len() != 0 {
		t.Fatalf("after release: %d bytes mapped, %d hashes; want %d (the spare), none", m, h.len(), kept)
	}
	h.add(1) // reusable after release, from the spare: nothing new mapped
	if got := h.hashes(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("hashes after reuse: %v", got)
	}
	if m := manual.Allocated() - before; m != reused {
		t.Fatalf("reuse: %d bytes mapped, want %d", m, reused)
	}
	h.release()
	dropSpareHashes()
	if m := manual.Allocated() - before; m != 0 {
		t.Fatalf("%d bytes mapped once the spare is dropped", m)
	}
	var nilBuf *hashBuf
	nilBuf.release()
	if nilBuf.len() != 0 || nilBuf.hashes() != nil {
		t.Fatal("nil hashBuf is not empty")
	}
}

// TestWriterReleasesHashes checks that Close and Abort both release the
// filter hashes of a table writer: to the spare (none in invariants
// builds), and nothing else mapped.
func TestWriterReleasesHashes(t *testing.T) {
	fs := vfs.NewMem()
	for _, abort := range []bool{false, true} {
		dropSpareHashes()
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
		spare := takeSpareHashes()
		if m := manual.Allocated() - before; m != int64(cap(spare))*8 || (cap(spare) > 0) == invariants.Enabled {
			t.Errorf("abort=%v: %d bytes still mapped after the writer finished, spare %d bytes (invariants build: %v)", abort, m, cap(spare)*8, invariants.Enabled)
		}
		manual.FreeSlice(spare)
	}
}

// TestSpareHashesBounded checks that a buffer larger than maxSpareHashes
// (a flush's) is freed, not kept, and that the larger of two small ones is
// the one kept; in invariants builds, that nothing is.
func TestSpareHashesBounded(t *testing.T) {
	dropSpareHashes()
	before := manual.Allocated()
	if invariants.Enabled {
		putSpareHashes(manual.AllocSlice[uint64](minHashCap))
		if m, s := manual.Allocated()-before, takeSpareHashes(); m != 0 || s != nil {
			t.Fatalf("invariants build: %d bytes kept, spare of capacity %d", m, cap(s))
		}
		return
	}
	putSpareHashes(manual.AllocSlice[uint64](2 * maxSpareHashes / 8))
	if m := manual.Allocated() - before; m != 0 {
		t.Fatalf("%d bytes kept from a buffer over the limit", m)
	}
	putSpareHashes(manual.AllocSlice[uint64](minHashCap))
	putSpareHashes(manual.AllocSlice[uint64](2 * minHashCap))
	putSpareHashes(manual.AllocSlice[uint64](minHashCap))
	if m := manual.Allocated() - before; m != 2*minHashCap*8 {
		t.Fatalf("%d bytes mapped, want only the larger spare's %d", m, 2*minHashCap*8)
	}
	if s := takeSpareHashes(); cap(s) != 2*minHashCap || len(s) != 0 {
		t.Fatalf("spare: len %d cap %d, want empty of capacity %d", len(s), cap(s), 2*minHashCap)
	} else {
		manual.FreeSlice(s)
	}
	if s := takeSpareHashes(); s != nil {
		t.Fatalf("a second take returned a buffer of capacity %d", cap(s))
	}
}
