package stress

import (
	"fmt"

	"github.com/vigildb/vigil"
)

// scan checks an iterator over a window [lo, hi) of the key space. Oracle
// views of every key in the window are taken before and after the
// iterator is created (it reads at one sequence number, fixed then), so
// each key's result is judged like a Get's. The walk starts at First,
// Last, SeekGE or SeekLT, moves up to 2×width steps with Next and Prev
// (turning around now and then), and checks, at every position, the key's
// value, that every key skipped over was absent, and that a key seen
// twice looked the same both times.
func (w *worker) scan(db store) *Divergence {
	r := w.r
	r.stats.scans.Add(1)
	n := r.plan.Keys
	var lo, hi int
	if n <= 256 && w.rng.IntN(2) == 0 {
		lo, hi = 0, n
	} else {
		width := 1 + w.rng.IntN(min(n, 200))
		lo = w.rng.IntN(n - width + 1)
		hi = lo + width
	}
	bounded := w.rng.IntN(3) != 0
	var opts *vigil.IterOptions
	if bounded {
		opts = &vigil.IterOptions{LowerBound: r.kc.key(lo), UpperBound: r.kc.key(hi)}
	}
	width := hi - lo
	w.pre = growViews(w.pre, width)
	w.post = growViews(w.post, width)
	if cap(w.seen) < width {
		w.seen = make([]kstate, width)
		w.seenSet = make([]bool, width)
	}
	w.seen, w.seenSet = w.seen[:width], w.seenSet[:width]
	clear(w.seenSet)
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
	sc := &scanCheck{w: w, it: it, lo: lo, hi: hi, bounded: bounded || (lo == 0 && hi == n)}
	div := sc.walk()
	cerr := it.Close()
	if div != nil {
		return div
	}
	if cerr != nil && !sc.errSeen && !r.tolerate(cerr) {
		return &Divergence{Op: "iterator Close", Got: cerr.Error()}
	}
	return nil
}

func growViews(v []keyView, n int) []keyView {
	if cap(v) < n {
		return make([]keyView, n)
	}
	return v[:n]
}

// scanCheck walks one iterator over [lo, hi).
type scanCheck struct {
	w       *worker
	it      iterator
	lo, hi  int
	bounded bool // nothing outside [lo, hi) can appear (bounds set, or the window is the key space)
	pos     int  // current key, valid after a successful positioning
	errSeen bool
	desc    string // the moves so far, for reports
}

func (s *scanCheck) walk() *Divergence {
	w := s.w
	width := s.hi - s.lo
	var ok bool
	var from int // first key that must be accounted for
	forward := true
	switch x := w.rng.IntN(4); {
	case x == 0 && s.bounded:
		s.desc = "First"
		ok, from = s.it.First(), s.lo
	case x == 1 && s.bounded:
		s.desc = "Last"
		ok, from, forward = s.it.Last(), s.hi-1, false
	case x == 2:
		t := s.lo + w.rng.IntN(width+1)
		s.desc = fmt.Sprintf("SeekLT(%d)", t)
		ok, from, forward = s.it.SeekLT(w.r.kc.key(t)), t-1, false
	default:
		t := s.lo + w.rng.IntN(width+1)
		s.desc = fmt.Sprintf("SeekGE(%d)", t)
		ok, from = s.it.SeekGE(w.r.kc.key(t)), t
	}
	steps := 1 + w.rng.IntN(2*width+1)
	for i := 0; ; i++ {
		cont, div := s.land(ok, from, forward)
		if div != nil || !cont || i == steps {
			return div
		}
		if w.rng.IntN(8) == 0 {
			forward = !forward
		}
		if forward {
			s.desc += " Next"
			ok, from = s.it.Next(), s.pos+1
		} else {
			s.desc += " Prev"
			ok, from = s.it.Prev(), s.pos-1
		}
	}
}

