package sst

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manual"
)

// TestTableMemFreed checks that the index and filter a Reader keeps outside
// the Go heap are freed by Close and, when Open fails after reading them,
// by Open itself; and that Verify frees the metadata it reads again.
func TestTableMemFreed(t *testing.T) {
	spec := genSpec(rand.New(rand.NewPCG(1, 2)), 5000, 12, 40, 3)
	data, _ := build(t, testWriterOptions(checksum.CRC32c, SnappyCompression, 512), spec)
	inUse := func() int64 { return metaAlloc.Stats().Buffers }
	before, beforeBytes := inUse(), metaAlloc.Stats().InUse
	r := mustOpen(t, data, ReaderOptions{})
	if r.index.samples.abbrs == nil {
		t.Fatal("the index has no samples")
	}
	if got := inUse() - before; got != 3 {
		t.Fatalf("an open table holds %d buffers of metaAlloc, want its index, its samples and filter", got)
	}
	if got, want := r.MetaMemory(), metaAlloc.Stats().InUse-beforeBytes; got != want || got == 0 {
		t.Fatalf("MetaMemory = %d, the allocator has %d bytes more in use", got, want)
	}
	if err := r.Verify(); err != nil {
		t.Fatal(err)
	}
	if used, mapped := TableMemory(); used != metaAlloc.Stats().InUse || mapped < used {
		t.Fatalf("TableMemory = %d in use, %d mapped", used, mapped)
	}
	key := r.Layout()[0].IndexKey.UserKey
	want := string(key)
	var sizes []int
	for _, b := range r.mem.bufs {
		sizes = append(sizes, len(b.Bytes()))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := inUse() - before; got != 0 || r.MetaMemory() != 0 {
		t.Fatalf("%d buffers of metaAlloc left after Close (MetaMemory %d)", got, r.MetaMemory())
	}
	// The layout's keys are copies: buffers of the same sizes now take
	// the freed slots and are overwritten, and the key reads the same.
	var taken []manual.Buf
	for _, n := range sizes {
		b := metaAlloc.Alloc(n)
		for i := range b.Bytes() {
			b.Bytes()[i] = 0xff
		}
		taken = append(taken, b)
	}
	if string(key) != want {
		t.Fatalf("Layout's key changed after Close: %q, was %q", key, want)
	}
	for _, b := range taken {
		b.Free()
	}
	// Open fails after the metadata is read: the expected size matches,
	// the identity does not.
	_, err := openBytes(data, ReaderOptions{Expect: &Expected{Size: uint64(len(data))}})
	if !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("Open with a wrong identity = %v, want corruption", err)
	}
	if got := inUse() - before; got != 0 {
		t.Fatalf("%d buffers of metaAlloc left after a failed Open", got)
	}
}
