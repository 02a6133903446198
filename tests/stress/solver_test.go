package stress

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

// hist builds op logs by hand: op(inv, ack, status, synced, writes...).
type hist struct {
	ops []*opRec
}

func (h *hist) op(inv, ack uint64, st opStatus, synced bool, w ...keyWrite) *opRec {
	o := &opRec{id: uint64(len(h.ops) + 1), name: namePut, status: st, synced: synced, inv: inv, ack: ack, writes: w}
	if len(w) > 1 {
		o.name = nameBatch
	}
	if len(w) == 0 {
		o.name = nameFlush
	}
	h.ops = append(h.ops, o)
	return o
}

func kw(k uint32, st kstate) keyWrite { return keyWrite{key: k, st: st} }

func states(s ...kstate) []kstate { return s }

func TestSolverScenarios(t *testing.T) {
	kc := keyCodec{n: 4}
	absent := neverWritten
	base := states(absent, absent, absent, absent)
	crash := durability{cutoff: 100, syncedWAL: true, what: "crash"}
	noWAL := durability{cutoff: 100, what: "crash"}
	clean := durability{cutoff: 100, everything: true, syncedWAL: true, what: "clean close"}

	// a: put k0=v1 (synced) [1,2]; b: put k1=v1 [3,4]; c: put k0=v2 [5,6];
	// d: batch k2=v1,k3=v1 in flight from 7.
	h := &hist{}
	h.op(1, 2, opOK, true, kw(0, set(1)))
	h.op(3, 4, opOK, false, kw(1, set(1)))
	h.op(5, 6, opOK, false, kw(0, set(2)))
	h.op(7, 0, opPending, false, kw(2, set(1)), kw(3, set(1)))

	for _, c := range []struct {
		name string
		rec  []kstate
		d    durability
		want string // "" = accepted, else a substring of the error
	}{
		{"prefix {a}", states(set(1), absent, absent, absent), crash, ""},
		{"prefix {a,b}", states(set(1), set(1), absent, absent), crash, ""},
		{"prefix {a,b,c}", states(set(2), set(1), absent, absent), crash, ""},
		{"everything plus the batch in flight", states(set(2), set(1), set(1), set(1)), crash, ""},
		{"synced a lost", states(absent, absent, absent, absent), crash, "acknowledged as synced"},
		{"synced a lost, no WAL: allowed", states(absent, absent, absent, absent), noWAL, ""},
		{"hole: c without b", states(set(2), absent, absent, absent), crash, "acknowledged before it was issued"},
		{"torn batch", states(set(2), set(1), set(1), absent), crash, "cannot have happened"},
		{"batch in flight without its predecessors", states(set(1), absent, set(1), set(1)), crash, "issued after it was acknowledged"},
		{"clean close lost c", states(set(1), set(1), absent, absent), clean, "acknowledged before the clean close"},
		{"unknown version", states(set(3), set(1), absent, absent), crash, "neither its state at the last verification"},
		{"untouched key changed", states(set(1), absent, absent, absent), crash, ""},
	} {
		_, err := solveCrash(kc, base, c.rec, h.ops, c.d)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: rejected: %v", c.name, err)
		case c.want != "" && err == nil:
			t.Errorf("%s: accepted, want an error containing %q", c.name, c.want)
		case c.want != "" && !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: error %v does not mention %q", c.name, err, c.want)
		}
	}
}

