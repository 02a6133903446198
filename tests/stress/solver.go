package stress

import (
	"fmt"
	"sort"
	"strings"
)

// The crash checker.
//
// After a crash the DB holds some set P of the operations issued since the
// last verification. P is correct if:
//
//  1. It is what some prefix of the commit (sequence-number) order leaves:
//     batches are atomic, and there is no hole. The commit order is not
//     observable, but it extends the real-time order: if a was
//     acknowledged before b was issued, a committed first. So P must be
//     closed under "acknowledged before issued": b ∈ P ⇒ a ∈ P.
//  2. It holds every write the durability rules promise: synced writes
//     acknowledged before the crash (with a WAL); writes acknowledged
//     before a Flush that returned before the crash; everything
//     acknowledged before a clean Close.
//  3. It explains the recovered state: each key holds the state its last
//     write in P left (or the verified state if P has none).
//
// Operations that were in flight or failed may be in P or not. Everything
// here is an implication between two operations ("if x happened then y
// happened") or a fact ("x happened", "x did not happen"):
//   - a later write of a key happened ⇒ the earlier acknowledged ones did
//     (writers of a key are serialized, so their commit order is their
//     version order; a failed write may not have committed at all);
//   - the key holds version v ⇒ the write of v happened and no later
//     write of the key did; the key is absent ⇒ the last write of it that
//     happened deleted it (see keyConstraints);
//   - b happened ⇒ every a acknowledged before b was issued happened;
//   - durable operations happened.
//
// A set of such clauses is satisfiable exactly when propagating the facts
// (forward through implications for "happened", backward for "did not")
// never marks an operation both ways; then "did not happen" for the rest
// is a valid P. So the check is linear, and its failure comes with the
// chain of reasons on both sides. Every clause holds for any real outcome,
// so it never rejects a valid state; the one rule that is not of this
// shape ("some later write of the key happened", when the next write
// failed and may not have) is left out, which only makes the check less
// sharp next to failed writes (see keyConstraints).

// durability says which acknowledged operations must have survived.
type durability struct {
	// cutoff: only acknowledgements before this tick count: an answer
	// that arrived after the crash began proves nothing.
	cutoff uint64
	// everything: a clean Close returned, so every operation acknowledged
	// before cutoff must be there.
	everything bool
	// syncedWAL: synced writes acknowledged before cutoff must be there
	// (false with DisableWAL, where only Flush makes writes durable).
	syncedWAL bool
	// what names the event for reports ("crash", "clean close", "kill").
	what string
	// live: the check reads a DB that stays open (the end of the run). It
	// sees writes that are not durable yet, so its result must not become
	// the base of the next check: if the close that follows fails, those
	// writes may be lost (a failed WAL write or, without WAL, a failed
	// flush), and the next check must start from the last durable base.
	live bool
	// excused, if set, names operations whose synced acknowledgement does
	// not make them durable: the writes of a WAL record that a bit flip in
	// the newest WAL's last record let recovery drop as a torn tail after a
	// crash (see files.go), which no reader of the file can tell from a
	// crash that cut the record.
	excused func(*opRec) bool
	// statesOnly: skip-any WAL recovery skipped damaged records, so only
	// the weakest rule holds: each key holds its state at the last
	// verification or one a logged write left (statesWritten; solveWith).
	statesOnly bool
}

type reasonKind uint8

const (
	rNone reasonKind = iota
	rDurableSync
	rDurableAll
	rBarrier
	rNotBase
	rNotLast
	rKeyOrder
	rCutGap
	rPrecedes
	rHolds
	rHoldsOlder
)

// reason records why an operation was forced in or out: what, and through
// which other operation (from, -1 for a fact) and key.
type reason struct {
	kind reasonKind
	from int
	key  uint32
}

type edge struct {
	to   int
	kind reasonKind
	key  uint32
}

