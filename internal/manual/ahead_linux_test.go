//go:build linux

package manual

import (
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/vigildb/vigil/internal/invariants"
	"golang.org/x/sys/unix"
)

// resident reports, per 4 KiB page of b, whether it is in memory
// (mincore).
func resident(t *testing.T, b []byte) []bool {
	t.Helper()
	const page = 4096
	vec := make([]byte, (len(b)+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	r := make([]bool, len(vec))
	for i, v := range vec {
		r[i] = v&1 != 0
	}
	return r
}

// waitResident waits until all of b is in memory (the worker populates
// asynchronously); it fails after a generous deadline, which only a worker
// that never ran can miss.
func waitResident(t *testing.T, b []byte, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		all := true
		for _, r := range resident(t, b) {
			all = all && r
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became resident", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// noneResident fails if any page of b is in memory.
func noneResident(t *testing.T, b []byte, what string) {
	t.Helper()
	for i, r := range resident(t, b) {
		if r {
			t.Fatalf("%s: page %d resident, nothing asked for it", what, i)
		}
	}
}

// newFaultAhead returns a 16 MiB buffer from Alloc and its FaultAhead,
// stopped and freed when the test ends; it skips where populating is
// unsupported. The FaultAhead's raises are recorded in *limit.
func newFaultAhead(t *testing.T) ([]byte, *FaultAhead, *atomic.Int64) {
	t.Helper()
	buf := Alloc(16 << 20)
	t.Cleanup(func() { Free(buf) })
	limit := new(atomic.Int64)
	f := NewFaultAhead(buf, func(l int) {
		if int64(l) <= limit.Load() {
			t.Errorf("raise to %d after %d", l, limit.Load())
		}
		limit.Store(int64(l))
	})
	if f == nil {
		t.Skip("MADV_POPULATE_WRITE unsupported here")
	}
	t.Cleanup(func() { f.Stop() }) // before Free: cleanups run last-registered first
	return buf, f, limit
}

// waitReady waits until f's ready part reaches at least n.
func waitReady(t *testing.T, f *FaultAhead, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for f.Ready() < n {
		if time.Now().After(deadline) {
			t.Fatalf("Ready() = %d, never reached %d", f.Ready(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFaultAhead checks what FaultAhead makes ready and when: the first
// huge page at once; the next one only when the fill point is within
// AheadLead of the current one's end, a warm page moved in if one is
// kept; nothing further ahead; each raise reported; and the bytes already
// used unchanged.
func TestFaultAhead(t *testing.T) {
	releaseWarm(-1) // populated pages first, not warm ones
	defer releaseWarm(-1)
	buf, f, limit := newFaultAhead(t)
	p0 := f.pageEnd(0) // end of the first huge page
	if p0 != AheadStep {
		t.Fatalf("first page ends at %d: a large buffer is not huge-page aligned", p0)
	}
	p1 := f.pageEnd(p0) // end of the second
	p2 := f.pageEnd(p1)
	p3 := f.pageEnd(p2)
	waitReady(t, f, p0)
	waitResident(t, buf[:p0], "the first page")
	noneResident(t, buf[p0:], "beyond the first page")
	if got := limit.Load(); got != int64(p0) {
		t.Fatalf("raised to %d, want %d", got, p0)
	}

	// Before AheadLead from the first page's end: nothing more.
	at := p0 - AheadLead
	if next := f.Reached(8); next != at {
		t.Fatalf("Reached(8) = %d, want %d", next, at)
	}
	buf[0] = 0x5a // bytes the user wrote in the ready part stay
	buf[p0-1] = 0xa5
	if next := f.Reached(at); next != p1-AheadLead {
		t.Fatalf("Reached(%d) = %d, want %d", at, next, p1-AheadLead)
	}
	waitReady(t, f, p1)
	waitResident(t, buf[p0:p1], "the second page")
	noneResident(t, buf[p1:], "two pages ahead")
	if buf[0] != 0x5a || buf[p0-1] != 0xa5 {
		t.Fatal("making pages ready changed the buffer's bytes")
	}

	// Need makes what is asked for ready at once (no warm pages: left to
	// fault in), and no more.
	if got := f.Need(p1 + 1); got != p2 || limit.Load() != int64(got) {
		t.Fatalf("Need(%d) = %d (raised to %d), want %d", p1+1, got, limit.Load(), p2)
	}
	noneResident(t, buf[p1:], "a page left to fault in")

	// With warm pages kept, the page asked for comes warm.
	if !invariants.Enabled {
		if fillAndFree(t, 9<<20) == 0 {
			t.Fatal("no pages kept")
		}
		kept := WarmBytes()
		if next := f.Reached(p3 - AheadLead); next != f.pageEnd(p3)-AheadLead {
			t.Fatalf("Reached(%d) = %d, want %d", p3-AheadLead, next, f.pageEnd(p3)-AheadLead)
		}
		// The worker makes ready in order: the page Need skipped, then the
		// one asked for, both warm.
		waitReady(t, f, f.pageEnd(p3))
		waitResident(t, buf[p2:f.pageEnd(p3)], "the warm pages")
		if WarmBytes() != kept-2*AheadStep {
			t.Fatalf("WarmBytes() = %d after two pages moved, want %d", WarmBytes(), kept-2*AheadStep)
		}
	}

	// Near the end: nothing past the buffer is asked for.
	if next := f.Reached(len(buf) - 1); next < len(buf) {
		t.Fatalf("Reached(last byte) = %d, want >= %d", next, len(buf))
	}
	if got := f.Need(len(buf) + 100); got != len(buf) {
		t.Fatalf("Need past the end = %d, want %d", got, len(buf))
	}
}

// TestFaultAheadStop checks that Stop drops queued work: a buffer whose
// FaultAhead was stopped is never populated, and Stop reports how much
// was made ready.
func TestFaultAheadStop(t *testing.T) {
	releaseWarm(-1)
	buf, f, _ := newFaultAhead(t)
	p0 := f.pageEnd(0)
	waitReady(t, f, p0)
	if got := f.Stop(); got != p0 {
		t.Fatalf("Stop() = %d, want %d", got, p0)
	}
	f.Reached(f.pageEnd(p0) - AheadLead) // asks for the second page, after Stop
	// A marker request after it: once its page is ready, the worker has
	// passed the stopped request.
	_, g, _ := newFaultAhead(t)
	waitReady(t, g, g.pageEnd(0))
	noneResident(t, buf[p0:], "a stopped buffer")
	if got := f.Need(len(buf)); got != p0 {
		t.Fatalf("Need after Stop = %d, want %d (nothing made ready)", got, p0)
	}
}

// TestFaultAheadSmall checks that small or heap buffers get none.
func TestFaultAheadSmall(t *testing.T) {
	small := Alloc(hugeMin / 2)
	defer Free(small)
	if f := NewFaultAhead(small, func(int) {}); f != nil {
		t.Fatal("FaultAhead for a buffer below hugeMin")
	}
	if f := NewFaultAhead(make([]byte, 2*hugeMin), func(int) {}); f != nil {
		t.Fatal("FaultAhead for a Go heap buffer")
	}
	var f *FaultAhead
	f.Stop() // what Release does for a memtable without one
}
