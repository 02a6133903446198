package raftstore

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/hashicorp/raft"
)

// TestStoreBoundsModel checks FirstIndex and LastIndex against a model
// (the set of stored indexes) through random writes with holes, overwrites,
// range deletions of every shape and reopens (which turn what the store
// knows into one span it must look into).
func TestStoreBoundsModel(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed))
		fs := vfs.NewMem()
		s := openTestStore(t, fs, "p")
		model := map[uint64]bool{}
		universe := func() uint64 {
			switch rng.IntN(20) {
			case 0:
				return 0
			case 1:
				return math.MaxUint64 - uint64(rng.IntN(3))
			}
			return uint64(rng.IntN(300))
		}
		for step := 0; step < 600; step++ {
			switch op := rng.IntN(10); {
			case op < 4: // a contiguous run, raft's kind of write
				a := universe()
				n := uint64(1 + rng.IntN(20))
				if a > math.MaxUint64-n {
					a = math.MaxUint64 - n
				}
				var logs []*raft.Log
				for i := a; i < a+n; i++ {
					logs = append(logs, &raft.Log{Index: i, Term: 1})
					model[i] = true
				}
				if err := s.StoreLogs(logs); err != nil {
					t.Fatal(err)
				}
			case op < 6: // any indexes, any order
				var logs []*raft.Log
				for range 1 + rng.IntN(8) {
					i := universe()
					logs = append(logs, &raft.Log{Index: i, Term: 2})
					model[i] = true
				}
				if err := s.StoreLogs(logs); err != nil {
					t.Fatal(err)
				}
			case op < 9:
				a, b := universe(), universe()
				if rng.IntN(4) == 0 {
					a, b = b, a // sometimes inverted: a no-op
				}
				if err := s.DeleteRange(a, b); err != nil {
					t.Fatal(err)
				}
				for i := range model {
					if i >= a && i <= b {
						delete(model, i)
					}
				}
			default:
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = openTestStore(t, fs, "p")
			}
			var want []uint64
			for i := range model {
				want = append(want, i)
			}
			slices.Sort(want)
			var first, last uint64
			if len(want) > 0 {
				first, last = want[0], want[len(want)-1]
			}
			f, _ := s.FirstIndex()
			l, _ := s.LastIndex()
			if f != first || l != last {
				t.Fatalf("seed %d step %d: bounds [%d, %d], want [%d, %d] (%d entries)", seed, step, f, l, first, last, len(want))
			}
			for _, span := range s.spans.s {
				if span.lo > span.hi || !model[span.lo] || !model[span.hi] {
					t.Fatalf("seed %d step %d: span %+v has an end that is not stored", seed, step, span)
				}
				if span.exact {
					for k := uint64(0); k <= span.hi-span.lo && k < 1000; k++ {
						if i := span.lo + k; !model[i] {
							t.Fatalf("seed %d step %d: exact span %+v lacks %d", seed, step, span, span.lo+k)
						}
					}
				}
			}
		}
		s.Close()
	}
}

// TestDeleteRangeReadsNothing: on a log written since Open, DeleteRange
// finds the new bounds without a read.
func TestDeleteRangeReadsNothing(t *testing.T) {
	s := openTestStore(t, vfs.NewMem(), "")
	defer s.Close()
	var logs []*raft.Log
	for n := range 100 {
		for i := 10 * n; i < 10*n+3; i++ {
			logs = append(logs, &raft.Log{Index: uint64(i)})
		}
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	reads := 0
	seek := func(uint64, bool) (uint64, error) { reads++; return 0, nil }
	for n := range 99 {
		e, err := s.spans.planRemove(uint64(10*n), uint64(10*n+9), seek)
		if err != nil {
			t.Fatal(err)
		}
		s.spans.apply(e)
	}
	if reads != 0 {
		t.Fatalf("%d reads", reads)
	}
	if f, l := s.spans.bounds(); f != 990 || l != 992 {
		t.Fatalf("bounds %d, %d", f, l)
	}
}