type solver struct {
	ops      []*opRec
	kc       keyCodec
	base     []kstate
	rec      []kstate
	d        durability
	in, out  []reason
	fwd, rev [][]edge
	// byAck: acknowledged operations by ack tick; byInvDesc: all by inv
	// tick, descending. They implement the "acknowledged before issued"
	// implications without materializing the quadratic edge set.
	byAck     []int
	byInvDesc []int
	ackPtr    int
	maxInInv  uint64
	maxInFrom int
	invPtr    int
	minOutAck uint64
	minOutFr  int
	queue     []int // i+1 = forced in, -(i+1) = forced out
	conflict  string
}

// solveStats describe a successful check.
type solveStats struct {
	// lostAcked counts acknowledged writes that certainly did not survive
	// (allowed: they were not durable yet). It shows the crash bit.
	lostAcked int
}

// solveCrash checks that rec, the state recovered after an event, is the
// result of a valid prefix of ops applied to base (see above). It returns
// nil or a description of the violation.
func solveCrash(kc keyCodec, base, rec []kstate, ops []*opRec, d durability) (solveStats, error) {
	s := &solver{ops: ops, kc: kc, base: base, rec: rec, d: d,
		in: make([]reason, len(ops)), out: make([]reason, len(ops)),
		fwd: make([][]edge, len(ops)), rev: make([][]edge, len(ops)),
		maxInFrom: -1, minOutAck: ^uint64(0), minOutFr: -1}
	if err := s.keyConstraints(); err != nil {
		return solveStats{}, err
	}
	for i, o := range ops {
		if o.status == opOK {
			s.byAck = append(s.byAck, i)
		}
		s.byInvDesc = append(s.byInvDesc, i)
	}
	sort.Slice(s.byAck, func(a, b int) bool { return ops[s.byAck[a]].ack < ops[s.byAck[b]].ack })
	sort.Slice(s.byInvDesc, func(a, b int) bool { return ops[s.byInvDesc[a]].inv > ops[s.byInvDesc[b]].inv })
	for i, o := range ops {
		if o.status != opOK || o.ack >= d.cutoff {
			continue
		}
		switch {
		case o.name.barrier():
			s.setIn(i, reason{kind: rBarrier, from: -1})
		case d.everything:
			s.setIn(i, reason{kind: rDurableAll, from: -1})
		case d.syncedWAL && o.synced && (d.excused == nil || !d.excused(o)):
			s.setIn(i, reason{kind: rDurableSync, from: -1})
		}
	}
	s.propagate()
	if s.conflict != "" {
		return solveStats{}, fmt.Errorf("after %s: %s", d.what, s.conflict)
	}
	var st solveStats
	for i, o := range ops {
		if o.status == opOK && !o.name.barrier() && s.out[i].kind != rNone {
			st.lostAcked++
		}
	}
	return st, nil
}

type keyWriteRef struct {
	op int
	st kstate
}

