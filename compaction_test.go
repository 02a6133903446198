package vigil

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
)

// tableEntries sums the point entries and range tombstones of live tables.
func tableEntries(db *DB) (points, tombs uint64) {
	db.mu.Lock()
	defer db.mu.Unlock()
	for _, files := range db.vs.current.Levels {
		for _, f := range files {
			points += f.NumEntries
			tombs += f.NumRangeDels
		}
	}
	return
}

// TestCompactionDropsWhatNoSnapshotSees overwrites and deletes keys, then
// compacts: with no snapshot only the newest version of each live key may
// remain, and deletions and range tombstones vanish at the bottom. A
// snapshot keeps exactly the versions it needs.
func TestCompactionDropsWhatNoSnapshotSees(t *testing.T) {
	db := openMem(t, vfs.NewMem(), &Options{DisableAutomaticCompactions: true})
	defer db.Close()
	for round := 0; round < 5; round++ {
		for i := 0; i < 100; i++ {
			db.Put([]byte(fmt.Sprintf("k%03d", i)), []byte(fmt.Sprintf("v%d", round)), nil)
		}
		db.Flush()
	}
	snap := db.NewSnapshot()
	for i := 0; i < 100; i++ {
		db.Put([]byte(fmt.Sprintf("k%03d", i)), []byte("after-snapshot"), nil)
	}
	for i := 0; i < 10; i++ {
		db.Delete([]byte(fmt.Sprintf("k%03d", i)), nil)
	}
	db.DeleteRange([]byte("k050"), []byte("k060"), nil)
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	// With the snapshot: each key keeps its round-4 version (the snapshot
	// sees it) and its newest version: 80 keys × 2; the 10 deleted keys keep
	// their deletion, which hides the older put of the same stripe (10 × 2);
	// the 10 keys under the range tombstone lose their newer put to it
	// (10 × 1); and the tombstone stays for the snapshot-less readers.
	points, tombs := tableEntries(db)
	if points != 190 || tombs != 1 {
		t.Fatalf("with a snapshot: %d points, %d tombstones; want 190, 1", points, tombs)
	}
	mustGet(t, snap, "k005", "v4")
	mustGet(t, snap, "k055", "v4")
	mustNotFound(t, db, "k005")
	mustNotFound(t, db, "k055")
	mustGet(t, db, "k099", "after-snapshot")
	snap.Close()
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	points, tombs = tableEntries(db)
	if points != 80 || tombs != 0 {
		t.Fatalf("without snapshots: %d points, %d tombstones; want 80 live keys, 0", points, tombs)
	}
	m := db.Metrics()
	if m.Levels[0].NumFiles != 0 || m.Compact.Count == 0 {
		t.Fatalf("after compaction: L0 %d files, %d compactions", m.Levels[0].NumFiles, m.Compact.Count)
	}
}

// TestTableCacheBoundsOpenFiles keeps many tables and a small table cache:
// reads work and the number of open tables stays at the bound.
func TestTableCacheBoundsOpenFiles(t *testing.T) {
	db := openMem(t, vfs.NewMem(), &Options{MaxOpenFiles: 16, DisableAutomaticCompactions: true, L0StopWritesTrigger: 1000})
	defer db.Close()
	for f := 0; f < 40; f++ {
		db.Put([]byte(fmt.Sprintf("k%03d", f)), []byte("v"), nil)
		db.Flush()
	}
	for f := 0; f < 40; f++ {
		mustGet(t, db, fmt.Sprintf("k%03d", f), "v")
	}
	it, _ := db.NewIter(nil)
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	it.Close()
	m := db.Metrics()
	if n != 40 || m.Levels[0].NumFiles != 40 || m.TableCache.Open > 16 || m.TableCache.Misses < 40 {
		t.Fatalf("%d keys, %d L0 files, %d open tables (bound 16), %d misses", n, m.Levels[0].NumFiles, m.TableCache.Open, m.TableCache.Misses)
	}
}

// TestWriteStallsAreReported slows flushes down so writers must wait for an
// immutable memtable: they stall (not fail), and the stall and its reason
// show in Metrics and the LOG.
func TestWriteStallsAreReported(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, &Options{WriteBufferSize: minWriteBufferSize, MaxImmutableMemtables: 1})
	db.testingHooks = &testingHooks{beforeFlush: func(flushable) { time.Sleep(20 * time.Millisecond) }}
	val := make([]byte, 1000)
	for i := 0; i < 1000; i++ {
		if err := db.Put([]byte(fmt.Sprintf("k%05d", i)), val, nil); err != nil {
			t.Fatal(err)
		}
	}
	m := db.Metrics()
	if m.Stall.Count == 0 || m.Stall.Duration == 0 || !strings.Contains(m.Stall.LastReason, "immutable memtables") {
		t.Fatalf("stalls: %d, %v, %q", m.Stall.Count, m.Stall.Duration, m.Stall.LastReason)
	}
	if !strings.Contains(m.String(), "write stalls") {
		t.Fatalf("Metrics.String lacks stalls:\n%s", m)
	}
	db.Close()
	f, _ := fs.Open("db/LOG")
	buf := make([]byte, 1<<20)
	n, _ := f.Read(buf)
	f.Close()
	if !strings.Contains(string(buf[:n]), "write stall: too many immutable memtables") {
		t.Fatalf("LOG does not report the stall")
	}
}
