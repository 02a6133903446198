package manual

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/vigildb/vigil/internal/invariants"
)

func TestSizeClasses(t *testing.T) {
	prev := 0
	for c := 0; c < numClasses; c++ {
		s := classSize(c)
		if s <= prev {
			t.Fatalf("class %d size %d <= previous %d", c, s, prev)
		}
		if classOf(s) != c || classOf(prev+1) != c {
			t.Fatalf("class %d (%d bytes): classOf(%d) = %d, classOf(%d) = %d", c, s, s, classOf(s), prev+1, classOf(prev+1))
		}
		// Waste bound: above 1 KiB, a slot is at most 1/16 larger than
		// the smallest buffer it holds.
		if prev >= smallLimit && float64(s)/float64(prev+1) > 1+1.0/classSteps {
			t.Fatalf("class %d: %d bytes for a %d-byte buffer", c, s, prev+1)
		}
		prev = s
	}
	if prev != MaxSlabSize {
		t.Fatalf("largest class %d, want %d", prev, MaxSlabSize)
	}
	if s := classSize(classOf(4100)); s != 4352 {
		t.Fatalf("a 4100-byte block gets a %d-byte slot", s)
	}
	a := NewAllocator()
	for i := range a.s.classes {
		cls := &a.s.classes[i]
		if cls.nslots < minSlots || cls.nslots > maxSlots || cls.chunkLen < cls.nslots*cls.slot || cls.chunkLen%pageSize != 0 {
			t.Fatalf("class %d: %d slots of %d in %d bytes", i, cls.nslots, cls.slot, cls.chunkLen)
		}
	}
}

// TestAllocFreeReuse: buffers have the asked length, do not overlap, keep
// their bytes, and freed slots are reused.
func TestAllocFreeReuse(t *testing.T) {
	a := NewAllocator()
	rng := rand.New(rand.NewPCG(1, 1))
	type live struct {
		b    Buf
		fill byte
	}
	var bufs []live
	check := func(l live) {
		if !bytes.Equal(l.b.Bytes(), bytes.Repeat([]byte{l.fill}, len(l.b.Bytes()))) {
			t.Fatalf("buffer of %d bytes lost its contents", len(l.b.Bytes()))
		}
	}
	for i := 0; i < 20000; i++ {
		if len(bufs) > 0 && rng.IntN(2) == 0 {
			j := rng.IntN(len(bufs))
			check(bufs[j])
			bufs[j].b.Free()
			bufs[j] = bufs[len(bufs)-1]
			bufs = bufs[:len(bufs)-1]
			continue
		}
		n := rng.IntN(9000)
		if rng.IntN(100) == 0 {
			n = MaxSlabSize + rng.IntN(100000)
		}
		b := a.Alloc(n)
		if len(b.Bytes()) != n || cap(b.Bytes()) != n || b.Size() < n {
			t.Fatalf("Alloc(%d): len %d cap %d size %d", n, len(b.Bytes()), cap(b.Bytes()), b.Size())
		}
		l := live{b, byte(i)}
		for k := range b.Bytes() {
			b.Bytes()[k] = l.fill
		}
		bufs = append(bufs, l)
	}
	for _, l := range bufs {
		check(l)
	}
	st := a.Stats()
	if st.Buffers != int64(len(bufs)) || st.InUse > st.Mapped {
		t.Fatalf("stats %+v with %d live buffers", st, len(bufs))
	}
	for _, l := range bufs {
		l.b.Free()
	}
	if st := a.Stats(); st.Buffers != 0 || st.InUse != 0 {
		t.Fatalf("stats after freeing everything: %+v", st)
	}
	a.ReleaseSpares()
	if st := a.Stats(); st.Mapped != 0 {
		t.Fatalf("mapped after freeing everything and the spares: %+v", st)
	}
}

// TestSlotReuse: outside invariants builds, a freed slot is the next one
// handed out in its class (no growth under alloc/free churn).
func TestSlotReuse(t *testing.T) {
	a := NewAllocator()
	keep := a.Alloc(4100) // keeps the chunk in use
	for i := 0; i < 1000; i++ {
		b := a.Alloc(4100)
		b.Free()
	}
	if st := a.Stats(); st.Mapped != int64(a.s.classes[classOf(4100)].chunkLen) {
		t.Fatalf("churn on one class mapped %d bytes", st.Mapped)
	}
	if !invariants.Enabled {
		b1 := a.Alloc(4100)
		p := unsafe.SliceData(b1.Bytes())
		b1.Free()
		b2 := a.Alloc(4100)
		if unsafe.SliceData(b2.Bytes()) != p {
			t.Fatal("a freed slot was not reused first")
		}
		b2.Free()
	}
	keep.Free()
}

