package tests

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

// A flushed memtable's arena is freed as soon as no reader holds it; an
// open iterator pins it until it closes.
func TestMemtableMemoryFreedAfterFlush(t *testing.T) {
	// Under 1 MiB every memtable is WriteBufferSize, the first after Open
	// too (the growth schedule starts at 1 MiB).
	const wb = 256 << 10
	// A memtable holds its arena and its filter's share (built or not).
	const mt = wb + wb*vigil.DefaultMemtableFilterRatio
	db, err := vigil.Open("db", &vigil.Options{FS: vfs.NewMem(), WriteBufferSize: wb})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < 1000; i++ {
		if err := db.Put([]byte(fmt.Sprintf("k%04d", i)), make([]byte, 100), nil); err != nil {
			t.Fatal(err)
		}
	}
	if m := db.Metrics().Memory; m.Memtables != mt || m.MemtablesPinned != 0 {
		t.Fatalf("one memtable: %+v", m)
	}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if m := db.Metrics().Memory; m.Memtables != 2*mt || m.MemtablesPinned != mt {
		t.Fatalf("flushed memtable held by an iterator: %+v", m)
	}
	n := 0
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	if n != 1000 {
		t.Fatalf("the iterator over the flushed memtable saw %d keys", n)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if m := db.Metrics().Memory; m.Memtables != mt || m.MemtablesPinned != 0 {
		t.Fatalf("after the iterator closed: %+v", m)
	}
}

// With a memory budget the block cache gets what the memtables leave.
func TestMemoryBudgetSharedWithCache(t *testing.T) {
	const wb, budget = 1 << 20, 8 << 20
	db, err := vigil.Open("db", &vigil.Options{FS: vfs.NewMem(), WriteBufferSize: wb, MemoryBudget: budget, DisableAutomaticCompactions: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := db.Metrics().Memory
	if m.Budget != budget || m.BlockCacheCapacity != budget-m.Memtables {
		t.Fatalf("at open: %+v", m)
	}
	for i := 0; i < 30000; i++ { // several memtables' worth
		if err := db.Put([]byte(fmt.Sprintf("k%06d", i)), make([]byte, 100), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	m = db.Metrics().Memory
	if m.BlockCacheCapacity != budget-m.Memtables || m.Memtables+m.BlockCacheCapacity != budget {
		t.Fatalf("after flushes: %+v", m)
	}
	// Reads fill the cache, within its share.
	for i := 0; i < 30000; i += 7 {
		if _, err := db.Get([]byte(fmt.Sprintf("k%06d", i))); err != nil {
			t.Fatal(err)
		}
	}
	m = db.Metrics().Memory
	if m.BlockCache == 0 || m.BlockCache > m.BlockCacheCapacity || m.Memtables+m.BlockCache > budget {
		t.Fatalf("after reads: %+v", m)
	}
	t.Logf("%s", db.Metrics())
}