// keyConstraints adds the per-key implications and facts, or returns an
// error if a key holds a state no write left.
//
// For key k with writes w_1..w_m in version order (its writers are
// serialized, so this is their commit order among those that committed):
//   - w_j happened ⇒ every acknowledged w_i, i < j, happened. A failed or
//     unanswered w_i may never have happened at all, so it is not a
//     predecessor; the implication goes to the nearest acknowledged
//     earlier write (and on from there).
//   - k holds version v (a set: versions are unique): the write of v
//     happened and every later write of k did not — or, if v is the
//     verified state, no write of k happened.
//   - k is absent: the last write of k that happened deleted it. So the
//     last write, if it set k, did not happen; a base that set k needs a
//     write, and w_c setting k needs a later write — which, when w_1 or
//     w_{c+1} was acknowledged, means exactly that write (any later one
//     implies it). When it was not, "some later write" is a disjunction
//     the propagation cannot express, and the clause is left out: the
//     check stays sound (it never rejects a valid state), only less
//     sharp around failed writes.
func (s *solver) keyConstraints() error {
	perKey := map[uint32][]keyWriteRef{}
	for i, o := range s.ops {
		for _, w := range o.writes {
			perKey[w.key] = append(perKey[w.key], keyWriteRef{op: i, st: w.st})
		}
	}
	for k := range s.rec {
		ws := perKey[uint32(k)]
		r := s.rec[k]
		if len(ws) == 0 {
			if !s.base[k].same(r) {
				return fmt.Errorf("after %s: key %s holds %v, but it was %v at the last verification and nothing wrote it since",
					s.d.what, s.kc.keyName(k), r, s.base[k])
			}
			continue
		}
		sort.Slice(ws, func(a, b int) bool { return ws[a].st.ver < ws[b].st.ver })
		m := len(ws)
		state := func(c int) kstate {
			if c == 0 {
				return s.base[k]
			}
			return ws[c-1].st
		}
		cand := -1
		for c := 0; c <= m; c++ {
			if state(c).same(r) {
				cand = c
				break
			}
		}
		if cand < 0 {
			var cands []string
			for _, w := range ws {
				cands = append(cands, fmt.Sprintf("%v by op #%d", w.st, s.ops[w.op].id))
			}
			return fmt.Errorf("after %s: key %s holds %v, which is neither its state at the last verification (%v) nor one a write since left (%s)",
				s.d.what, s.kc.keyName(k), r, s.base[k], strings.Join(cands, ", "))
		}
		key := uint32(k)
		acked := func(i int) bool { return s.ops[ws[i].op].status == opOK }
		lastAcked := -1
		for i := 0; i < m; i++ {
			if lastAcked >= 0 {
				s.addEdge(ws[i].op, ws[lastAcked].op, rKeyOrder, key)
			}
			if acked(i) {
				lastAcked = i
			}
		}
		if !r.del {
			if cand > 0 {
				s.setIn(ws[cand-1].op, reason{kind: rHolds, from: -1, key: key})
			}
			for j := cand; j < m; j++ {
				s.setOut(ws[j].op, reason{kind: rHoldsOlder, from: -1, key: key})
			}
			continue
		}
		if !state(0).same(r) && acked(0) {
			s.setIn(ws[0].op, reason{kind: rNotBase, from: -1, key: key})
		}
		if !state(m).same(r) {
			s.setOut(ws[m-1].op, reason{kind: rNotLast, from: -1, key: key})
		}
		for c := 1; c < m; c++ {
			if !state(c).same(r) && acked(c) {
				s.addEdge(ws[c-1].op, ws[c].op, rCutGap, key)
			}
		}
	}
	return nil
}

// addEdge records "from happened ⇒ to happened".
func (s *solver) addEdge(from, to int, kind reasonKind, key uint32) {
	if from == to {
		return
	}
	s.fwd[from] = append(s.fwd[from], edge{to: to, kind: kind, key: key})
	s.rev[to] = append(s.rev[to], edge{to: from, kind: kind, key: key})
}

func (s *solver) setIn(i int, r reason) {
	if s.in[i].kind != rNone || s.conflict != "" {
		return
	}
	s.in[i] = r
	if s.out[i].kind != rNone {
		s.conflict = s.explainConflict(i)
		return
	}
	s.queue = append(s.queue, i+1)
}

func (s *solver) setOut(i int, r reason) {
	if s.out[i].kind != rNone || s.conflict != "" {
		return
	}
	s.out[i] = r
	if s.in[i].kind != rNone {
		s.conflict = s.explainConflict(i)
		return
	}
	s.queue = append(s.queue, -(i + 1))
}

