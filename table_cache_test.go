package vigil

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/manifest"
)

// newTestTableCache builds a table cache of the given capacity over n
// one-key tables in a fresh in-memory DB directory.
func newTestTableCache(t *testing.T, capacity, n int) (*tableCache, []*manifest.FileMetadata) {
	t.Helper()
	fs := vfs.NewMem()
	if err := fs.MkdirAll("db", 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "k%03d#1,SET=v%d\n", i, i)
	}
	files := testTables(t, fs, b.String())
	return newTableCache(tableCacheOptions{fs: fs, dirname: "db"}, capacity), files
}

// cached lists the file numbers the cache holds, in ring order.
func (c *tableCache) cached() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var nums []uint64
	for _, e := range c.ring {
		nums = append(nums, e.fileNum)
	}
	return nums
}

func TestTableCacheClockKeepsUsedTables(t *testing.T) {
	c, files := newTestTableCache(t, 3, 5)
	get := func(i int) {
		t.Helper()
		e, err := c.get(files[i])
		if err != nil {
			t.Fatal(err)
		}
		e.release()
	}
	for i := 0; i < 3; i++ {
		get(i)
	}
	if got := c.cached(); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("cached %v, want [1 2 3]", got)
	}
	// Table 1 is used again: the sweep gives it a second chance, and the
	// next table in CLOCK order that was not used since goes instead.
	get(0)
	get(3)
	// The hand starts at table 1, which was used: it is spared, and table 2,
	// the next unused one, goes.
	if got := c.cached(); len(got) != 3 || !slices.Contains(got, 1) || !slices.Contains(got, 4) || slices.Contains(got, 2) {
		t.Fatalf("after using 1 and opening 4: cached %v, want 1, 3 and 4", got)
	}
	if h, m := c.hits(), c.misses.Load(); h != 1 || m != 4 {
		t.Fatalf("hits %d misses %d, want 1 and 4", h, m)
	}
	// Hits of evicted entries still count.
	for i := 0; i < 5; i++ {
		get(i)
	}
	if h, m := c.hits()+c.misses.Load(), int64(10); h != m {
		t.Fatalf("hits+misses %d, want %d", h, m)
	}
}

func TestTableCacheEvictionKeepsReaderOpenForUser(t *testing.T) {
	c, files := newTestTableCache(t, 1, 3)
	e, err := c.get(files[0])
	if err != nil {
		t.Fatal(err)
	}
	// Opening two more tables evicts table 1 while e still reads it.
	for _, f := range files[1:] {
		h, err := c.get(f)
		if err != nil {
			t.Fatal(err)
		}
		h.release()
	}
	if got := c.cached(); len(got) != 1 || got[0] == 1 {
		t.Fatalf("cached %v: table 1 should be evicted", got)
	}
	if _, _, _, found, err := e.reader.Get([]byte("k000"), 10); err != nil || !found {
		t.Fatalf("evicted table read under a reference: found %v, err %v", found, err)
	}
	e.release()
	if n := e.refs.Load(); n != 0 {
		t.Fatalf("refs %d after the last release, want 0", n)
	}
	// A new get opens it afresh rather than reusing the closed reader.
	e2, err := c.get(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if e2 == e {
		t.Fatal("get returned the evicted entry")
	}
	e2.release()
}

func TestTableCacheConcurrentGetsAndEvictions(t *testing.T) {
	c, files := newTestTableCache(t, 4, 12)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				k := (i*7 + g*3) % len(files)
				if g == 3 && i%50 == 0 {
					c.evict(files[k].FileNum)
					continue
				}
				e, err := c.get(files[k])
				if err != nil {
					errs <- err
					return
				}
				key := []byte(fmt.Sprintf("k%03d", k))
				if _, _, _, found, err := e.reader.Get(key, 10); err != nil || !found {
					errs <- fmt.Errorf("table %d: found %v err %v", files[k].FileNum, found, err)
					e.release()
					return
				}
				e.release()
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := len(c.cached()); n > 4 {
		t.Fatalf("%d tables cached, capacity 4", n)
	}
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.get(files[0]); err != ErrClosed {
		t.Fatalf("get after close: %v, want ErrClosed", err)
	}
}