// TestHotSlot: outside invariants builds, Alloc hands out the slot freed
// last, wherever it is, while it is still free; then allocation goes on
// from the oldest partly used chunk. Invariants builds never reuse a slot
// that way (a freed slot stays poisoned until allocation reaches it), nor
// does a dropping allocator (its freed slots keep no pages).
func TestHotSlot(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testHotSlot(t, NewAllocator(), !invariants.Enabled) })
	t.Run("dropping", func(t *testing.T) { testHotSlot(t, NewDroppingAllocator(), false) })
}

func testHotSlot(t *testing.T, a *Allocator, hot bool) {
	cls := &a.s.classes[classOf(4100)]
	var bufs []Buf
	for range cls.nslots + 2 { // the first chunk full, two slots of a second
		bufs = append(bufs, a.Alloc(4100))
	}
	ptr := func(b Buf) *byte { return unsafe.SliceData(b.Bytes()) }
	first, fifth := ptr(bufs[0]), ptr(bufs[5])
	bufs[0].Free() // the first chunk joins the partial list, behind the second
	bufs[5].Free() // the slot freed last
	b := a.Alloc(4100)
	if got := ptr(b) == fifth; got != hot {
		t.Fatalf("Alloc took the slot freed last: %t", got)
	}
	c := a.Alloc(4100) // no hot slot: the partial list's head, the second chunk
	if ptr(c) == first || ptr(c) == fifth {
		t.Fatal("Alloc without a hot slot took a slot of the younger chunk's")
	}
	if st := a.Stats(); st.Buffers != int64(cls.nslots+2) {
		t.Fatalf("%d buffers counted, want %d", st.Buffers, cls.nslots+2)
	}
	b.Free()
	c.Free()
	for i, x := range bufs {
		if i != 0 && i != 5 {
			x.Free()
		}
	}
	if st := a.Stats(); st.Buffers != 0 || st.InUse != 0 {
		t.Fatalf("after freeing everything: %+v", st)
	}
}

// TestChunkRelease: a chunk whose slots are all free is returned to the OS,
// but for one spare per class (invariants builds: retired).
func TestChunkRelease(t *testing.T) {
	a := NewAllocator()
	cls := &a.s.classes[classOf(4100)]
	var bufs []Buf
	for i := 0; i < 3*cls.nslots; i++ {
		bufs = append(bufs, a.Alloc(4100))
	}
	if st := a.Stats(); st.Mapped != int64(3*cls.chunkLen) {
		t.Fatalf("3 chunks' worth of buffers mapped %d bytes", st.Mapped)
	}
	for _, b := range bufs {
		b.Free()
	}
	want := int64(cls.chunkLen) // the spare
	if invariants.Enabled {
		want = 0
	}
	if st := a.Stats(); st.Mapped != want || st.InUse != 0 {
		t.Fatalf("after freeing all: %+v, want %d mapped", st, want)
	}
	// The spare is used before a new chunk is mapped.
	b := a.Alloc(4100)
	if st := a.Stats(); st.Mapped != int64(cls.chunkLen) {
		t.Fatalf("after one more Alloc: %+v", st)
	}
	b.Free()
	a.ReleaseSpares()
	if st := a.Stats(); st.Mapped != 0 {
		t.Fatalf("after ReleaseSpares: %+v", st)
	}
}

func TestDoubleFreePanics(t *testing.T) {
	a := NewAllocator()
	keep := a.Alloc(100)
	b := a.Alloc(100)
	b.Free()
	defer keep.Free()
	defer func() {
		if recover() == nil {
			t.Fatal("double free did not panic")
		}
	}()
	b.Free()
}

