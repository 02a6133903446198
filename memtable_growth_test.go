package vigil

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

// TestMemtableGrowth: the mutable memtable starts at initialMemtableSize
// and doubles with each rotation up to WriteBufferSize; a reopen starts
// over; a batch larger than the next step gets a memtable that holds it;
// a WriteBufferSize below the first step is used as it is.
func TestMemtableGrowth(t *testing.T) {
	const wb = 4 << 20
	fs := vfs.NewMem()
	o := &Options{WriteBufferSize: wb, DisableAutomaticCompactions: true, MemtableFilterRatio: -1} // Capacity: the arena alone
	db := openMem(t, fs, o)
	// sizes writes until n memtables were in use and returns their arenas.
	sizes := func(db *DB, n int) []int {
		t.Helper()
		mt := db.mem.mt
		got := []int{mt.Capacity()}
		value := make([]byte, 1000)
		for i := 0; len(got) < n; i++ {
			if err := db.Put(fmt.Appendf(nil, "key-%08d", i), value, nil); err != nil {
				t.Fatal(err)
			}
			if db.mem.mt != mt {
				mt = db.mem.mt
				got = append(got, mt.Capacity())
			}
		}
		return got
	}
	want := fmt.Sprint([]int{256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20, 4 << 20})
	if got := fmt.Sprint(sizes(db, 6)); got != want {
		t.Errorf("memtable arenas %s, want %s", got, want)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openMem(t, fs, o)
	if got := db.mem.mt.Capacity(); got != initialMemtableSize {
		t.Errorf("after reopening: memtable arena %d, want %d", got, initialMemtableSize)
	}
	// A batch of 400 KiB does not fit the first memtable: it gets one
	// that holds it, and the schedule goes on.
	b := db.NewBatch()
	for i := range 400 {
		b.Put(fmt.Appendf(nil, "big-%04d", i), make([]byte, 1000))
	}
	if err := db.Apply(b, nil); err != nil {
		t.Fatal(err)
	}
	if got := db.mem.mt.Capacity(); got < 400<<10 || got > wb {
		t.Errorf("memtable for a 400-KiB batch: arena %d", got)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	small := openMem(t, vfs.NewMem(), &Options{WriteBufferSize: 128 << 10, MemtableFilterRatio: -1})
	defer small.Close()
	if got := small.mem.mt.Capacity(); got != 128<<10 {
		t.Errorf("WriteBufferSize 128 KiB: first memtable arena %d", got)
	}
}

// TestMemtableGrowthStall: with flushes held back, the small memtables of
// the growth schedule count by their size, so writes go on past
// MaxImmutableMemtables of them, and stall once the immutable ones would
// hold more than MaxImmutableMemtables WriteBufferSizes; a flush lets
// them go on.
func TestMemtableGrowthStall(t *testing.T) {
	const wb = 1 << 20
	stalled := make(chan StallInfo, 1)
	o := &Options{
		WriteBufferSize: wb, MaxImmutableMemtables: 2, DisableAutomaticCompactions: true,
		MemtableFilterRatio: -1,
		EventListener: &EventListener{WriteStallBegin: func(i StallInfo) {
			if !strings.Contains(i.Reason, "immutable") {
				return // waiting for the next WAL, say
			}
			select {
			case stalled <- i:
			default:
			}
		}},
	}
	db := openMem(t, vfs.NewMem(), o)
	defer db.Close()
	block := make(chan struct{})
	db.testingHooks = &testingHooks{beforeFlush: func(flushable) { <-block }}
	done := make(chan error, 1)
	go func() {
		value := make([]byte, 1000)
		for i := range 4000 { // 4 MB: more than the memtables may hold
			if err := db.Put(fmt.Appendf(nil, "key-%08d", i), value, nil); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		close(block)
		t.Fatalf("4 MB written past held flushes without a stall (err %v)", err)
	case i := <-stalled:
		db.mu.Lock()
		var caps []int
		for _, e := range db.imm {
			caps = append(caps, e.t.Capacity())
		}
		db.mu.Unlock()
		// 256 KiB, 512 KiB and 1 MiB wait (1.75 MiB); the next 1 MiB
		// would make them 2.75 MiB.
		if want := fmt.Sprint([]int{256 << 10, 512 << 10, 1 << 20}); fmt.Sprint(caps) != want {
			t.Errorf("stalled (%s) with immutable memtables %v, want %s", i.Reason, caps, want)
		}
	}
	close(block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
