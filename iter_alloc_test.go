package vigil

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

// TestIterAllocManySources builds iterators over a compacted level and
// more L0 tables than an iterAlloc holds in place (iterAllocL0) and more
// sources than its arrays (iterAllocChildren), so that the spill paths
// run, and checks every key and value against a model, with two iterators
// open at once and iterators built again from reused allocations.
func TestIterAllocManySources(t *testing.T) {
	const tables = iterAllocChildren + 4
	db, err := Open("db", &Options{FS: vfs.NewMem(), DisableAutomaticCompactions: true,
		L0StopWritesTrigger: 1000, L0SlowdownWritesTrigger: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	model := map[string]string{}
	// A level below L0 first, with keys the L0 tables overwrite.
	for k := 0; k < 100; k += 3 {
		key := fmt.Sprintf("k%04d", k)
		if err := db.Put([]byte(key), []byte("old"), nil); err != nil {
			t.Fatal(err)
		}
		model[key] = "old"
	}
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	lower := 0
	for _, files := range db.loadReadState().v.Levels[1:] {
		lower += len(files)
	}
	if lower == 0 {
		t.Fatal("Compact left no file below L0")
	}
	for tbl := 0; tbl < tables; tbl++ {
		// Every table overwrites some keys of the ones before it, so the
		// merge must pick the newest source's value.
		for k := tbl; k < tbl+30; k++ {
			key, val := fmt.Sprintf("k%04d", k), fmt.Sprintf("v%d-%d", k, tbl)
			if err := db.Put([]byte(key), []byte(val), nil); err != nil {
				t.Fatal(err)
			}
			model[key] = val
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// The memtable is a source too.
	if err := db.Put([]byte("k0005"), []byte("mem"), nil); err != nil {
		t.Fatal(err)
	}
	model["k0005"] = "mem"
	if n := len(db.loadReadState().v.Levels[0]); n != tables {
		t.Fatalf("L0 has %d tables, want %d", n, tables)
	}
	check := func(it *Iterator) {
		t.Helper()
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			if want := model[string(it.Key())]; string(it.Value()) != want {
				t.Fatalf("%s = %q, want %q", it.Key(), it.Value(), want)
			}
			n++
		}
		if err := it.Error(); err != nil {
			t.Fatal(err)
		}
		if n != len(model) {
			t.Fatalf("iterated %d keys, want %d", n, len(model))
		}
	}
	for round := 0; round < 3; round++ {
		a, err := db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := db.NewIter(&IterOptions{LowerBound: []byte("k0010")})
		if err != nil {
			t.Fatal(err)
		}
		check(a)
		if !b.First() || string(b.Key()) != "k0010" {
			t.Fatalf("bounded iterator starts at %q, want k0010", b.Key())
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIteratorCloseTwiceAfterReuse checks that a second Close of an
// iterator reports ErrClosed and leaves alone the allocation its first
// Close gave back, which a newer iterator may be using.
func TestIteratorCloseTwiceAfterReuse(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, k := range []string{"a", "b", "c"} {
		if err := db.Put([]byte(k), []byte(k), nil); err != nil {
			t.Fatal(err)
		}
	}
	old, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if !it.First() {
		t.Fatal("First: no key")
	}
	if err := old.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v, want ErrClosed", err)
	}
	if old.First() || old.SeekGE([]byte("a")) {
		t.Fatal("a closed iterator moved")
	}
	var got []string
	for ok := it.SeekGE([]byte("a")); ok; ok = it.Next() {
		got = append(got, string(it.Key()))
	}
	if fmt.Sprint(got) != "[a b c]" || it.Error() != nil {
		t.Fatalf("iterator after the old one's second Close: %v (err %v)", got, it.Error())
	}
}

// TestIterAllocResetClears checks that an iterAlloc going back to the pool
// holds no reference to anything an iterator used.
func TestIterAllocResetClears(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), DisableAutomaticCompactions: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < 3; i++ {
		if err := db.Put([]byte{byte('a' + i)}, []byte("v"), nil); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// An entry in the memtable: an empty one is no source (see newIter).
	if err := db.Put([]byte("d"), []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := it.alloc
	if a == nil || a.nMems == 0 || a.nL0 != 3 {
		t.Fatalf("iterator's allocation: %+v, want a memtable and 3 L0 tables in place", a)
	}
	if !it.Last() {
		t.Fatal("Last: no key")
	}
	// Close as Iterator.Close does, without handing a to the pool, so that
	// nothing else can take it before it is inspected.
	it.alloc = nil
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	a.reset()
	left := *a
	left.merging.deferKey = nil // kept on purpose: bytes, no references
	left.seekBuf = nil          // the same
	if !reflect.ValueOf(left).IsZero() {
		t.Fatalf("reset left %+v", left)
	}
}

// TestSeekAllocatesOnlyTheIterator: NewIter, one seek and Close (a
// seekrandom op) allocate the Iterator struct and nothing else: the merge
// comes from a pooled iterAlloc, and the seek's key copy (ownSeekKey) goes
// into the buffer the previous iterator handed back at Close.
func TestSeekAllocatesOnlyTheIterator(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	db := openMem(t, vfs.NewMem(), &Options{})
	defer db.Close()
	for i := 0; i < 1000; i++ {
		if err := db.Put([]byte(fmt.Sprintf("key-%05d", i)), []byte("v"), nil); err != nil {
			t.Fatal(err)
		}
		if i == 500 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	key := []byte("key-00700")
	allocs := testing.AllocsPerRun(200, func() {
		it, err := db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !it.SeekGE(key) {
			t.Fatal("SeekGE found nothing")
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Fatalf("%.2f allocations per NewIter, SeekGE and Close; want 1 (the Iterator)", allocs)
	}
}
