package memtable

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/vigildb/vigil/internal/base"
)

// TestValidateEach: the flush's one-pass walk hands over exactly what the
// iterators return, in the same order, points first, then range
// tombstones; an error of the callback comes back as it is, not as
// corruption; and a damaged memtable fails the walk as Validate does, also
// when the damage lies past entries already handed over. Under every
// test comparer: the walk's order is the iterators', the comparer's.
func TestValidateEach(t *testing.T) {
	for _, cmp := range testComparers {
		t.Run(cmp.Name, func(t *testing.T) { runValidateEach(t, cmp) })
	}
}

func runValidateEach(t *testing.T, cmp *base.Comparer) {
	m := mustNew(t, Options{ProtectionBytesPerKey: 8, Comparer: cmp})
	for i := range 500 {
		k := []byte(fmt.Sprintf("key%06d", (i*7919)%500))
		kind := base.KindSet
		if i%11 == 0 {
			kind = base.KindDelete
		}
		if err := m.Add(uint64(i+1), kind, k, []byte(fmt.Sprintf("v%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Add(1000, base.KindRangeDelete, []byte("key000100"), []byte("key000200")); err != nil {
		t.Fatal(err)
	}
	type ent struct {
		k base.InternalKey
		v string
	}
	var want, got []ent
	it := m.NewIter(IterOptions{Validate: true})
	for ok := it.First(); ok; ok = it.Next() {
		want = append(want, ent{it.Key().Clone(), string(it.Value())})
	}
	it.Close()
	rit := m.NewRangeDelIter()
	for ok := rit.First(); ok; ok = rit.Next() {
		want = append(want, ent{rit.Key().Clone(), string(rit.Value())})
	}
	rit.Close()
	collect := func(ik base.InternalKey, v []byte) error {
		got = append(got, ent{ik.Clone(), string(v)})
		return nil
	}
	if err := m.ValidateEach(collect, collect); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(got) != 501 {
		t.Fatalf("walk handed over %d entries, the iterators return %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].k.UserKey, want[i].k.UserKey) || got[i].k.Trailer != want[i].k.Trailer || got[i].v != want[i].v {
			t.Fatalf("entry %d: walk %s=%q, iterator %s=%q", i, got[i].k, got[i].v, want[i].k, want[i].v)
		}
	}

	// The callback's own error, unwrapped.
	errStop := errors.New("writer failed")
	calls := 0
	err := m.ValidateEach(func(base.InternalKey, []byte) error {
		if calls++; calls == 10 {
			return errStop
		}
		return nil
	}, nil)
	if err != errStop || calls != 10 {
		t.Fatalf("callback error: got %v after %d calls", err, calls)
	}

	// Damage to the last point entry's value (the last in the comparer's
	// order): the walk hands over the entries before it, then fails with
	// ErrCorruption.
	arena := m.arenaForTesting()
	last := want[len(want)-2].k.UserKey // the last point entry, before the tombstone
	_, _, vo, _, ok := m.entryForTesting(last)
	if !ok {
		t.Fatalf("%s not found", last)
	}
	arena[vo] ^= 1
	n := 0
	err = m.ValidateEach(func(base.InternalKey, []byte) error { n++; return nil }, nil)
	if !errors.Is(err, base.ErrCorruption) || n == 0 || n >= 500 {
		t.Fatalf("damaged memtable: %v after %d entries", err, n)
	}
	if verr := m.Validate(); !errors.Is(verr, base.ErrCorruption) {
		t.Fatalf("Validate of the damaged memtable: %v", verr)
	}
}
