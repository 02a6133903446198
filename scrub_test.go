package vigil

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/manifest"
)

// flipTableByte flips one byte in the middle of table fileNum's first data
// block, in place (the MemFS file the table cache has open sees it).
func flipTableByte(t *testing.T, fs vfs.FS, fileNum uint64) {
	t.Helper()
	name := makeFilename(fs, "db", fileTypeTable, fileNum)
	f, err := fs.OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, 100); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, 100); err != nil {
		t.Fatal(err)
	}
}

// TestScrubber: the background scrubber verifies every table each pass;
// a byte flipped in a table nobody reads is found by the next pass,
// reported to the listener, counted, and the table marked damaged so that
// compactions leave it alone, while reads elsewhere go on; DB.Scrub finds
// it too.
func TestScrubber(t *testing.T) {
	fs := vfs.NewMem()
	var mu sync.Mutex
	var found []error
	db := openMem(t, fs, &Options{
		ScrubInterval: 10 * time.Millisecond, ScrubBytesPerSec: -1,
		DisableAutomaticCompactions: true, L0CompactionTrigger: 2,
		EventListener: &EventListener{CorruptionFound: func(err error) { mu.Lock(); found = append(found, err); mu.Unlock() }},
	})
	defer db.Close()
	for table := range 3 {
		for i := range 500 {
			if err := db.Put(fmt.Appendf(nil, "t%d-%04d", table, i), []byte(strings.Repeat("v", 50)), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, cond func(m *Metrics) bool) *Metrics {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			m := db.Metrics()
			if cond(m) {
				return m
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: %+v", what, m.Scrub)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	m := waitFor("a clean pass over the three tables", func(m *Metrics) bool { return m.Scrub.Passes >= 2 && m.Scrub.Files >= 3 })
	if m.Scrub.Corruptions != 0 || m.Scrub.LastPass.IsZero() || m.Scrub.Bytes == 0 {
		t.Fatalf("clean passes: %+v", m.Scrub)
	}
	db.mu.Lock()
	v := db.vs.current
	l0 := append([]*manifest.FileMetadata(nil), v.Levels[0]...)
	db.mu.Unlock()
	if len(l0) != 3 {
		t.Fatalf("%d L0 tables, want 3", len(l0))
	}
	p := newLeveledPicker(db.opts)
	if p.pick(v) == nil {
		t.Fatal("no compaction picked for 3 L0 files over a trigger of 2")
	}
	victim := l0[1]
	flipTableByte(t, fs, victim.FileNum)

	waitFor("the damage found", func(m *Metrics) bool { return m.Scrub.Corruptions >= 1 })
	// The metric counts the finding before the event queue delivers it.
	waitFor("the damage reported", func(*Metrics) bool { mu.Lock(); defer mu.Unlock(); return len(found) > 0 })
	mu.Lock()
	first := found[0]
	mu.Unlock()
	if !errors.Is(first, ErrCorruption) || !strings.Contains(first.Error(), fmt.Sprintf("table %06d", victim.FileNum)) {
		t.Fatalf("CorruptionFound(%v): want the damaged table named", first)
	}
	if !victim.Damaged() || l0[0].Damaged() || l0[2].Damaged() {
		t.Fatalf("damaged marks: %v %v %v, want only the middle table", l0[0].Damaged(), victim.Damaged(), l0[2].Damaged())
	}
	if c := p.pick(v); c != nil {
		t.Fatalf("picked %s with a damaged input", c)
	}
	// Keys in the healthy tables still read.
	for _, k := range []string{"t0-0001", "t2-0499"} {
		if _, err := db.Get([]byte(k)); err != nil {
			t.Errorf("Get(%s): %v", k, err)
		}
	}
	if err := db.Scrub(); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Scrub by hand: %v, want ErrCorruption", err)
	}
}

// TestScrubPacer: a pass reading faster than ScrubBytesPerSec sleeps.
func TestScrubPacer(t *testing.T) {
	db := openMem(t, vfs.NewMem(), &Options{ScrubBytesPerSec: 1 << 20})
	defer db.Close()
	pace := db.newScrubPacer()
	start := time.Now()
	pace(100 << 10) // 100 KiB at 1 MiB/s: ~98 ms
	if d := time.Since(start); d < 80*time.Millisecond {
		t.Fatalf("100 KiB at 1 MiB/s paced to %v", d)
	}
	if n := db.Metrics().Scrub.Bytes; n != 100<<10 {
		t.Fatalf("Scrub.Bytes = %d", n)
	}
	o := &Options{ScrubInterval: -time.Second}
	o.EnsureDefaults()
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "ScrubInterval") {
		t.Fatalf("negative ScrubInterval: %v", err)
	}
}
