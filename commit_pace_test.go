package vigil

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// TestWritesYieldBehindFlush checks when writes yield their processor
// (paceBehindFlush): only while a flush is pending and the mutable
// memtable is past half full.
func TestWritesYieldBehindFlush(t *testing.T) {
	// Under 1 MiB: every memtable has the full size and is flushed once
	// full (see scheduledMemtableSize).
	db, unblock := openFlushBlocked(t, &Options{WriteBufferSize: 512 << 10})
	var yields atomic.Int64
	db.testingHooks.pacedYield = func() { yields.Add(1) }
	val := make([]byte, 1000)
	n := 0
	put := func() {
		t.Helper()
		if err := db.Put(fmt.Appendf(nil, "k%06d", n), val, nil); err != nil {
			t.Fatal(err)
		}
		n++
	}
	pastHalf := func() bool {
		db.commitMu.Lock()
		defer db.commitMu.Unlock()
		return 2*db.mem.mt.ApproximateSize() >= db.mem.mt.Capacity()
	}

	// No flush pending: no yield, however full the memtable.
	for !pastHalf() {
		put()
	}
	for range 2 * paceEvery {
		put()
	}
	if yields.Load() != 0 {
		t.Fatalf("%d yields with no flush pending", yields.Load())
	}

	// A flush pending (blocked): none while the new memtable is under
	// half full, then one every paceEvery writes.
	writeUntilRotation(t, db, nil)
	waitFor(t, "the flush to start", db.flushing.Load)
	for !pastHalf() {
		put()
		if yields.Load() != 0 {
			t.Fatalf("a yield with the memtable under half full (%d writes after the rotation)", n)
		}
	}
	for range 2 * paceEvery {
		put()
	}
	if yields.Load() < 1 {
		t.Fatalf("no yield in %d writes behind a pending flush, the memtable past half full", 2*paceEvery)
	}

	// The flush done: no more yields.
	unblock()
	waitFor(t, "the flush", func() bool { return !db.flushing.Load() })
	before := yields.Load()
	for range 2 * paceEvery {
		put()
	}
	if yields.Load() != before {
		t.Fatalf("%d yields after the flush ended", yields.Load()-before)
	}
}
