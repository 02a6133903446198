package vigil

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

// TestIteratorLeavesOutEmptyMemtables: an iterator over a store whose
// memtable holds nothing at its creation merges only the tables, so a
// compacted store (one level) is read without a merge; once the memtable
// holds an entry, it is a source again, and the entry written after the
// first iterator's creation stays invisible to it.
func TestIteratorLeavesOutEmptyMemtables(t *testing.T) {
	db := openMem(t, vfs.NewMem(), &Options{})
	defer db.Close()
	for i := 0; i < 100; i++ {
		if err := db.Put([]byte(fmt.Sprintf("k%03d", i)), []byte("v"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	sources := func(it *Iterator) int {
		if m, ok := it.iter.(*mergingIter); ok {
			return len(m.children)
		}
		return 1 // a lone source, read without a mergingIter
	}
	before := mustNewIter(t, db, nil)
	defer before.Close()
	if n := sources(before); n != 1 {
		t.Fatalf("%d sources over a compacted store with an empty memtable; want 1", n)
	}
	if _, ok := before.iter.(*mergingIter); ok {
		t.Fatal("a lone source is read through a mergingIter (see DB.mergeSources)")
	}
	if err := db.Put([]byte("k050x"), []byte("new"), nil); err != nil {
		t.Fatal(err)
	}
	after := mustNewIter(t, db, nil)
	defer after.Close()
	if n := sources(after); n != 2 {
		t.Fatalf("%d sources with an entry in the memtable; want 2", n)
	}
	count := func(it *Iterator) (n int) {
		for ok := it.Last(); ok; ok = it.Prev() {
			n++
		}
		return n
	}
	if b, a := count(before), count(after); b != 100 || a != 101 {
		t.Fatalf("keys seen: %d before the write, %d after; want 100, 101", b, a)
	}
}

// TestSeekPrefixGESingleSource: SeekPrefixGE of an absent prefix over a
// store whose only source is one level (its memtable empty, so left out)
// is answered by the level's prefix filter, as over several sources.
func TestSeekPrefixGESingleSource(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), Comparer: FixedPrefixComparer(4)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for p := 0; p < 40; p += 2 {
		for i := 0; i < 20; i++ {
			if err := db.Put(fmt.Appendf(nil, "p%03d/%04d", p, i), []byte("v"), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	it := mustNewIter(t, db, nil)
	defer it.Close()
	before := db.Metrics()
	if it.SeekPrefixGE([]byte("p017/0000")) {
		t.Fatalf("found %q", it.Key())
	}
	after := db.Metrics()
	if after.Filter.PrefixUseful == before.Filter.PrefixUseful {
		t.Fatalf("SeekPrefixGE of an absent prefix read the level: its filter was not consulted")
	}
}