func (s *solver) propagate() {
	for len(s.queue) > 0 && s.conflict == "" {
		q := s.queue[len(s.queue)-1]
		s.queue = s.queue[:len(s.queue)-1]
		if q > 0 {
			i := q - 1
			for _, e := range s.fwd[i] {
				s.setIn(e.to, reason{kind: e.kind, from: i, key: e.key})
			}
			if inv := s.ops[i].inv; inv > s.maxInInv {
				s.maxInInv, s.maxInFrom = inv, i
				for s.ackPtr < len(s.byAck) && s.ops[s.byAck[s.ackPtr]].ack < s.maxInInv {
					s.setIn(s.byAck[s.ackPtr], reason{kind: rPrecedes, from: s.maxInFrom})
					s.ackPtr++
				}
			}
		} else {
			i := -q - 1
			for _, e := range s.rev[i] {
				s.setOut(e.to, reason{kind: e.kind, from: i, key: e.key})
			}
			if o := s.ops[i]; o.status == opOK && o.ack < s.minOutAck {
				s.minOutAck, s.minOutFr = o.ack, i
				for s.invPtr < len(s.byInvDesc) && s.ops[s.byInvDesc[s.invPtr]].inv > s.minOutAck {
					s.setOut(s.byInvDesc[s.invPtr], reason{kind: rPrecedes, from: s.minOutFr})
					s.invPtr++
				}
			}
		}
	}
}

// explainConflict describes why operation i must and cannot have happened.
func (s *solver) explainConflict(i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "no prefix of the history explains the recovered state: %v\n", s.ops[i])
	fmt.Fprintf(&b, "  must have happened, because:\n")
	s.chain(&b, i, true)
	fmt.Fprintf(&b, "  cannot have happened, because:\n")
	s.chain(&b, i, false)
	return strings.TrimRight(b.String(), "\n")
}

func (s *solver) chain(b *strings.Builder, i int, in bool) {
	for step := 0; step < 12 && i >= 0; step++ {
		r := s.out[i]
		if in {
			r = s.in[i]
		}
		fmt.Fprintf(b, "    - %s\n", s.describe(i, r, in))
		i = r.from
	}
	if i >= 0 {
		fmt.Fprintf(b, "    - ...\n")
	}
}

func (s *solver) describe(i int, r reason, in bool) string {
	o := s.ops[i]
	from := func() string {
		if r.from < 0 {
			return "?"
		}
		return s.ops[r.from].String()
	}
	key := func() string { return s.kc.keyName(int(r.key)) }
	rec := func() string {
		if int(r.key) < len(s.rec) {
			return s.rec[r.key].String()
		}
		return "?"
	}
	switch r.kind {
	case rDurableSync:
		return fmt.Sprintf("%v was acknowledged as synced before the %s", o, s.d.what)
	case rDurableAll:
		return fmt.Sprintf("%v was acknowledged before the %s", o, s.d.what)
	case rBarrier:
		return fmt.Sprintf("%v returned before the %s, making every write acknowledged before it durable", o, s.d.what)
	case rNotBase:
		return fmt.Sprintf("key %s holds %s, not its state at the last verification (%v), so its first write since, %v, happened",
			key(), rec(), s.base[r.key], o)
	case rNotLast:
		return fmt.Sprintf("key %s holds %s, not what its last write %v left, so that write did not happen", key(), rec(), o)
	case rHolds:
		return fmt.Sprintf("key %s holds %s, which %v wrote, so that write happened", key(), rec(), o)
	case rHoldsOlder:
		return fmt.Sprintf("key %s holds %s, written before %v, so that write did not happen", key(), rec(), o)
	case rKeyOrder:
		if in {
			return fmt.Sprintf("%v (acknowledged) happened because a later write of key %s, %s, did", o, key(), from())
		}
		return fmt.Sprintf("%v did not happen because an earlier acknowledged write of key %s, %s, did not", o, key(), from())
	case rCutGap:
		if in {
			return fmt.Sprintf("%v happened: the previous write of key %s, %s, did, and the key holds %s, not what that write left", o, key(), from(), rec())
		}
		return fmt.Sprintf("%v did not happen: the next write of key %s, %s, did not, and the key holds %s, not what this write left", o, key(), from(), rec())
	case rPrecedes:
		if in {
			return fmt.Sprintf("%v happened because %s, issued after it was acknowledged, did", o, from())
		}
		return fmt.Sprintf("%v did not happen because %s, acknowledged before it was issued, did not", o, from())
	}
	return o.String()
}