func TestSolverConcurrentAndFailed(t *testing.T) {
	kc := keyCodec{n: 3}
	base := states(neverWritten, neverWritten, neverWritten)
	d := durability{cutoff: 100, syncedWAL: true, what: "crash"}
	// a [1,6] and b [2,3] overlap: either may have committed first.
	h := &hist{}
	h.op(1, 6, opOK, false, kw(0, set(1)))
	h.op(2, 3, opOK, false, kw(1, set(1)))
	// f failed: it may or may not have happened.
	h.op(7, 8, opFailed, false, kw(2, set(1)))
	for _, rec := range [][]kstate{
		states(neverWritten, set(1), neverWritten),
		states(set(1), neverWritten, neverWritten),
		states(set(1), set(1), set(1)),
		states(neverWritten, neverWritten, neverWritten),
	} {
		if _, err := solveCrash(kc, base, rec, h.ops, d); err != nil {
			t.Errorf("%v rejected: %v", rec, err)
		}
	}
	// f happened, so everything acknowledged before it was issued did.
	if _, err := solveCrash(kc, base, states(set(1), neverWritten, set(1)), h.ops, d); err == nil {
		t.Error("failed write present with a hole before it: accepted")
	}
}

func TestSolverFlushBarrier(t *testing.T) {
	kc := keyCodec{n: 2}
	base := states(neverWritten, neverWritten)
	h := &hist{}
	h.op(1, 2, opOK, false, kw(0, set(1)))
	h.op(3, 5, opOK, false) // Flush returned at 5
	h.op(6, 7, opOK, false, kw(1, set(1)))
	noWAL := durability{cutoff: 100, what: "crash"}
	if _, err := solveCrash(kc, base, states(neverWritten, neverWritten), h.ops, noWAL); err == nil ||
		!strings.Contains(err.Error(), "returned before the crash") {
		t.Errorf("write before a returned Flush lost: %v", err)
	}
	if _, err := solveCrash(kc, base, states(set(1), neverWritten), h.ops, noWAL); err != nil {
		t.Errorf("write after the Flush lost (allowed without WAL): %v", err)
	}
	// A Flush answered after the crash began promises nothing.
	late := durability{cutoff: 4, what: "crash"}
	if _, err := solveCrash(kc, base, states(neverWritten, neverWritten), h.ops, late); err != nil {
		t.Errorf("flush acknowledged after the crash: %v", err)
	}
}

func TestSolverDeletions(t *testing.T) {
	kc := keyCodec{n: 2}
	base := states(set(1), neverWritten)
	h := &hist{}
	h.op(1, 2, opOK, false, kw(0, del(2)))
	h.op(3, 4, opOK, false, kw(0, set(3)))
	h.op(5, 6, opOK, false, kw(0, del(4)), kw(1, set(1)))
	d := durability{cutoff: 100, syncedWAL: true, what: "crash"}
	// k0 absent: cut after op 1 (k1 absent) or after op 3 (k1 set).
	for _, rec := range [][]kstate{states(neverWritten, neverWritten), states(neverWritten, set(1))} {
		if _, err := solveCrash(kc, base, rec, h.ops, d); err != nil {
			t.Errorf("%v rejected: %v", rec, err)
		}
	}
	// k0 at its base value but k1 written by op 3: hole.
	if _, err := solveCrash(kc, base, states(set(1), set(1)), h.ops, d); err == nil {
		t.Error("op 3 without ops 1 and 2: accepted")
	}
}

// TestSolverRandomHistories simulates a DB: threads issue writes whose
// keys are locked for the write's duration; each write commits at a
// random moment between its invocation and its acknowledgement, which
// defines the hidden commit order; a crash at a random time keeps a
// random prefix of the commit order that holds every durable write. The
// solver must accept every such state, and reject three mutations that are
// inconsistent by construction: a durable write undone, a batch half
// undone, a write undone while a write issued after its acknowledgement
// stays.
func TestSolverRandomHistories(t *testing.T) {
	iters := 1000
	if testing.Short() {
		iters = 100
	}
	for seed := uint64(0); seed < uint64(iters); seed++ {
		sim := simulate(seed)
		if _, err := solveCrash(sim.kc, sim.base, sim.rec, sim.ops, sim.d); err != nil {
			t.Fatalf("seed %d: valid prefix rejected: %v", seed, err)
		}
		for _, m := range sim.mutations() {
			if _, err := solveCrash(sim.kc, sim.base, m.rec, sim.ops, sim.d); err == nil {
				t.Fatalf("seed %d: mutation %q accepted", seed, m.name)
			}
		}
	}
}

