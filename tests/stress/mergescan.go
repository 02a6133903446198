package stress

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vigildb/vigil"
)

// Iterator and snapshot checks of the merges mode. An iterator combines a
// key's operands going forward (newest first, below its newest version)
// and going backward (oldest first, while it walks over the key's
// versions), and when it turns around; both must give the value the
// oracle gives.

// mergeWalk checks one iterator over the window [lo, hi) of the key space:
// every key it lands on against the states it may show (expect), every
// key it steps over as absent, and a key seen twice as the same value.
type mergeWalk struct {
	w       *mergeWorker
	it      iterator
	op      string
	lo, hi  int
	bounded bool // nothing outside [lo, hi) can appear
	expect  func(k int) []mstate
	seen    [][]byte
	seenSet []bool
	pos     int
	errSeen bool
	desc    string
}

func newMergeWalk(w *mergeWorker, it iterator, op string, lo, hi int, bounded bool, expect func(int) []mstate) *mergeWalk {
	return &mergeWalk{w: w, it: it, op: op, lo: lo, hi: hi, bounded: bounded, expect: expect,
		seen: make([][]byte, hi-lo), seenSet: make([]bool, hi-lo)}
}

// walk positions the iterator (First, Last, SeekGE or SeekLT; full: First
// or Last as forward says) and moves it with Next and Prev — turning
// around one time in turnOneIn (0: never) — for up to steps moves, or to
// the end when full.
func (s *mergeWalk) walk(full, forward bool, steps, turnOneIn int) *Divergence {
	rng := s.w.rng
	kc := s.w.r.kc
	width := s.hi - s.lo
	var ok bool
	var from int
	x := rng.IntN(4)
	if full {
		x = 1
		if forward {
			x = 0
		}
	}
	switch {
	case x == 0 && s.bounded:
		s.desc, forward = "First", true
		ok, from = s.it.First(), s.lo
	case x == 1 && s.bounded:
		s.desc, forward = "Last", false
		ok, from = s.it.Last(), s.hi-1
	case x == 2:
		t := s.lo + rng.IntN(width+1)
		s.desc, forward = fmt.Sprintf("SeekLT(%d)", t), false
		ok, from = s.it.SeekLT(kc.key(t)), t-1
	default:
		t := s.lo + rng.IntN(width+1)
		s.desc, forward = fmt.Sprintf("SeekGE(%d)", t), true
		ok, from = s.it.SeekGE(kc.key(t)), t
	}
	for i := 0; ; i++ {
		cont, div := s.land(ok, from, forward)
		if div != nil || !cont || (!full && i == steps) {
			return div
		}
		if !full && turnOneIn > 0 && rng.IntN(turnOneIn) == 0 {
			forward = !forward
		}
		if forward {
			s.desc += " Next"
			ok, from = s.it.Next(), s.pos+1
		} else {
			s.desc += " Prev"
			ok, from = s.it.Prev(), s.pos-1
		}
		if len(s.desc) > 400 {
			s.desc = "..." + s.desc[len(s.desc)-300:]
		}
	}
}

// land checks a positioning that moved in direction forward and had to
// account for every key from `from` on up to where it landed; it returns
// whether the walk can go on.
func (s *mergeWalk) land(ok bool, from int, forward bool) (bool, *Divergence) {
	r := s.w.r
	if !ok {
		if err := s.it.Error(); err != nil {
			s.errSeen = true
			if r.tolerate(err) {
				return false, nil
			}
			return false, &Divergence{Op: s.op + " " + s.desc, Got: "error: " + err.Error()}
		}
		if forward {
			return false, s.absent(from, s.hi-1)
		}
		return false, s.absent(s.lo, from)
	}
	k, err := r.kc.decode(s.it.Key())
	if err != nil {
		return false, &Divergence{Op: s.op + " " + s.desc, Key: fmt.Sprintf("%q", s.it.Key()), Got: "a key the runner never wrote", Detail: err.Error()}
	}
	if k < s.lo || k >= s.hi {
		switch {
		case s.bounded:
			return false, &Divergence{Op: s.op + " " + s.desc, Key: r.kc.keyName(k), Got: "a key outside the iterator's bounds"}
		case forward && k >= s.hi:
			return false, s.absent(from, s.hi-1)
		case !forward && k < s.lo:
			return false, s.absent(s.lo, from)
		}
		return false, &Divergence{Op: s.op + " " + s.desc, Key: r.kc.keyName(k), Got: "a key in the wrong direction"}
	}
	if (forward && k < from) || (!forward && k > from) {
		return false, &Divergence{Op: s.op + " " + s.desc, Key: r.kc.keyName(k), Got: "a key out of order",
			Detail: fmt.Sprintf("moving %s from %d", dir(forward), from)}
	}
	var div *Divergence
	if forward {
		div = s.absent(from, k-1)
	} else {
		div = s.absent(k+1, from)
	}
	if div == nil {
		div = s.see(k, s.it.Value(), true)
	}
	s.pos = k
	return div == nil, div
}

// absent checks that every key in [a, b] may be absent.
func (s *mergeWalk) absent(a, b int) *Divergence {
	for k := max(a, s.lo); k <= min(b, s.hi-1); k++ {
		if div := s.see(k, nil, false); div != nil {
			return div
		}
	}
	return nil
}

