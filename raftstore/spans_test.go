package raftstore

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/hashicorp/raft"
)

// TestStoreModel checks the store against a model (each stored index and
// the term of the write that stored it) through random writes with holes,
// overwrites, repeats within a call, range deletions of every shape and
// reopens (which turn what the store knows into one span it must look
// into): FirstIndex, LastIndex, the spans' invariants, and GetLog of every
// stored index and of missing ones. Some entries are large, so that runs
// split into chunks by size.
func TestStoreModel(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed))
		fs := vfs.NewMem()
		s := openTestStore(t, fs, "p")
		model := map[uint64]uint64{} // index → term
		universe := func() uint64 {
			switch rng.IntN(20) {
			case 0:
				return 0
			case 1:
				return math.MaxUint64 - uint64(rng.IntN(3))
			}
			return uint64(rng.IntN(300))
		}
		entry := func(i, term uint64) *raft.Log {
			data := fmt.Appendf(nil, "%d/%d", i, term)
			if rng.IntN(10) == 0 {
				data = append(data, make([]byte, rng.IntN(16<<10))...)
			}
			return &raft.Log{Index: i, Term: term, Data: data}
		}
		for step := 0; step < 600; step++ {
			term := uint64(step + 1)
			switch op := rng.IntN(10); {
			case op < 4: // a contiguous run, raft's kind of write
				a := universe()
				n := uint64(1 + rng.IntN(20))
				if a > math.MaxUint64-n {
					a = math.MaxUint64 - n
				}
				var logs []*raft.Log
				for i := a; i < a+n; i++ {
					logs = append(logs, entry(i, term))
					model[i] = term
				}
				if err := s.StoreLogs(logs); err != nil {
					t.Fatal(err)
				}
			case op < 6: // any indexes, any order, repeats: the last wins
				var logs []*raft.Log
				for k := range 1 + rng.IntN(8) {
					i := universe()
					if k > 0 && rng.IntN(4) == 0 {
						i = logs[rng.IntN(k)].Index
					}
					logs = append(logs, entry(i, term))
					logs[k].Term += uint64(k) << 32
					model[i] = logs[k].Term
				}
				for _, l := range logs {
					l.Data = fmt.Appendf(nil, "%d/%d", l.Index, l.Term)
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
			checkModel(t, s, model, rng, step%16 == 0, fmt.Sprintf("seed %d step %d", seed, step))
		}
		s.Close()
	}
}

func checkModel(t *testing.T, s *Store, model map[uint64]uint64, rng *rand.Rand, full bool, at string) {
	t.Helper()
	want := slices.Sorted(maps.Keys(model))
	var first, last uint64
	if len(want) > 0 {
		first, last = want[0], want[len(want)-1]
	}
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if f != first || l != last {
		t.Fatalf("%s: bounds [%d, %d], want [%d, %d] (%d entries)", at, f, l, first, last, len(want))
	}
	for _, span := range s.spans.s {
		if span.lo > span.hi || !hasKey(model, span.lo) || !hasKey(model, span.hi) {
			t.Fatalf("%s: span %+v has an end that is not stored", at, span)
		}
		if span.exact {
			for k := uint64(0); k <= span.hi-span.lo && k < 1000; k++ {
				if i := span.lo + k; !hasKey(model, i) {
					t.Fatalf("%s: exact span %+v lacks %d", at, span, span.lo+k)
				}
			}
		}
	}
	// Stored entries in order (which the cache serves) and in a random
	// order (which seeks), some missing ones, and now and then every
	// stored entry.
	if !full && len(want) > 40 {
		k := rng.IntN(len(want) - 40)
		want = want[k : k+40]
	}
	probe := slices.Clone(want)
	for range 20 {
		probe = append(probe, uint64(rng.IntN(310)), math.MaxUint64-uint64(rng.IntN(20)))
	}
	rng.Shuffle(len(probe)-len(want), func(i, j int) {
		probe[len(want)+i], probe[len(want)+j] = probe[len(want)+j], probe[len(want)+i]
	})
	for _, i := range append(probe, want...) {
		var got raft.Log
		err := s.GetLog(i, &got)
		term, ok := model[i]
		switch {
		case !ok && err != raft.ErrLogNotFound:
			t.Fatalf("%s: GetLog(%d) of a missing entry = %v, want raft.ErrLogNotFound", at, i, err)
		case ok && err != nil:
			t.Fatalf("%s: GetLog(%d): %v", at, i, err)
		case ok && (got.Index != i || got.Term != term || !bytes.HasPrefix(got.Data, fmt.Appendf(nil, "%d/%d", i, term))):
			t.Fatalf("%s: GetLog(%d) = index %d term %d data %.20q, want term %d", at, i, got.Index, got.Term, got.Data, term)
		}
	}
}

func hasKey(m map[uint64]uint64, k uint64) bool { _, ok := m[k]; return ok }

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