type simHistory struct {
	kc    keyCodec
	base  []kstate
	rec   []kstate
	ops   []*opRec
	d     durability
	in    []bool // op i is in the kept prefix
	prev  map[*opRec]map[uint32]kstate
	rng   *rand.Rand
	order []int
}

type mutation struct {
	name string
	rec  []kstate
}

func simulate(seed uint64) *simHistory {
	rng := rand.New(rand.NewPCG(seed, 77))
	nkeys := 2 + rng.IntN(10)
	s := &simHistory{kc: keyCodec{n: nkeys}, rng: rng, prev: map[*opRec]map[uint32]kstate{}}
	s.base = make([]kstate, nkeys)
	next := make([]uint32, nkeys)
	for k := range s.base {
		s.base[k] = neverWritten
		if rng.IntN(2) == 0 {
			s.base[k] = set(1)
		}
		next[k] = 2
	}
	type event struct {
		t  float64
		op int
	}
	keyFree := make([]float64, nkeys)
	threads := make([]float64, 1+rng.IntN(4))
	cur := append([]kstate{}, s.base...)
	var commits []event
	var times [][2]float64
	nops := 5 + rng.IntN(40)
	for i := 0; i < nops; i++ {
		th := rng.IntN(len(threads))
		nk := 1 + rng.IntN(3)
		keys := map[uint32]bool{}
		for len(keys) < min(nk, nkeys) {
			keys[uint32(rng.IntN(nkeys))] = true
		}
		start := threads[th]
		for k := range keys {
			start = max(start, keyFree[k])
		}
		start += rng.Float64()
		commit := start + rng.Float64()
		ack := commit + rng.Float64()
		o := &opRec{id: uint64(i + 1), name: nameBatch, synced: rng.IntN(4) == 0}
		ks := make([]uint32, 0, len(keys))
		for k := range keys {
			ks = append(ks, k)
		}
		sort.Slice(ks, func(a, b int) bool { return ks[a] < ks[b] })
		s.prev[o] = map[uint32]kstate{}
		for _, k := range ks {
			st := kstate{ver: next[k], del: rng.IntN(3) == 0}
			next[k]++
			o.writes = append(o.writes, keyWrite{key: k, st: st})
			keyFree[k] = ack
		}
		threads[th] = ack
		s.ops = append(s.ops, o)
		times = append(times, [2]float64{start, ack})
		commits = append(commits, event{t: commit, op: i})
	}
	// Crash at a random time; ticks are ranks of the event times.
	var all []float64
	for _, tt := range times {
		all = append(all, tt[0], tt[1])
	}
	sort.Float64s(all)
	crashT := all[rng.IntN(len(all))] + 1e-9
	tick := func(x float64) uint64 { return uint64(sort.SearchFloat64s(all, x)) + 1 }
	s.d = durability{cutoff: tick(crashT), syncedWAL: true, what: "simulated crash"}
	var kept []*opRec
	for i, o := range s.ops {
		if times[i][0] > crashT {
			continue // never issued
		}
		o.inv = tick(times[i][0])
		switch {
		case times[i][1] < crashT && rng.IntN(8) == 0:
			o.status, o.ack = opFailed, tick(times[i][1])
		case times[i][1] < crashT:
			o.status, o.ack = opOK, tick(times[i][1])
		default:
			o.status = opPending
		}
		kept = append(kept, o)
	}
	byID := map[uint64]int{}
	for i, o := range kept {
		byID[o.id] = i
	}
	sort.Slice(commits, func(a, b int) bool { return commits[a].t < commits[b].t })
	// Candidates for the commit order: issued writes that committed before
	// the crash; a failed write may or may not have happened.
	var order []int
	for _, c := range commits {
		i, ok := byID[s.ops[c.op].id]
		if !ok || c.t > crashT {
			continue
		}
		if kept[i].status == opFailed && rng.IntN(2) == 0 {
			continue
		}
		order = append(order, i)
	}
	minCut := 0
	for pos, i := range order {
		if o := kept[i]; o.status == opOK && o.synced {
			minCut = pos + 1
		}
	}
	cut := minCut + rng.IntN(len(order)-minCut+1)
	s.in = make([]bool, len(kept))
	for _, i := range order[:cut] {
		o := kept[i]
		s.in[i] = true
		for _, w := range o.writes {
			s.prev[o][w.key] = cur[w.key]
			cur[w.key] = w.st
		}
	}
	s.ops, s.rec, s.order = kept, cur, order[:cut]
	return s
}

