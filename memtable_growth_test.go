package vigil

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
)

// TestMemtableGrowth: the first mutable memtables are a quarter, a
// quarter and a half of WriteBufferSize (scheduledMemtableSize), then
// WriteBufferSize; a reopen starts
// over; a batch larger than the next step gets a memtable that holds it;
// a WriteBufferSize below 1 MiB is used from the first.
func TestMemtableGrowth(t *testing.T) {
	const wb = 16 << 20
	fs := vfs.NewMem()
	o := &Options{WriteBufferSize: wb, DisableAutomaticCompactions: true, MemtableFilterRatio: -1} // Capacity: the arena alone
	db := openMem(t, fs, o)
	// sizes writes until n memtables were in use and returns their arenas.
	sizes := func(db *DB, n int) []int {
		t.Helper()
		got := []int{db.mem.mt.Capacity()}
		for len(got) < n {
			writeUntilRotation(t, db, nil)
			got = append(got, db.mem.mt.Capacity())
		}
		return got
	}
	want := fmt.Sprint([]int{4 << 20, 4 << 20, 8 << 20, 16 << 20, 16 << 20})
	if got := fmt.Sprint(sizes(db, 5)); got != want {
		t.Errorf("memtable arenas %s, want %s", got, want)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openMem(t, fs, o)
	if got := db.mem.mt.Capacity(); got != 4<<20 {
		t.Errorf("after reopening: memtable arena %d, want 4 MiB", got)
	}
	// A batch of 6 MiB does not fit the first memtable: it gets one that
	// holds it, and the schedule goes on.
	b := db.NewBatch()
	for i := range 6 << 10 {
		b.Put(fmt.Appendf(nil, "big-%04d", i), make([]byte, 1000))
	}
	if err := db.Apply(b, nil); err != nil {
		t.Fatal(err)
	}
	if got := db.mem.mt.Capacity(); got < 6<<20 || got > wb {
		t.Errorf("memtable for a 6-MiB batch: arena %d", got)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	for wb, want := range map[int]int{128 << 10: 128 << 10, 512 << 10: 512 << 10, 1 << 20: 256 << 10, 2 << 20: 512 << 10} {
		db := openMem(t, vfs.NewMem(), &Options{WriteBufferSize: wb, MemtableFilterRatio: -1})
		if got := db.mem.mt.Capacity(); got != want {
			t.Errorf("WriteBufferSize %d: first memtable arena %d, want %d", wb, got, want)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
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
	db, unblock := openFlushBlocked(t, o)
	done := putInBackground(db, 4000) // 4 MB: more than the memtables may hold
	select {
	case err := <-done:
		t.Fatalf("4 MB written past held flushes without a stall (err %v)", err)
	case i := <-stalled:
		db.mu.Lock()
		var caps []int
		for _, e := range db.imm {
			caps = append(caps, e.t.Capacity())
		}
		db.mu.Unlock()
		// 256 KiB, 256 KiB, 512 KiB and 1 MiB wait (2 MiB) and a full
		// 1 MiB one would join them: 3 MiB.
		if want := fmt.Sprint([]int{256 << 10, 256 << 10, 512 << 10, 1 << 20}); fmt.Sprint(caps) != want {
			t.Errorf("stalled (%s) with immutable memtables %v, want %s", i.Reason, caps, want)
		}
	}
	unblock()
	waitDone(t, done, 60*time.Second, "writes did not go on once flushes did")
}

// TestMemtableFlushThreshold: the first memtables (1, 1 and 2 MiB of a
// 4-MiB WriteBufferSize) wait in memory when they fill, and flush
// together once they hold a WriteBufferSize; they flush at once when
// someone waits for them (Flush) or a large batch needs their place.
func TestMemtableFlushThreshold(t *testing.T) {
	const wb = 4 << 20
	o := &Options{WriteBufferSize: wb, DisableAutomaticCompactions: true, MemtableFilterRatio: -1}
	db := openMem(t, vfs.NewMem(), o)
	defer db.Close()
	// rotate fills n memtables.
	rotate := func(n int) {
		t.Helper()
		for range n {
			writeUntilRotation(t, db, nil)
		}
	}
	state := func() (imm, l0 int) {
		db.mu.Lock()
		defer db.mu.Unlock()
		return len(db.imm), len(db.vs.current.Levels[0])
	}
	rotate(2)                         // 1 and 1 MiB full: they wait
	time.Sleep(50 * time.Millisecond) // time enough for a flush that should not run
	if imm, l0 := state(); imm != 2 || l0 != 0 {
		t.Fatalf("after two memtables: %d immutable, %d L0 files; want 2, 0", imm, l0)
	}
	rotate(1) // and the 2-MiB one: 4 MiB wait
	waitFor(t, "the three memtables flushed (0 immutable, 3 L0 files)", func() bool {
		imm, l0 := state()
		return imm == 0 && l0 == 3
	})

	db2 := openMem(t, vfs.NewMem(), o)
	defer db2.Close()
	db = db2
	rotate(1)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if imm, l0 := state(); imm != 0 || l0 != 2 {
		t.Fatalf("after Flush: %d immutable, %d L0 files; want 0, 2", imm, l0)
	}

	// A large batch (over half a WriteBufferSize, applied as a table)
	// needs room in the immutable list: the first memtable, waiting below
	// the threshold, flushes for it instead of stalling it forever.
	db3 := openMem(t, vfs.NewMem(), o)
	defer db3.Close()
	db = db3
	rotate(1)
	value := make([]byte, 1000)
	if err := db.Put([]byte("zz"), value, nil); err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	for j := range 2500 {
		b.Put(fmt.Appendf(nil, "big-%08d", j), value)
	}
	done := make(chan error, 1)
	go func() { done <- db.Apply(b, nil) }()
	waitDone(t, done, 30*time.Second, "a large batch stalled behind a memtable waiting below the flush threshold")
}

// TestMemtableGrowthMaxImmutableOne: with MaxImmutableMemtables = 1 the
// stall counts the mutable memtable with the waiting small ones, and
// stalls before they reach the flush threshold; the stall must flush them
// rather than wait forever. And a reopen whose WALs hold nothing starts
// the schedule over too.
func TestMemtableGrowthMaxImmutableOne(t *testing.T) {
	const wb = 4 << 20
	fs := vfs.NewMem()
	o := &Options{WriteBufferSize: wb, MaxImmutableMemtables: 1}
	db := openMem(t, fs, o)
	done := putInBackground(db, 12<<10) // 12 MB: past the three first memtables
	waitDone(t, done, 60*time.Second, "writes stalled for good with MaxImmutableMemtables = 1")
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	o.MemtableFilterRatio = -1 // Capacity: the arena alone
	db = openMem(t, fs, o)
	defer db.Close()
	if got := db.mem.mt.Capacity(); got != wb/4 {
		t.Errorf("after reopening over flushed WALs: memtable arena %d, want %d", got, wb/4)
	}
}

// putInBackground puts n 1000-byte values from a goroutine of its own and
// sends its outcome on the channel it returns.
func putInBackground(db *DB, n int) <-chan error {
	done := make(chan error, 1)
	go func() {
		value := make([]byte, 1000)
		for i := range n {
			if err := db.Put(fmt.Appendf(nil, "key-%08d", i), value, nil); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}

// waitDone fails the test with what if done sends nothing within d, or
// with the error it sends.
func waitDone(t *testing.T, done <-chan error, d time.Duration, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(d):
		t.Fatal(what)
	}
}
