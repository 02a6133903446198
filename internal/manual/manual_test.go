package manual

import "testing"

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