// land checks a positioning that moved in direction forward and had to
// account for every key from `from` on (inclusive) up to where it landed.
// It returns whether the walk can go on.
func (s *scanCheck) land(ok bool, from int, forward bool) (bool, *Divergence) {
	w := s.w
	r := w.r
	if !ok {
		if err := s.it.Error(); err != nil {
			s.errSeen = true
			if r.tolerate(err) {
				return false, nil
			}
			return false, &Divergence{Op: "scan " + s.desc, Got: "error: " + err.Error()}
		}
		// Exhausted: every key from `from` to the window's edge is absent.
		if forward {
			return false, s.absent(from, s.hi-1)
		}
		return false, s.absent(s.lo, from)
	}
	k, err := r.kc.decode(s.it.Key())
	if err != nil {
		r.flips.noteMissed()
		return false, &Divergence{Op: "scan " + s.desc, Key: fmt.Sprintf("%q", s.it.Key()), Got: "a key the runner never wrote", Detail: err.Error()}
	}
	if k < s.lo || k >= s.hi {
		if s.bounded {
			return false, &Divergence{Op: "scan " + s.desc, Key: r.kc.keyName(k), Got: "a key outside the iterator's bounds",
				Detail: fmt.Sprintf("bounds [%s, %s)", r.kc.keyName(s.lo), r.kc.keyName(s.hi))}
		}
		// Left the window: the keys up to its edge were absent, and the
		// key must lie beyond that edge.
		if forward && k >= s.hi {
			return false, s.absent(from, s.hi-1)
		}
		if !forward && k < s.lo {
			return false, s.absent(s.lo, from)
		}
		return false, &Divergence{Op: "scan " + s.desc, Key: r.kc.keyName(k), Got: "a key in the wrong direction",
			Detail: fmt.Sprintf("moving %s from %d", dir(forward), from)}
	}
	if (forward && k < from) || (!forward && k > from) {
		return false, &Divergence{Op: "scan " + s.desc, Key: r.kc.keyName(k), Got: "a key out of order",
			Detail: fmt.Sprintf("moving %s, the next key must be %s %s", dir(forward), map[bool]string{true: ">=", false: "<="}[forward], r.kc.keyName(from))}
	}
	if forward {
		if div := s.absent(from, k-1); div != nil {
			return false, div
		}
	} else if div := s.absent(k+1, from); div != nil {
		return false, div
	}
	got, derr := w.observe(k, s.it.Value(), nil)
	if derr != nil {
		r.flips.noteMissed()
		return false, &Divergence{Op: "scan " + s.desc, Key: r.kc.keyName(k), Got: "a wrong value", Detail: derr.Error()}
	}
	if div := s.seeState(k, got); div != nil {
		return false, div
	}
	s.pos = k
	return true, nil
}

func dir(forward bool) string {
	if forward {
		return "forward"
	}
	return "backward"
}

// absent checks that every key in [a, b] may be absent.
func (s *scanCheck) absent(a, b int) *Divergence {
	for k := max(a, s.lo); k <= min(b, s.hi-1); k++ {
		if div := s.seeState(k, kstate{del: true}); div != nil {
			return div
		}
	}
	return nil
}

// seeState judges one key's observed state and checks it against earlier
// observations by the same iterator.
func (s *scanCheck) seeState(k int, got kstate) *Divergence {
	w := s.w
	i := k - s.lo
	if w.seenSet[i] {
		if !w.seen[i].same(got) {
			return &Divergence{Op: "scan " + s.desc, Key: w.r.kc.keyName(k), Expected: w.seen[i].String() + " (as the same iterator saw it before)",
				Got: got.String(), Detail: "an iterator's view changed while it was open"}
		}
		return nil
	}
	w.seenSet[i], w.seen[i] = true, got
	if div := w.judge("scan "+s.desc, k, &w.pre[i], &w.post[i], got); div != nil {
		return div
	}
	return nil
}
