package manual

import (
	"testing"
	"time"
	"unsafe"

	"github.com/vigildb/vigil/internal/invariants"
)

// fillAndFree allocates a 16 MiB buffer, writes nonzero bytes into its
// first filled bytes and frees it with FreeFilled; it returns how many
// whole huge pages those bytes cover (what warm can keep).
func fillAndFree(t *testing.T, filled int) int {
	t.Helper()
	b := Alloc(16 << 20)
	for i := 0; i < filled; i += 512 {
		b[i] = 0xee
	}
	base := uintptr(unsafe.Pointer(&b[0]))
	lo := (base + AheadStep - 1) &^ (AheadStep - 1)
	hi := (base + uintptr(filled)) &^ (AheadStep - 1)
	FreeFilled(b, filled)
	if hi <= lo {
		return 0
	}
	return int((hi - lo) / AheadStep)
}

// TestWarmPages checks the life of a warm page: a freed arena's filled
// huge pages are kept (and only those), the next FaultAhead moves them in
// zeroed and resident ahead of its fill point, and the slab allocators'
// mappings and the idle timer release what is left.
func TestWarmPages(t *testing.T) {
	if invariants.Enabled {
		t.Skip("invariants builds never reuse freed memory")
	}
	settle(t)
	defer releaseWarm(-1)
	buf, f, _ := newFaultAhead(t)
	waitReady(t, f, f.pageEnd(0))
	before := Allocated()
	kept := fillAndFree(t, 9<<20)
	if got := WarmBytes(); got != int64(kept)*AheadStep || kept < 3 {
		t.Fatalf("WarmBytes() = %d after freeing 9 MiB filled, want %d pages (>= 3)", got, kept)
	}
	if Allocated() != before {
		t.Fatalf("Allocated() = %d after FreeFilled, want %d", Allocated(), before)
	}
	want := f.pageEnd(0)
	for range kept {
		want = f.pageEnd(want)
	}
	got := f.Need(want)
	if got != want {
		t.Fatalf("Need(%d) = %d", want, got)
	}
	if left := WarmBytes(); left != 0 {
		t.Fatalf("WarmBytes() = %d after %d pages were needed", left, kept)
	}
	waitResident(t, buf[:got], "the pages made ready")
	for i, c := range buf[:got] {
		if c != 0 {
			t.Fatalf("byte %d of a fresh buffer is %#x, want 0", i, c)
		}
	}

	// The slab allocators map memory only for memory: a 4 MiB mapping
	// releases two kept pages.
	if fillAndFree(t, 9<<20) < 3 {
		t.Fatal("no pages kept")
	}
	n := WarmBytes()
	m, ok := mapMem(4 << 20)
	if ok {
		defer unmapMem(m)
	}
	if got := WarmBytes(); got != n-2*AheadStep {
		t.Fatalf("WarmBytes() = %d after mapping 4 MiB, want %d", got, n-2*AheadStep)
	}

	// Smaller buffers too, a page for every 2 MiB of them: two of 1 MiB
	// release one page between them.
	n = WarmBytes()
	b1 := Alloc(1 << 20)
	defer Free(b1)
	if WarmBytes() != n {
		t.Fatalf("WarmBytes() = %d after 1 MiB allocated, want %d", WarmBytes(), n)
	}
	b2 := Alloc(1 << 20)
	defer Free(b2)
	if WarmBytes() != n-AheadStep {
		t.Fatalf("WarmBytes() = %d after 2 MiB allocated, want %d", WarmBytes(), n-AheadStep)
	}

	// What is owed short of a page goes with the last page: releasing all
	// of them leaves no debt for the next ones kept.
	releaseWarm(-1)
	if fillAndFree(t, 9<<20) < 3 {
		t.Fatal("no pages kept")
	}
	releaseWarm(int(WarmBytes()) + AheadStep/2) // all, and half a page more
	if fillAndFree(t, 9<<20) < 3 {
		t.Fatal("no pages kept")
	}
	n = WarmBytes()
	b3 := Alloc(1 << 20)
	defer Free(b3)
	if WarmBytes() != n {
		t.Fatalf("WarmBytes() = %d after 1 MiB allocated on a fresh list, want %d", WarmBytes(), n)
	}

	// Unused for warmIdle, they go.
	deadline := time.Now().Add(3*warmIdle + 5*time.Second)
	for WarmBytes() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("WarmBytes() = %d long after the last use", WarmBytes())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWarmPagesBounded checks that no more than warmMax pages are kept,
// and that an unfilled buffer leaves none.
func TestWarmPagesBounded(t *testing.T) {
	if invariants.Enabled {
		t.Skip("invariants builds keep no pages")
	}
	settle(t)
	defer releaseWarm(-1)
	if fillAndFree(t, 0) != 0 || WarmBytes() != 0 {
		t.Fatalf("an unfilled buffer left %d bytes warm", WarmBytes())
	}
	for WarmBytes() < warmMax*AheadStep {
		if fillAndFree(t, 16<<20) == 0 {
			t.Fatal("no pages kept")
		}
	}
	if fillAndFree(t, 16<<20); WarmBytes() != warmMax*AheadStep {
		t.Fatalf("WarmBytes() = %d, want at most %d", WarmBytes(), warmMax*AheadStep)
	}
}

// TestWarmPagesCredit checks that other manual memory returned while
// pages are kept pays for later mappings: buffers freed and allocated
// again, as a fill does with WAL blocks each memtable, unmap no kept
// page, where counting only the allocations unmapped one for every 2 MiB.
// Only growth beyond what was returned costs pages, the credit is
// bounded, and it goes with the last page kept.
func TestWarmPagesCredit(t *testing.T) {
	if invariants.Enabled {
		t.Skip("invariants builds keep no pages")
	}
	settle(t)
	defer releaseWarm(-1)
	if fillAndFree(t, 9<<20) < 3 {
		t.Fatal("no pages kept")
	}
	n := WarmBytes()
	for range 4 {
		Free(Alloc(1 << 20))
	}
	if WarmBytes() != n {
		t.Fatalf("WarmBytes() = %d after 1 MiB allocated and freed 4 times, want %d", WarmBytes(), n)
	}
	b1, b2 := Alloc(1<<20), Alloc(1<<20) // 2 MiB held beyond what was returned
	defer Free(b1)
	defer Free(b2)
	if WarmBytes() != n-AheadStep {
		t.Fatalf("WarmBytes() = %d after 2 MiB more held, want %d", WarmBytes(), n-AheadStep)
	}

	// Bounded: a credit of more than warmMax pages counts as warmMax.
	creditWarm(1 << 40)
	n = WarmBytes()
	releaseWarm(warmMax*AheadStep + AheadStep)
	if WarmBytes() != n-AheadStep {
		t.Fatalf("WarmBytes() = %d after a capped credit and a page more mapped, want %d", WarmBytes(), n-AheadStep)
	}

	// With no page kept, nothing is credited.
	releaseWarm(-1)
	creditWarm(8 << 20)
	if fillAndFree(t, 9<<20) < 3 {
		t.Fatal("no pages kept")
	}
	n = WarmBytes()
	releaseWarm(AheadStep)
	if WarmBytes() != n-AheadStep {
		t.Fatalf("WarmBytes() = %d after 2 MiB mapped on a fresh list, want %d", WarmBytes(), n-AheadStep)
	}
}