// TestConcurrentAllocFree hammers one allocator from several goroutines
// (run with -race): every buffer keeps its bytes while it is owned, and
// buffers move between goroutines before being freed.
func TestConcurrentAllocFree(t *testing.T) {
	a := NewAllocator()
	handoff := make(chan Buf, 64)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			var mine []Buf
			for i := 0; i < 5000; i++ {
				switch rng.IntN(3) {
				case 0:
					b := a.Alloc(1 + rng.IntN(6000))
					fill := byte(len(b.Bytes()))
					for k := range b.Bytes() {
						b.Bytes()[k] = fill
					}
					mine = append(mine, b)
				case 1:
					if len(mine) > 0 {
						select {
						case handoff <- mine[len(mine)-1]:
							mine = mine[:len(mine)-1]
						default:
						}
					}
				case 2:
					select {
					case b := <-handoff:
						mine = append(mine, b)
					default:
					}
				}
				if len(mine) > 100 || rng.IntN(4) == 0 && len(mine) > 0 {
					b := mine[0]
					fill := byte(len(b.Bytes()))
					for _, x := range b.Bytes() {
						if x != fill {
							t.Errorf("buffer of %d bytes corrupted", len(b.Bytes()))
							return
						}
					}
					b.Free()
					mine = mine[1:]
				}
			}
			for _, b := range mine {
				b.Free()
			}
		}(g)
	}
	wg.Wait()
	close(handoff)
	for b := range handoff {
		b.Free()
	}
	if st := a.Stats(); st.Buffers != 0 || st.InUse != 0 {
		t.Fatalf("stats after freeing everything: %+v", st)
	}
}

// TestUseAfterFreeFaults: in invariants builds a read of a freed buffer
// faults (here turned into a panic) and a freed slot holds Poison.
func TestUseAfterFreeFaults(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("needs -tags invariants")
	}
	a := NewAllocator()
	keep := a.Alloc(4100)
	defer keep.Free()
	for _, n := range []int{100, 4100, MaxSlabSize + 1} {
		b := a.Alloc(n)
		buf := b.Bytes()
		buf[0] = 1
		b.Free()
		if !faults(func() { sink = buf[0] }) {
			t.Fatalf("%d bytes: reading a freed buffer did not fault", n)
		}
		if !faults(func() { buf[len(buf)-1] = 7 }) {
			t.Fatalf("%d bytes: writing a freed buffer did not fault", n)
		}
	}
	if f := ProtectFailures(); f != 0 {
		t.Fatalf("%d mprotect failures", f)
	}
	// A reused slot comes back accessible and poisoned.
	b := a.Alloc(4100)
	defer b.Free()
	b.Bytes()[0] = 0
}

var sink byte

func faults(fn func()) (faulted bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() { faulted = recover() != nil }()
	fn()
	return false
}

func BenchmarkAllocFree(b *testing.B) {
	a := NewAllocator()
	keep := make([]Buf, 256)
	for i := range keep {
		keep[i] = a.Alloc(4100)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		keep[i%len(keep)].Free()
		keep[i%len(keep)] = a.Alloc(4100)
		i++
	}
	for _, k := range keep {
		k.Free()
	}
}

func BenchmarkAllocFreeParallel(b *testing.B) {
	a := NewAllocator()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		keep := make([]Buf, 64)
		for i := range keep {
			keep[i] = a.Alloc(4100)
		}
		i := 0
		for pb.Next() {
			keep[i%len(keep)].Free()
			keep[i%len(keep)] = a.Alloc(4100)
			i++
		}
		for _, k := range keep {
			k.Free()
		}
	})
}

// TestUnreachableAllocatorUnmaps: once an Allocator is unreachable its
// spare chunks are unmapped, and a chunk emptied afterwards (by a Buf that
// outlived the Allocator) is unmapped at once.
func TestUnreachableAllocatorUnmaps(t *testing.T) {
	a := NewAllocator()
	s := a.s
	a.Alloc(4100).Free() // leaves a spare
	late := a.Alloc(100)
	if s.statsNow().Mapped == 0 {
		t.Fatal("nothing mapped")
	}
	a = nil
	deadline := time.Now().Add(5 * time.Second)
	closed := func() bool {
		c1, c2 := &s.classes[classOf(4100)], &s.classes[classOf(100)]
		c1.mu.Lock()
		defer c1.mu.Unlock()
		c2.mu.Lock()
		defer c2.mu.Unlock()
		return c1.spare == nil && c2.closed
	}
	for !closed() {
		if time.Now().After(deadline) {
			t.Fatal("cleanup did not run")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	late.Free()
	if st := s.statsNow(); st.Mapped != 0 || st.Buffers != 0 {
		t.Fatalf("after the cleanup and the last Free: %+v", st)
	}
}
