package vigil

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/cache"
	"github.com/vigildb/vigil/internal/private"
	"github.com/vigildb/vigil/sst"
)

// TestLevelIterPrevLookback: the entry a Prev stepped from stays intact
// until the next positioning call when the step leaves a file (the file
// kept open, its block still referenced) and the block cache evicts and
// reuses memory meanwhile; base.InternalIterator's Lookback, which the
// DB's reverse iteration relies on. A block released too early faults in
// the invariants build (the README's test command), where freed memory is
// made inaccessible.
func TestLevelIterPrevLookback(t *testing.T) {
	const files, perFile = 4, 40
	var input strings.Builder
	for f := 0; f < files; f++ {
		for i := f * perFile; i < (f+1)*perFile; i++ {
			fmt.Fprintf(&input, "k%04d#1,SET=value%04d ", i, i)
		}
		input.WriteString("\n")
	}
	fs := vfs.NewMem()
	if err := fs.MkdirAll("db", 0o755); err != nil {
		t.Fatal(err)
	}
	c := cache.New(64 << 10)
	tc := newTableCache(tableCacheOptions{fs: fs, dirname: "db", blockCache: private.WrapBlockCache(c).(*sst.Cache)}, 100)
	defer tc.close()
	it := newLevelIter(tc, testTables(t, fs, input.String()), nil, nil, sst.ReadOptions{})
	defer it.Close()
	n := files*perFile - 1
	for ok := it.Last(); ok; n-- {
		want, wantVal := fmt.Sprintf("k%04d", n), fmt.Sprintf("value%04d", n)
		if string(it.Key().UserKey) != want || string(it.Value()) != wantVal {
			t.Fatalf("at %d: %s = %q", n, it.Key(), it.Value())
		}
		key, val := it.Key().UserKey, it.Value()
		ok = it.Prev()
		for i := uint64(0); i < 200; i++ { // evict, and reuse what was freed
			h := c.Alloc(64 + int(i%200))
			for j := range h.Data() {
				h.Data()[j] = 0xcc
			}
			c.Set(1<<40+i, 0, h, 0)
			h.Release()
		}
		if !bytes.Equal(key, []byte(want)) || !bytes.Equal(val, []byte(wantVal)) {
			t.Fatalf("after Prev from %s, the entry it left reads %q = %q", want, key, val)
		}
	}
	if err := it.Error(); err != nil || n != -1 {
		t.Fatalf("stopped at %d: %v", n, err)
	}
}