// see judges key k's value (present) and checks it against what the same
// iterator showed of k before.
func (s *mergeWalk) see(k int, val []byte, present bool) *Divergence {
	r := s.w.r
	i := k - s.lo
	if s.seenSet[i] {
		if (s.seen[i] != nil) != present || !bytes.Equal(s.seen[i], val) {
			return &Divergence{Op: s.op + " " + s.desc, Key: r.kc.keyName(k),
				Expected: r.mc.describe(k, s.seen[i], s.seen[i] != nil) + " (as the same iterator showed it before)",
				Got:      r.mc.describe(k, val, present), Detail: "an iterator's view changed while it was open"}
		}
		return nil
	}
	s.seenSet[i] = true
	if present {
		s.seen[i] = append([]byte{}, val...)
	}
	return s.w.judge(s.op+" "+s.desc, k, s.expect(k), val, present)
}

// scan checks an iterator over a random window against the oracle views
// of its keys taken before and after the iterator was made (it reads at
// one sequence number, fixed then), walking it in both directions.
func (w *mergeWorker) scan(db mergeStore) *Divergence {
	r := w.r
	r.stats.scans.Add(1)
	n := r.p.Keys
	lo, hi := 0, n
	if n > 64 || w.rng.IntN(2) == 0 {
		width := 1 + w.rng.IntN(min(n, 64))
		lo = w.rng.IntN(n - width + 1)
		hi = lo + width
	}
	bounded := w.rng.IntN(3) != 0
	var opts *vigil.IterOptions
	if bounded {
		opts = &vigil.IterOptions{LowerBound: r.kc.key(lo), UpperBound: r.kc.key(hi)}
	}
	w.pre, w.post = growMergeViews(w.pre, hi-lo), growMergeViews(w.post, hi-lo)
	for k := lo; k < hi; k++ {
		r.or.view(k, &w.pre[k-lo])
	}
	it, err := db.NewIter(opts)
	for k := lo; k < hi; k++ {
		r.or.view(k, &w.post[k-lo])
	}
	if err != nil {
		if r.tolerate(err) {
			return nil
		}
		return &Divergence{Op: "NewIter", Got: err.Error()}
	}
	s := newMergeWalk(w, it, "scan", lo, hi, bounded || (lo == 0 && hi == n), func(k int) []mstate {
		return candidates(&w.pre[k-lo], &w.post[k-lo])
	})
	div := s.walk(false, true, 1+w.rng.IntN(2*(hi-lo)+1), 6)
	if cerr := it.Close(); div == nil && cerr != nil && !s.errSeen && !r.tolerate(cerr) {
		div = &Divergence{Op: "iterator Close", Got: cerr.Error()}
	}
	return div
}

func growMergeViews(v []mergeView, n int) []mergeView {
	if cap(v) < n {
		return make([]mergeView, n)
	}
	return v[:n]
}

// snapshotOp takes a snapshot of a small locked range, or checks and
// releases one taken earlier.
func (w *mergeWorker) snapshotOp(db mergeStore) *Divergence {
	r := w.r
	if len(w.snaps) > 0 && (len(w.snaps) >= 3 || w.rng.IntN(2) == 0) {
		i := w.rng.IntN(len(w.snaps))
		h := w.snaps[i]
		w.snaps = append(w.snaps[:i], w.snaps[i+1:]...)
		div := w.checkSnapshot(h)
		if err := h.s.Close(); err != nil && div == nil && !r.tolerate(err) {
			div = &Divergence{Op: "snapshot Close", Got: err.Error()}
		}
		return div
	}
	r.stats.snapshots.Add(1)
	lo, hi := w.rangeOf()
	keys := make([]int, 0, hi-lo)
	for k := lo; k < hi; k++ {
		keys = append(keys, k)
	}
	unlock := r.or.lock(keys)
	h := mergeSnapshot{lo: lo, hi: hi, states: make([][]mstate, hi-lo)}
	for k := lo; k < hi; k++ {
		var v mergeView
		r.or.view(k, &v)
		h.states[k-lo] = append([]mstate{v.hist[len(v.hist)-1]}, v.pending...)
	}
	h.s = db.NewSnapshot()
	unlock()
	w.snaps = append(w.snaps, h)
	return nil
}

// checkSnapshot reads a held snapshot's range with Get, with full scans
// in both directions and with a random walk that turns around: each key
// must hold the state it had when the snapshot was taken, however many
// writes, flushes and compactions came since.
func (w *mergeWorker) checkSnapshot(h mergeSnapshot) *Divergence {
	r := w.r
	expect := func(k int) []mstate { return h.states[k-h.lo] }
	for k := h.lo; k < h.hi; k++ {
		v, err := h.s.Get(r.kc.key(k))
		if err != nil && !errors.Is(err, vigil.ErrNotFound) {
			if r.tolerate(err) {
				return nil
			}
			return &Divergence{Op: "snapshot get", Key: r.kc.keyName(k), Got: "error: " + err.Error()}
		}
		if div := w.judge("snapshot get", k, expect(k), v, err == nil); div != nil {
			return div
		}
	}
	for _, mode := range []int{0, 1, 2} {
		it, err := h.s.NewIter(&vigil.IterOptions{LowerBound: r.kc.key(h.lo), UpperBound: r.kc.key(h.hi)})
		if err != nil {
			if r.tolerate(err) {
				return nil
			}
			return &Divergence{Op: "snapshot NewIter", Got: err.Error()}
		}
		s := newMergeWalk(w, it, "snapshot scan", h.lo, h.hi, true, expect)
		div := s.walk(mode < 2, mode == 0, 2*(h.hi-h.lo)+2, 4)
		if cerr := it.Close(); div == nil && cerr != nil && !s.errSeen && !r.tolerate(cerr) {
			div = &Divergence{Op: "snapshot iterator Close", Got: cerr.Error()}
		}
		if div != nil {
			return div
		}
	}
	return nil
}
