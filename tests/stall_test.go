package tests

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

// Between the slowdown and stop triggers writes are paced, not stopped:
// Metrics counts the slowdowns, and no write stalls.
func TestL0SlowdownBeforeStop(t *testing.T) {
	db, err := vigil.Open("db", &vigil.Options{
		FS: vfs.NewMem(), WriteBufferSize: 1 << 20, DisableAutomaticCompactions: true,
		L0CompactionTrigger: 2, L0SlowdownWritesTrigger: 2, L0StopWritesTrigger: 6,
		DelayedWriteRate: 1 << 20, // 1 MiB/s: a 1 KiB write costs about a millisecond
	})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	val := make([]byte, 1024)
	put := func(k string) {
		if err := db.Put([]byte(k), val, nil); err != nil {
			t.Fatal(err)
		}
	}
	put("a")
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		put(fmt.Sprintf("below%02d", i))
	}
	if m := db.Metrics(); m.Stall.Slowdowns != 0 {
		t.Fatalf("%d slowdowns with 1 L0 file, below the slowdown trigger (2)", m.Stall.Slowdowns)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		put(fmt.Sprintf("slow%02d", i))
	}
	m := db.Metrics()
	if m.Levels[0].NumFiles != 2 {
		t.Fatalf("L0 has %d files, want 2", m.Levels[0].NumFiles)
	}
	if m.Stall.Slowdowns == 0 || m.Stall.SlowdownDuration == 0 {
		t.Fatalf("40 KiB written at L0 = slowdown trigger, DelayedWriteRate 1 MiB/s: no slowdown recorded (%+v)", m.Stall)
	}
	if m.Stall.Count != 0 {
		t.Fatalf("%d stalls below the stop trigger", m.Stall.Count)
	}
	t.Logf("%d slowdowns, %v", m.Stall.Slowdowns, m.Stall.SlowdownDuration)
}
