package sst

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
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
	if got := inUse() - before; got != 2 {
		t.Fatalf("an open table holds %d buffers of metaAlloc, want its index and filter", got)
	}
	if got, want := r.MetaMemory(), metaAlloc.Stats().InUse-beforeBytes; got != want || got == 0 {
		t.Fatalf("MetaMemory = %d, the allocator has %d bytes more in use", got, want)
	}
	if err := r.Verify(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Layout()[0].IndexKey.UserKey, r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := inUse() - before; got != 0 {
		t.Fatalf("%d buffers of metaAlloc left after Close", got)
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