// lastWriter returns, per key, the last op of the kept prefix writing it.
func (s *simHistory) lastWriter() map[uint32]*opRec {
	last := map[uint32]*opRec{}
	for _, i := range s.order {
		for _, w := range s.ops[i].writes {
			last[w.key] = s.ops[i]
		}
	}
	return last
}

// undoable reports whether reverting key k from o's state to the one before
// o is certainly inconsistent with o having happened: both states are sets
// (unique versions).
func (s *simHistory) undoable(o *opRec, k uint32) (kstate, bool) {
	p := s.prev[o][k]
	var mine kstate
	for _, w := range o.writes {
		if w.key == k {
			mine = w.st
		}
	}
	return p, !p.del && !mine.del
}

func (s *simHistory) mutations() []mutation {
	var out []mutation
	last := s.lastWriter()
	undo := func(k uint32, st kstate) []kstate {
		r := append([]kstate{}, s.rec...)
		r[k] = st
		return r
	}
	for k, o := range last {
		p, ok := s.undoable(o, k)
		if !ok {
			continue
		}
		if o.status == opOK && o.synced && o.ack < s.d.cutoff {
			out = append(out, mutation{fmt.Sprintf("durable op #%d undone on key %d", o.id, k), undo(k, p)})
		}
		// Torn: o also set another key it is the last writer of (a set:
		// a unique version forces o in; a deletion could be explained by
		// another deleting write).
		for _, w := range o.writes {
			if w.key != k && last[w.key] == o && !w.st.del {
				out = append(out, mutation{fmt.Sprintf("op #%d torn: key %d undone, key %d kept", o.id, k, w.key), undo(k, p)})
				break
			}
		}
		// Hole: a write issued after o was acknowledged stays visible (it
		// is the last writer of a key it set, so it certainly happened).
		if o.status == opOK {
			for k2, b := range last {
				if k2 == k || b == o || b.inv <= o.ack {
					continue
				}
				for _, w := range b.writes {
					if w.key == k2 && !w.st.del {
						out = append(out, mutation{fmt.Sprintf("hole: op #%d undone on key %d, op #%d kept", o.id, k, b.id), undo(k, p)})
					}
				}
			}
		}
	}
	return out
}

func BenchmarkSolve(b *testing.B) {
	// A history of 100000 single-key writes over 1000 keys, all acked, a
	// crash keeping the first half.
	const n, keys = 100000, 1000
	kc := keyCodec{n: keys}
	base := make([]kstate, keys)
	rec := make([]kstate, keys)
	for i := range base {
		base[i], rec[i] = neverWritten, neverWritten
	}
	ops := make([]*opRec, n)
	next := make([]uint32, keys)
	for i := range ops {
		k := uint32(i % keys)
		next[k]++
		ops[i] = &opRec{id: uint64(i + 1), name: namePut, status: opOK, inv: uint64(2*i + 1), ack: uint64(2*i + 2),
			writes: []keyWrite{{key: k, st: set(next[k])}}}
		if i < n/2 {
			rec[k] = set(next[k])
		}
	}
	d := durability{cutoff: ^uint64(0), syncedWAL: true, what: "bench"}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := solveCrash(kc, base, rec, ops, d); err != nil {
			b.Fatal(err)
		}
	}
}
