//go:build linux

package manual

import (
	"runtime"
	"strings"
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
		t.Skip("no FaultAhead here")
	}
	t.Cleanup(func() { f.Stop() }) // before Free: cleanups run last-registered first
	return buf, f, limit
}

// settle waits until the worker has done what earlier tests asked of it
// (a spare page it made late would count as kept: requests are taken in
// order, so a new buffer's first page comes after them), then drops every
// kept page.
func settle(t *testing.T) {
	t.Helper()
	_, g, _ := newFaultAhead(t)
	waitReady(t, g, g.pageEnd(0))
	g.Stop()
	releaseWarm(-1)
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
// huge page at once; as the fill point enters a page, the next coldAhead
// pages while no warm page is kept, and the next one, moved in warm,
// while some are; each raise reported; and the bytes already used
// unchanged.
func TestFaultAhead(t *testing.T) {
	settle(t) // populated pages first, not warm ones
	defer releaseWarm(-1)
	buf, f, limit := newFaultAhead(t)
	pages := []int{0}
	for end := 0; end < len(buf); {
		end = f.pageEnd(end)
		pages = append(pages, end) // pages[i] is the end of the i-th page
	}
	if pages[1] != AheadStep {
		t.Fatalf("first page ends at %d: a large buffer is not huge-page aligned", pages[1])
	}
	waitReady(t, f, pages[1])
	waitResident(t, buf[:pages[1]], "the first page")
	noneResident(t, buf[pages[1]:], "beyond the first page")
	if got := limit.Load(); got != int64(pages[1]) {
		t.Fatalf("raised to %d, want %d", got, pages[1])
	}

	// In the first page, cold, on a slow host: the next coldAhead pages,
	// and no more.
	populateNanos.Store(int64(time.Hour)) // the worker is idle: nothing overwrites it before Reached
	buf[0] = 0x5a                         // bytes the user wrote in the ready part stay
	buf[pages[1]-1] = 0xa5
	if next := f.Reached(8); next != pages[1] {
		t.Fatalf("Reached(8) = %d, want %d (the next page's start)", next, pages[1])
	}
	ahead := pages[1+coldAhead]
	waitReady(t, f, ahead)
	waitResident(t, buf[pages[1]:ahead], "the pages ahead")
	noneResident(t, buf[ahead:], "past the lead")
	if buf[0] != 0x5a || buf[pages[1]-1] != 0xa5 {
		t.Fatal("making pages ready changed the buffer's bytes")
	}

	// Need makes what is asked for ready at once (no warm pages: left to
	// fault in), and no more.
	if got := f.Need(ahead + 1); got != f.pageEnd(ahead) || limit.Load() != int64(got) {
		t.Fatalf("Need(%d) = %d (raised to %d), want %d", ahead+1, got, limit.Load(), f.pageEnd(ahead))
	}
	noneResident(t, buf[ahead:], "a page left to fault in")

	// With warm pages kept, entering a page asks for the next one only,
	// and it comes warm; so does the page Need skipped.
	if !invariants.Enabled {
		if fillAndFree(t, 9<<20) < 3 {
			t.Fatal("fewer than 3 pages kept")
		}
		kept := WarmBytes()
		cur := f.pageEnd(ahead) // the fill point enters the page after Need's
		if next := f.Reached(cur); next != f.pageEnd(cur) {
			t.Fatalf("Reached(%d) = %d, want %d", cur, next, f.pageEnd(cur))
		}
		want := f.pageEnd(f.pageEnd(cur))
		waitReady(t, f, want)
		waitResident(t, buf[f.pageEnd(ahead):want], "the warm pages")
		if WarmBytes() != kept-2*AheadStep {
			t.Fatalf("WarmBytes() = %d after two pages moved, want %d", WarmBytes(), kept-2*AheadStep)
		}
		noneResident(t, buf[want:], "past one page ahead, with warm pages kept")
	}

	// Near the end: nothing past the buffer is asked for.
	if next := f.Reached(len(buf) - 1); next < len(buf) {
		t.Fatalf("Reached(last byte) = %d, want >= %d", next, len(buf))
	}
	if got := f.Need(len(buf) + 100); got != len(buf) {
		t.Fatalf("Need past the end = %d, want %d", got, len(buf))
	}
}

// TestFaultAheadFastHost checks that, with no warm page kept and pages
// faulted in fast, the next page is asked for only AheadLead before the
// current one's end, and no more.
func TestFaultAheadFastHost(t *testing.T) {
	settle(t)
	buf, f, _ := newFaultAhead(t)
	p1 := f.pageEnd(0)
	p2 := f.pageEnd(p1)
	waitReady(t, f, p1)
	populateNanos.Store(0) // the worker is idle
	if next := f.Reached(8); next != p1-AheadLead {
		t.Fatalf("Reached(8) = %d, want %d", next, p1-AheadLead)
	}
	noneResident(t, buf[p1:], "before the lead")
	if next := f.Reached(p1 - AheadLead); next != p1 {
		t.Fatalf("Reached(%d) = %d, want %d", p1-AheadLead, next, p1)
	}
	waitReady(t, f, p2)
	waitResident(t, buf[p1:p2], "the next page")
	noneResident(t, buf[p2:], "past the next page")
}

// TestFaultAheadPageLocks checks that Need waits for the page it needs,
// not for the pages the worker makes ready after it in the same request.
func TestFaultAheadPageLocks(t *testing.T) {
	settle(t)
	_, f, _ := newFaultAhead(t)
	p1 := f.pageEnd(0)
	waitReady(t, f, p1)
	p2 := f.pageEnd(p1)
	started := make(chan struct{}, 4)
	release := []chan struct{}{make(chan struct{}), make(chan struct{})}
	var n int
	populatePage = func(b []byte) { // the worker's goroutine only
		started <- struct{}{}
		<-release[n]
		n++
		populate(b)
	}
	defer func() { populatePage = populate }()
	populateNanos.Store(int64(time.Hour)) // a slow host; the worker is idle
	f.Reached(8)                          // asks for the next coldAhead pages
	<-started                             // the worker is at the first of them
	done := make(chan int)
	go func() { done <- f.Need(p1 + 1) }()
	close(release[0])
	<-started // and now at the second, which waits
	var got int
	select {
	case got = <-done:
	case <-time.After(30 * time.Second): // only a Need waiting for the second page
		close(release[1])
		t.Fatal("Need waited for a page after the one it needs")
	}
	close(release[1])
	if got != p2 {
		t.Fatalf("Need(%d) = %d, want %d", p1+1, got, p2)
	}
}

// TestFaultAheadSpare checks that asking for a buffer's last page with no
// warm page kept has the worker keep a fresh one, resident, for the next
// buffer's first page, and that the next buffer takes it.
func TestFaultAheadSpare(t *testing.T) {
	if invariants.Enabled {
		t.Skip("invariants builds keep no pages")
	}
	settle(t)
	defer releaseWarm(-1)
	buf, f, _ := newFaultAhead(t)
	waitReady(t, f, f.pageEnd(0))
	last := len(buf) - 1 // in the last page: the request reaches the end
	for off := 0; f.pageEnd(f.pageEnd(off)) < len(buf); off = f.pageEnd(off) {
		last = off
	}
	populateNanos.Store(int64(time.Hour)) // a slow host; the worker is idle
	f.Reached(last)
	waitReady(t, f, len(buf))
	deadline := time.Now().Add(30 * time.Second)
	for WarmBytes() != AheadStep {
		if time.Now().After(deadline) {
			t.Fatalf("WarmBytes() = %d, never one spare page", WarmBytes())
		}
		time.Sleep(time.Millisecond)
	}
	warm.mu.Lock()
	spare := unsafe.Slice((*byte)(warm.pages[0]), AheadStep)
	warm.mu.Unlock()
	waitResident(t, spare, "the spare page")

	// The next buffer's first page is the spare, moved in.
	next, g, _ := newFaultAhead(t)
	waitReady(t, g, g.pageEnd(0))
	if WarmBytes() != 0 {
		t.Fatalf("WarmBytes() = %d after the next buffer's first page, want 0", WarmBytes())
	}
	waitResident(t, next[:g.pageEnd(0)], "the next buffer's first page")
}

// TestPopulate checks that populate faults a range in without changing
// a byte of it.
func TestPopulate(t *testing.T) {
	b := Alloc(4 << 20)
	defer Free(b)
	for i := 0; i < len(b)/2; i += 1024 {
		b[i], b[i+7] = byte(i>>10)|1, 0xee // the first word of each page too
	}
	noneResident(t, b[len(b)/2:], "the untouched half")
	populate(b)
	waitResident(t, b, "the buffer")
	for i := 0; i < len(b)/2; i += 1024 {
		if b[i] != byte(i>>10)|1 || b[i+7] != 0xee {
			t.Fatalf("byte %d changed", i)
		}
	}
	for i, c := range b[len(b)/2:] {
		if c != 0 {
			t.Fatalf("byte %d of the untouched half = %#x, want 0", len(b)/2+i, c)
		}
	}
}

// TestFaultAheadStop checks that Stop drops queued work: a buffer whose
// FaultAhead was stopped is never populated, and Stop reports how much
// was made ready.
func TestFaultAheadStop(t *testing.T) {
	settle(t)
	buf, f, _ := newFaultAhead(t)
	p0 := f.pageEnd(0)
	waitReady(t, f, p0)
	if got := f.Stop(); got != p0 {
		t.Fatalf("Stop() = %d, want %d", got, p0)
	}
	f.Reached(8) // asks for the next pages, after Stop
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

// TestFaultAheadYieldsToWorker checks that a request Reached queues past
// the first page is taken by the worker before Reached returns, even with
// one processor: the filler yields to it rather than leave it waiting in
// its processor's next slot until the filler is preempted.
func TestFaultAheadYieldsToWorker(t *testing.T) {
	settle(t)
	defer releaseWarm(-1)
	_, f, _ := newFaultAhead(t)
	p1 := f.pageEnd(0)
	waitReady(t, f, p1)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	populateNanos.Store(int64(time.Hour)) // the worker is idle: a cold lead
	taken := aheadTaken.Load()
	if f.Reached(8); aheadTaken.Load() != taken {
		t.Fatal("the worker took a request Reached made in the first page: the filler yielded under the DB's locks")
	}
	waitReady(t, f, f.pageEnd(f.pageEnd(p1)))
	populateNanos.Store(int64(time.Hour)) // the worker, idle, wrote its own
	taken = aheadTaken.Load()
	f.Reached(p1 + 8) // the fill point enters the second page
	if aheadTaken.Load() == taken {
		t.Fatal("the worker had not taken the request when Reached returned")
	}
}

// TestPopulateOffCPU checks that a goroutine faulting pages in (populate)
// is, to the scheduler, in a system call: its processor can run other
// goroutines, and a stop of the world does not wait for the faults.
func TestPopulateOffCPU(t *testing.T) {
	if !touchesOffCPU {
		t.Skip("populate keeps its processor in this build (race detector, or another architecture)")
	}
	stack := make([]byte, 1<<20)
	for attempt := 0; attempt < 50; attempt++ {
		b := Alloc(64 << 20) // fresh: every page faults
		done := make(chan struct{})
		go func() {
			defer close(done)
			populate(b)
		}()
		seen := false
	look:
		for {
			select {
			case <-done:
				break look
			default:
			}
			// A goroutine in a system call shows as "[syscall" with its
			// stack; a running one on another thread shows no stack.
			for _, g := range strings.Split(string(stack[:runtime.Stack(stack, true)]), "\n\n") {
				if strings.Contains(g, "[syscall") && strings.Contains(g, "manual.touchOffCPU") {
					seen = true
				}
			}
		}
		Free(b)
		if seen {
			return
		}
	}
	t.Fatal("populate's goroutine never seen in a system call")
}
