package vigil

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
)

// TestMemtableFilterOption checks Options.MemtableFilterRatio end to end:
// the filter's size (counted in Metrics.Memory.Memtables) by default, set,
// off, and under paranoid checks; and that with it every Get answers as
// without it, for keys in the memtable (Sets and Deletes over flushed
// values) and keys it does not hold.
func TestMemtableFilterOption(t *testing.T) {
	// The first memtable's arena is the first of the growth schedule
	// (scheduledMemtableSize); the filter is sized by its arena.
	const wb, arena = 1 << 20, 256 << 10
	for _, c := range []struct {
		name       string
		o          Options
		filterSize int64
	}{
		{"default", Options{}, arena / 128},
		{"1/16", Options{MemtableFilterRatio: 1.0 / 16}, arena / 16},
		{"off", Options{MemtableFilterRatio: -1}, 0},
		{"paranoid", Options{ParanoidMemoryChecks: true}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.o
			o.WriteBufferSize = wb
			o.DisableAutomaticCompactions = true
			db := openMem(t, vfs.NewMem(), &o)
			defer db.Close()
			if got := db.Metrics().Memory.Memtables; got != arena+c.filterSize {
				t.Fatalf("Memory.Memtables = %d, want %d (arena) + %d (filter)", got, arena, c.filterSize)
			}
			key := func(i int) []byte { return fmt.Appendf(nil, "key-%05d", i) }
			for i := range 300 {
				if err := db.Put(key(i), []byte("flushed"), nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			// In the memtable: new values for some keys, deletes of others.
			for i := 0; i < 300; i += 3 {
				if err := db.Put(key(i), []byte("new"), nil); err != nil {
					t.Fatal(err)
				}
				if err := db.Delete(key(i+1), nil); err != nil {
					t.Fatal(err)
				}
			}
			check := func() {
				for i := range 400 {
					want := map[int]string{0: "new", 1: "", 2: "flushed"}[i%3]
					if i >= 300 {
						want = ""
					}
					v, err := db.Get(key(i))
					switch {
					case want == "" && !errors.Is(err, ErrNotFound):
						t.Fatalf("Get(%s) = %q, %v; want not found", key(i), v, err)
					case want != "" && (err != nil || string(v) != want):
						t.Fatalf("Get(%s) = %q, %v; want %q", key(i), v, err, want)
					}
				}
			}
			// The memtable builds its filter after 1024 Gets, on a
			// goroutine of its own.
			deadline := time.Now().Add(10 * time.Second)
			for !db.mem.mt.Filtered() && c.filterSize > 0 && time.Now().Before(deadline) {
				check()
			}
			if got := db.mem.mt.Filtered(); got != (c.filterSize > 0) {
				t.Fatalf("memtable filtered: %t", got)
			}
			check()
		})
	}
}
