package cache

import (
	"math/rand/v2"
	"testing"
)

// TestTableAgainstMap runs random puts, gets and deletes against a Go map,
// with hashes that collide on purpose (few distinct values, runs that wrap
// round the end of the slots), and checks the table's invariant after
// every step: each entry sits in the unbroken probe run from its home
// slot, n counts them, and the table is at most half full.
func TestTableAgainstMap(t *testing.T) {
	for _, distinct := range []uint64{1, 3, 64, 1 << 40} {
		rng := rand.New(rand.NewPCG(distinct, 9))
		hash := func(k key) uint64 { return hashKey(k) % distinct * 0x9e3779b97f4a7c15 }
		var tb table
		model := make(map[key]*entry)
		for step := 0; step < 20000; step++ {
			k := key{rng.Uint64N(3), rng.Uint64N(300)}
			h := hash(k)
			switch op := rng.IntN(10); {
			case op < 4:
				e := &entry{key: k}
				if got, want := tb.put(h, e), model[k]; got != want {
					t.Fatalf("distinct=%d step %d: put %v replaced %p, want %p", distinct, step, k, got, want)
				}
				model[k] = e
			case op < 7:
				got, want := tb.del(h, k), model[k]
				if got != want {
					t.Fatalf("distinct=%d step %d: del %v = %p, want %p", distinct, step, k, got, want)
				}
				delete(model, k)
			default:
				if got, want := tb.get(h, k), model[k]; got != want {
					t.Fatalf("distinct=%d step %d: get %v = %p, want %p", distinct, step, k, got, want)
				}
			}
			checkTable(t, &tb, hash, len(model))
		}
		for k, e := range model {
			if got := tb.get(hash(k), k); got != e {
				t.Fatalf("distinct=%d: at the end, get %v = %p, want %p", distinct, k, got, e)
			}
		}
	}
}

func checkTable(t *testing.T, tb *table, hash func(key) uint64, want int) {
	t.Helper()
	if tb.n != want || 2*tb.n > len(tb.slots) {
		t.Fatalf("n = %d with %d slots, want %d entries at most half full", tb.n, len(tb.slots), want)
	}
	mask := uint64(len(tb.slots) - 1)
	n := 0
	for i, s := range tb.slots {
		if s.e == nil {
			continue
		}
		n++
		if s.h != hash(s.e.key) {
			t.Fatalf("slot %d: stored hash %x, key's %x", i, s.h, hash(s.e.key))
		}
		for j := s.h & mask; j != uint64(i); j = (j + 1) & mask {
			if tb.slots[j].e == nil {
				t.Fatalf("slot %d (home %d): empty slot %d between", i, s.h&mask, j)
			}
		}
	}
	if n != want {
		t.Fatalf("%d entries in the slots, want %d", n, want)
	}
}
