package vigil

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

// TestMemtableTombstoneCache interleaves DeleteRanges, Puts and snapshots in
// one memtable (so its rangedel.Cache is built, goes stale and is rebuilt)
// and checks Get and iterators, at the latest state and at every snapshot,
// against a model.
func TestMemtableTombstoneCache(t *testing.T) {
	testTombstoneReads(t, 0)
}

// TestTableTombstoneFragments is the same with a flush every 30 steps, so
// reads also go through tables' fragmented tombstones (L0 files, no
// compaction), at the latest state and at snapshots older than them.
// Flushing every 60 steps leaves few enough sources for the iterator to
// check each one's fragments separately (the parts of a rangedel.Set);
// every 30 steps, more than rangedel's maxSetParts, so it merges them.
func TestTableTombstoneFragments(t *testing.T) {
	for _, every := range []int{30, 60} {
		t.Run(fmt.Sprintf("flushEvery=%d", every), func(t *testing.T) { testTombstoneReads(t, every) })
	}
}

func testTombstoneReads(t *testing.T, flushEvery int) {
	db := openMem(t, vfs.NewMem(), &Options{WriteBufferSize: 64 << 20, DisableAutomaticCompactions: true})
	defer db.Close()
	const keys = 200
	key := func(i int) []byte { return []byte(fmt.Sprintf("k%04d", i)) }
	rng := rand.New(rand.NewPCG(7, 11))
	model := map[int]string{}
	type snap struct {
		s     *Snapshot
		state map[int]string
	}
	var snaps []snap
	check := func(step int, get func([]byte) ([]byte, error), newIter func(*IterOptions) (*Iterator, error), want map[int]string, what string) {
		t.Helper()
		for i := 0; i < keys; i++ {
			v, err := get(key(i))
			w, ok := want[i]
			switch {
			case ok && (err != nil || string(v) != w):
				t.Fatalf("step %d %s: Get(%s) = %q, %v; want %q", step, what, key(i), v, err, w)
			case !ok && !errors.Is(err, ErrNotFound):
				t.Fatalf("step %d %s: Get(%s) = %q, %v; want ErrNotFound", step, what, key(i), v, err)
			}
		}
		it, err := newIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for ok := it.First(); ok; ok = it.Next() {
			got[string(it.Key())] = string(it.Value())
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("step %d %s: iterator saw %d keys, want %d", step, what, len(got), len(want))
		}
		for i, w := range want {
			if v, ok := got[string(key(i))]; !ok || v != w {
				t.Fatalf("step %d %s: iterator has %s = %q (present %t), want %q", step, what, key(i), v, ok, w)
			}
		}
	}
	for step := 0; step < 120; step++ {
		switch r := rng.IntN(10); {
		case r < 4:
			a := rng.IntN(keys)
			b := a + 1 + rng.IntN(20)
			if err := db.DeleteRange(key(a), key(b), nil); err != nil {
				t.Fatal(err)
			}
			for i := a; i < b; i++ {
				delete(model, i)
			}
		case r < 9:
			for j := 0; j < 5; j++ {
				i := rng.IntN(keys)
				v := fmt.Sprintf("v%d-%d", step, j)
				if err := db.Put(key(i), []byte(v), nil); err != nil {
					t.Fatal(err)
				}
				model[i] = v
			}
		default:
			st := make(map[int]string, len(model))
			for k, v := range model {
				st[k] = v
			}
			snaps = append(snaps, snap{db.NewSnapshot(), st})
		}
		if flushEvery > 0 && step%flushEvery == flushEvery-1 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if step%10 == 9 {
			check(step, db.Get, db.NewIter, model, "latest")
			for i, s := range snaps {
				check(step, s.s.Get, s.s.NewIter, s.state, fmt.Sprintf("snapshot %d", i))
			}
		}
	}
	if flushEvery > 0 {
		if m := db.Metrics(); m.Levels[0].NumFiles < 120/flushEvery {
			t.Fatalf("%d L0 files, want several", m.Levels[0].NumFiles)
		}
		for _, s := range snaps {
			s.s.Close()
		}
		return
	}
	if n := db.mem.rangeDels.Load(); n == 0 {
		t.Fatalf("only %d range tombstones in the memtable; the cache was never used", n)
	}
	if _, _, ok, _ := db.mem.tombs.Get(db.cmp, db.mem.rangeDels.Load(), db.mem.mt); !ok {
		t.Fatal("no tombstone cache was built")
	}
	for _, s := range snaps {
		s.s.Close()
	}
}
