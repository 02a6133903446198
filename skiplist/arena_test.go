package skiplist

import (
	"encoding/binary"
	"sync"
	"testing"
)

// TestArenaOnGrow checks the growth hook's contract: called from the
// allocation that reaches each threshold it asked for, with the used size
// after that allocation, and not otherwise.
func TestArenaOnGrow(t *testing.T) {
	a, err := NewArena(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	var calls []int
	a.OnGrow(100, func(used int) int {
		calls = append(calls, used)
		return used + 1000
	})
	for range 1000 {
		if _, ok := a.alloc(8, nodeAlign); !ok {
			break
		}
	}
	// Allocations of 8 from arenaStart (8): the first used size >= 100 is
	// 104, then the first >= 1104 is 1104, and so on up to the 8008 the
	// 1000 allocations end at.
	want := []int{104, 1104, 2104, 3104, 4104, 5104, 6104, 7104}
	if len(calls) != len(want) {
		t.Fatalf("hook calls at %v, want %v", calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Fatalf("hook calls at %v, want %v", calls, want)
		}
	}
	// A failed allocation calls nothing.
	n := len(calls)
	if _, ok := a.alloc(1<<20, nodeAlign); ok {
		t.Fatal("allocation beyond the capacity succeeded")
	}
	if len(calls) != n {
		t.Fatalf("a failed allocation called the hook")
	}
}

// TestArenaOnGrowConcurrent allocates from several goroutines: the hook
// never runs concurrently with itself (the race detector checks the
// unsynchronized counter it updates) and is called for each threshold at
// most once.
func TestArenaOnGrowConcurrent(t *testing.T) {
	a, err := NewArena(1 << 22)
	if err != nil {
		t.Fatal(err)
	}
	var last, calls int
	a.OnGrow(0, func(used int) int {
		if used < last {
			t.Errorf("hook called with %d after %d", used, last)
		}
		last = used
		calls++
		return used + 4096
	})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, ok := a.alloc(16, nodeAlign); !ok {
					return
				}
			}
		}()
	}
	wg.Wait()
	// One call per 4096 bytes at most (fewer if allocations crossed a
	// threshold while a call was running), and at least the first.
	if max := a.Size()/4096 + 1; calls > max || calls < 1 {
		t.Fatalf("%d hook calls for %d bytes", calls, a.Size())
	}
}

// TestArenaOnLimit checks the limit hook's contract: no allocation ends
// past the limit; one that would calls the hook first, with its end, from
// allocating goroutines one at a time, while RaiseLimit moves the limit
// from elsewhere; and a hook that cannot reach the need lifts the limit.
func TestArenaOnLimit(t *testing.T) {
	a, err := NewArena(1 << 22)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // the hook's state, also read by the checks below
	var calls int
	limit := 4096
	inHook := false
	a.OnLimit(limit, func(need int) int {
		mu.Lock()
		defer mu.Unlock()
		if inHook {
			t.Error("limit hook called concurrently")
		}
		if need <= limit && need <= int(a.limit.Load()) {
			t.Errorf("hook called for %d, within the limit %d", need, limit)
		}
		calls++
		limit = (need + 4095) &^ 4095
		return limit
	})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				off, ok := a.alloc(16+uint32(g)*8, nodeAlign)
				if !ok {
					return
				}
				if end := uint64(off) + 16 + uint64(g)*8; end > a.limit.Load() {
					t.Errorf("allocation ends at %d, past the limit %d", end, a.limit.Load())
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // raises from elsewhere, as manual.FaultAhead's worker does
		defer wg.Done()
		for l := 8192; l < 1<<22; l += 8192 {
			a.RaiseLimit(l)
		}
	}()
	wg.Wait()
	if calls == 0 || uint64(a.Size()) > a.limit.Load() {
		t.Fatalf("%d hook calls, used %d, limit %d", calls, a.Size(), a.limit.Load())
	}

	// A hook that falls short: the limit is lifted, the allocation made.
	b, err := NewArena(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	b.OnLimit(0, func(need int) int { return need - 1 })
	if _, ok := b.alloc(64, nodeAlign); !ok {
		t.Fatal("allocation failed after a short limit hook")
	}
	if b.limit.Load() < 1<<16 {
		t.Fatalf("limit %d after a short hook, want none", b.limit.Load())
	}
}

// TestArenaAlign checks aligned allocations: each starts at a multiple of
// its alignment, skips no more than it must, and a failed one consumes
// nothing.
func TestArenaAlign(t *testing.T) {
	a, err := NewArena(MinArenaSize + 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		size, align uint32
		want        uint32 // offset, 0: must fail
	}{
		{4, nodeAlign, 8},    // from arenaStart
		{12, towerAlign, 16}, // skips 12..15
		{4, nodeAlign, 28},
		{8, towerAlign, 32}, // already aligned: skips nothing
		{4, towerAlign, 40},
		{1 << 20, towerAlign, 0},
	} {
		used := a.Size()
		off, ok := a.alloc(c.size, c.align)
		if c.want == 0 {
			if ok || a.Size() != used {
				t.Fatalf("alloc(%d, %d) beyond the capacity: ok %v, used %d -> %d", c.size, c.align, ok, used, a.Size())
			}
			continue
		}
		if !ok || off != c.want || a.Size() != int(off+c.size) {
			t.Fatalf("alloc(%d, %d) after %d used = %d, %v (used now %d), want %d", c.size, c.align, used, off, ok, a.Size(), c.want)
		}
	}
}

// TestArenaFullToTheEnd fills arenas of several sizes to the last byte they
// hand out with the smallest nodes (a 12-byte header and 8 key bytes):
// every node must still lie at or below the list's limit, where a search
// may load an escaped header and 8 key bytes (28 bytes) without reading
// past the buffer, and Verify, which checks that bound, must pass.
func TestArenaFullToTheEnd(t *testing.T) {
	for extra := 0; extra < 40; extra += nodeAlign {
		arena, err := NewArena(MinArenaSize + 1000 + extra)
		if err != nil {
			t.Fatal(err)
		}
		l, err := New(arena, Options{MaxHeight: 1})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for ; ; n++ {
			err := l.Add(binary.BigEndian.AppendUint64(nil, uint64(n)), nil)
			if err == ErrArenaFull {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		last := l.loadPrev(l.tail)
		if last > l.limit || int(last)+escHeader+8 > len(l.buf) {
			t.Fatalf("arena of %d bytes: last node at %d, past the limit %d", len(l.buf), last, l.limit)
		}
		if got, err := l.Verify(nil); err != nil || got != n {
			t.Fatalf("arena of %d bytes, full: Verify = %d, %v; want %d entries", len(l.buf), got, err, n)
		}
	}
}
