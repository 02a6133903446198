package vigil

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

// TestReverseIterationInPlace: going backward, the Iterator returns the
// newest visible version's key and value where the tables hold them
// (base.InternalIterator's Lookback), and copies a value that the next step
// would leave two entries behind: here every key's visible version (under
// a snapshot) is followed by a newer one the snapshot hides (a Set or a
// deletion), and with one entry per block and a tiny cache, two steps back
// is a released block. Merges read the value below them as before.
func TestReverseIterationInPlace(t *testing.T) {
	for _, cacheSize := range []int64{16 << 10, -1} {
		t.Run(fmt.Sprintf("cache=%d", cacheSize), func(t *testing.T) {
			db, err := Open("db", &Options{FS: vfs.NewMem(), BlockSize: 64, BlockCacheSize: cacheSize,
				DisableAutomaticCompactions: true, Merger: AppendMerger})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			const n = 300
			pad := bytes.Repeat([]byte("."), 100) // one entry per block
			key := func(i int) []byte { return []byte(fmt.Sprintf("k%04d", i)) }
			old := func(i int) []byte { return append([]byte(fmt.Sprintf("old%04d", i)), pad...) }
			for i := 0; i < n; i++ {
				if err := db.Put(key(i), old(i), nil); err != nil {
					t.Fatal(err)
				}
			}
			snap := db.NewSnapshot()
			defer snap.Close()
			latest := map[int][]byte{}
			for i := 0; i < n; i++ {
				var err error
				switch i % 3 {
				case 0:
					latest[i] = append([]byte(fmt.Sprintf("new%04d", i)), pad...)
					err = db.Put(key(i), latest[i], nil)
				case 1:
					err = db.Delete(key(i), nil)
				case 2:
					latest[i] = append(old(i), "m"...) // AppendMerger concatenates
					err = db.Merge(key(i), []byte("m"), nil)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Compact(nil, nil); err != nil {
				t.Fatal(err)
			}
			check := func(it *Iterator, want func(int) ([]byte, bool)) {
				t.Helper()
				defer it.Close()
				i := n - 1
				for ok := it.Last(); ok; ok = it.Prev() {
					for ; i >= 0; i-- {
						if _, live := want(i); live {
							break
						}
					}
					v, _ := want(i)
					if !bytes.Equal(it.Key(), key(i)) || !bytes.Equal(it.Value(), v) {
						t.Fatalf("at %s: %q = %q, want %q", key(i), it.Key(), it.Value(), v)
					}
					i--
				}
				if err := it.Error(); err != nil {
					t.Fatal(err)
				}
				for ; i >= 0; i-- {
					if _, live := want(i); live {
						t.Fatalf("%s missing", key(i))
					}
				}
			}
			check(mustNewIter(t, snap, nil), func(i int) ([]byte, bool) { return old(i), true })
			check(mustNewIter(t, db, nil), func(i int) ([]byte, bool) { v, ok := latest[i]; return v, ok })
		})
	}
}

// TestSeekToOwnKey: a seek to the iterator's own current key
// (it.SeekLT(it.Key()), it.SeekGE(it.Key())) lands where a seek to a copy
// would. The key points into the sources' buffers, which the seek reuses:
// Iterator copies a seek's key first (ownSeekKey).
func TestSeekToOwnKey(t *testing.T) {
	for _, cache := range []int64{1 << 20, -1} {
		for _, mem := range []bool{false, true} {
			t.Run(fmt.Sprintf("cache=%d/mem=%v", cache, mem), func(t *testing.T) {
				db, err := Open("db", &Options{FS: vfs.NewMem(), BlockSize: 256, BlockCacheSize: cache, TargetFileSize: 4 << 10})
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				const n = 2000
				key := func(i int) []byte { return []byte(fmt.Sprintf("key-%06d-%s", i, bytes.Repeat([]byte("x"), i%40))) }
				for i := 0; i < n; i++ {
					if err := db.Put(key(i), []byte(fmt.Sprintf("v%d", i)), nil); err != nil {
						t.Fatal(err)
					}
				}
				if err := db.Compact(nil, nil); err != nil {
					t.Fatal(err)
				}
				if mem {
					if err := db.Put([]byte("zzz"), []byte("z"), nil); err != nil {
						t.Fatal(err)
					}
				}
				it := mustNewIter(t, db, nil)
				defer it.Close()
				// Backward by SeekLT of the current key.
				i := n - 1
				if mem {
					it.Last()
				}
				for ok := it.SeekLT([]byte("zz")); ok; ok = it.SeekLT(it.Key()) {
					if !bytes.Equal(it.Key(), key(i)) {
						t.Fatalf("SeekLT(own key) backward: at %q, want %q", it.Key(), key(i))
					}
					i--
				}
				if i != -1 {
					t.Fatalf("backward SeekLT stopped at %d", i)
				}
				// After each Prev, SeekGE of the current key stays there.
				i = n - 1
				for ok := it.SeekLT([]byte("zz")); ok; ok = it.Prev() {
					if !it.SeekGE(it.Key()) || !bytes.Equal(it.Key(), key(i)) {
						t.Fatalf("SeekGE(own key) at %d: %q", i, it.Key())
					}
					if !it.SeekLT(append(key(i), 0)) || !bytes.Equal(it.Key(), key(i)) {
						t.Fatalf("re-seek at %d", i)
					}
					i--
				}
				// Forward: SeekGE of own key then Next.
				i = 0
				for ok := it.First(); ok; ok = it.Next() {
					if !it.SeekGE(it.Key()) || !bytes.Equal(it.Key(), key(i)) {
						t.Fatalf("forward SeekGE(own key) at %d: %q", i, it.Key())
					}
					i++
					if i == n {
						break
					}
				}
			})
		}
	}
}
