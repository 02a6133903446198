//go:build linux

package manual

import (
	"testing"
	"time"
	"unsafe"

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
// unsupported.
func newFaultAhead(t *testing.T) ([]byte, *FaultAhead) {
	t.Helper()
	buf := Alloc(16 << 20)
	t.Cleanup(func() { Free(buf) })
	f := NewFaultAhead(buf)
	if f == nil {
		t.Skip("MADV_POPULATE_WRITE unsupported here")
	}
	t.Cleanup(f.Stop) // before Free: cleanups run last-registered first
	return buf, f
}

// TestFaultAhead checks what FaultAhead populates and when: the first huge
// page at once; the next one only when the fill point is within AheadLead
// of the current one's end; nothing further ahead; and without changing a
// byte.
func TestFaultAhead(t *testing.T) {
	buf, f := newFaultAhead(t)
	p0 := f.pageEnd(0)  // end of the first huge page
	p1 := f.pageEnd(p0) // end of the second
	p2 := f.pageEnd(p1)
	waitResident(t, buf[:p0], "the first page")
	noneResident(t, buf[p0:], "beyond the first page")

	// Before AheadLead from the first page's end: nothing more. (The
	// buffer's start need not be huge-page aligned: the first page may be
	// short, that point before the start.)
	at := p0 - AheadLead
	if at > 8 {
		if next := f.Reached(8); next != at {
			t.Fatalf("Reached(8) = %d, want %d", next, at)
		}
	}
	// Bytes written where the next page will be populated stay.
	buf[p0] = 0x5a
	buf[p1-1] = 0xa5
	if next := f.Reached(max(at, 8)); next != p1-AheadLead {
		t.Fatalf("Reached(%d) = %d, want %d", max(at, 8), next, p1-AheadLead)
	}
	waitResident(t, buf[p0:p1], "the second page")
	noneResident(t, buf[p2:], "two pages ahead")
	if buf[p0] != 0x5a || buf[p1-1] != 0xa5 {
		t.Fatal("populating changed the buffer's bytes")
	}
	// Near the end: nothing past the buffer is asked for.
	if next := f.Reached(len(buf) - 1); next < len(buf) {
		t.Fatalf("Reached(last byte) = %d, want >= %d", next, len(buf))
	}
}

// TestFaultAheadStop checks that Stop drops queued work: a buffer whose
// FaultAhead was stopped is never populated.
func TestFaultAheadStop(t *testing.T) {
	buf, f := newFaultAhead(t)
	p0 := f.pageEnd(0)
	waitResident(t, buf[:p0], "the first page")
	f.Stop()
	f.Reached(f.pageEnd(p0) - AheadLead) // asks for the third page, after Stop
	// A marker request after it: once its page is resident, the worker
	// has passed the stopped request.
	other, g := newFaultAhead(t)
	waitResident(t, other[:g.pageEnd(0)], "the marker's first page")
	noneResident(t, buf[p0:], "a stopped buffer")
}

// TestFaultAheadSmall checks that small or heap buffers get none.
func TestFaultAheadSmall(t *testing.T) {
	small := Alloc(hugeMin / 2)
	defer Free(small)
	if f := NewFaultAhead(small); f != nil {
		t.Fatal("FaultAhead for a buffer below hugeMin")
	}
	if f := NewFaultAhead(make([]byte, 2*hugeMin)); f != nil {
		t.Fatal("FaultAhead for a Go heap buffer")
	}
	var f *FaultAhead
	f.Stop() // what Release does for a memtable without one
}
