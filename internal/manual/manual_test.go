package manual

import (
	"testing"
	"unsafe"

	"github.com/vigildb/vigil/internal/invariants"
)

// TestAllocSlice checks that a typed slice over manual memory is zeroed,
// writable over its whole length, and freed in full (its capacity) even
// when resliced to empty, and that nil and empty slices are accepted.
func TestAllocSlice(t *testing.T) {
	type pair struct{ a, b uint64 }
	before := Allocated()
	s := AllocSlice[pair](1000)
	if len(s) != 1000 || cap(s) != 1000 {
		t.Fatalf("len %d cap %d, want 1000", len(s), cap(s))
	}
	if got := Allocated() - before; got != 1000*16 {
		t.Fatalf("%d bytes allocated for 1000 16-byte elements", got)
	}
	for i := range s {
		if s[i] != (pair{}) {
			t.Fatalf("element %d not zeroed: %v", i, s[i])
		}
		s[i] = pair{uint64(i), ^uint64(i)}
	}
	for i := range s {
		if s[i] != (pair{uint64(i), ^uint64(i)}) {
			t.Fatalf("element %d = %v after writing", i, s[i])
		}
	}
	FreeSlice(s[:0])
	if got := Allocated() - before; got != 0 {
		t.Fatalf("%d bytes still allocated after FreeSlice", got)
	}
	if AllocSlice[pair](0) != nil {
		t.Fatal("AllocSlice(0) is not nil")
	}
	FreeSlice[pair](nil)
}

// TestAllocFree checks Alloc's contract on every platform: the buffer is
// zeroed and writable over its whole length, small and memtable-sized
// (hugeMin and up) alike, and the counter follows Alloc and Free.
func TestAllocFree(t *testing.T) {
	before := Allocated()
	for _, n := range []int{1, 4096, 100 << 10, 2 * hugeMin} {
		b := Alloc(n)
		if len(b) != n {
			t.Fatalf("Alloc(%d): %d bytes", n, len(b))
		}
		for i := range b {
			if b[i] != 0 {
				t.Fatalf("Alloc(%d): byte %d = %#x, not zeroed", n, i, b[i])
			}
		}
		b[0], b[n-1] = 1, 2
		if got := Allocated() - before; got != int64(n) {
			t.Fatalf("Alloc(%d): Allocated grew by %d", n, got)
		}
		Free(b)
		if got := Allocated() - before; got != 0 {
			t.Fatalf("Free of %d bytes: Allocated off by %d", n, got)
		}
	}
}

// TestFreeFaults checks that in invariants builds a freed buffer that came
// from the operating system faults on access (mprotect on Unix, decommit
// on Windows) instead of reading recycled memory.
func TestFreeFaults(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("needs -tags invariants")
	}
	for _, n := range []int{4096, 2 * hugeMin} {
		b := Alloc(n)
		if !mapped.contains(uintptr(unsafe.Pointer(&b[0]))) {
			Free(b)
			t.Skip("Alloc falls back to the Go heap here")
		}
		b[0] = 1
		Free(b)
		if !faults(func() { sink = b[0] }) {
			t.Fatalf("%d bytes: reading a freed buffer did not fault", n)
		}
		if !faults(func() { b[n-1] = 7 }) {
			t.Fatalf("%d bytes: writing a freed buffer did not fault", n)
		}
	}
}
