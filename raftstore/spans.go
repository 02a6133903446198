package raftstore

import (
	"slices"
	"sort"
)

// indexSpans tracks which log indexes are stored, so that the store knows
// its first and last index after a write without reading the DB (a read
// right after a range deletion makes Vigil rebuild the memtable's
// range-tombstone index, which is what a DeleteRange-heavy workload would
// pay for on every call).
//
// It is a sorted list of disjoint spans [lo, hi] whose ends are always
// stored entries. A span written through the store is exact: every index
// in it is stored. The log found at Open is one span that is not exact (it
// may have holes); when a write cuts such a span, the new end is looked up
// in the DB (resolve) — before the write, which does not change what lies
// outside the indexes it touches. Raft's logs have no holes, so after the
// first compaction following a restart no lookup is ever needed again.
type indexSpans struct {
	s []span
}

type span struct {
	lo, hi uint64
	exact  bool
}

// resolveFunc returns the stored index nearest to from, at or above it
// (forward) or at or below it; the caller knows one exists within the span
// being cut.
type resolveFunc func(from uint64, forward bool) (uint64, error)

// spanEdit replaces s[i:j] by repl[:n].
type spanEdit struct {
	i, j int
	repl [3]span
	n    int
}

// bounds returns the first and last stored index (0, 0 when empty).
func (x *indexSpans) bounds() (first, last uint64) {
	if len(x.s) == 0 {
		return 0, 0
	}
	return x.s[0].lo, x.s[len(x.s)-1].hi
}

// overlap returns the range of spans that intersect [a, b].
func (x *indexSpans) overlap(a, b uint64) (i, j int) {
	i = sort.Search(len(x.s), func(k int) bool { return x.s[k].hi >= a })
	j = sort.Search(len(x.s), func(k int) bool { return x.s[k].lo > b })
	return i, max(i, j)
}

// cut returns what remains of the spans s[i:j] outside [a, b]: a left piece
// below a and a right piece above b.
func (x *indexSpans) cut(i, j int, a, b uint64, resolve resolveFunc) (left, right span, hasLeft, hasRight bool, err error) {
	if i == j {
		return
	}
	if l := x.s[i]; l.lo < a {
		hasLeft = true
		left = span{lo: l.lo, hi: a - 1, exact: l.exact}
		if !l.exact {
			if left.hi, err = resolve(a-1, false); err != nil {
				return
			}
			left.exact = left.lo == left.hi
		}
	}
	if r := x.s[j-1]; r.hi > b {
		hasRight = true
		right = span{lo: b + 1, hi: r.hi, exact: r.exact}
		if !r.exact {
			if right.lo, err = resolve(b+1, true); err != nil {
				return
			}
			right.exact = right.lo == right.hi
		}
	}
	return
}

// planRemove plans the removal of [a, b].
func (x *indexSpans) planRemove(a, b uint64, resolve resolveFunc) (spanEdit, error) {
	i, j := x.overlap(a, b)
	e := spanEdit{i: i, j: j}
	left, right, hasLeft, hasRight, err := x.cut(i, j, a, b, resolve)
	if err != nil {
		return e, err
	}
	if hasLeft {
		e.repl[e.n] = left
		e.n++
	}
	if hasRight {
		e.repl[e.n] = right
		e.n++
	}
	return e, nil
}

// planAdd plans the addition of the exact span [a, b], merged with the exact
// spans it overlaps or touches.
func (x *indexSpans) planAdd(a, b uint64, resolve resolveFunc) (spanEdit, error) {
	i, j := x.overlap(a, b)
	left, right, hasLeft, hasRight, err := x.cut(i, j, a, b, resolve)
	if err != nil {
		return spanEdit{}, err
	}
	mid := span{lo: a, hi: b, exact: true}
	if hasLeft && left.exact && left.hi+1 == a {
		mid.lo, hasLeft = left.lo, false
	}
	if hasRight && right.exact && b+1 == right.lo {
		mid.hi, hasRight = right.hi, false
	}
	// Exact neighbours that only touch [a, b].
	if i > 0 && !hasLeft && x.s[i-1].exact && x.s[i-1].hi+1 == mid.lo {
		i--
		mid.lo = x.s[i].lo
	}
	if j < len(x.s) && !hasRight && x.s[j].exact && mid.hi+1 == x.s[j].lo {
		mid.hi = x.s[j].hi
		j++
	}
	e := spanEdit{i: i, j: j}
	if hasLeft {
		e.repl[e.n] = left
		e.n++
	}
	e.repl[e.n] = mid
	e.n++
	if hasRight {
		e.repl[e.n] = right
		e.n++
	}
	return e, nil
}

func (x *indexSpans) apply(e spanEdit) {
	repl := e.repl[:e.n]
	if e.i == 0 && e.n <= e.j {
		// A prefix (raft's log compaction): reslice instead of shifting
		// the rest.
		copy(x.s[e.j-e.n:e.j], repl)
		x.s = x.s[e.j-e.n:]
		return
	}
	x.s = slices.Replace(x.s, e.i, e.j, repl...)
}

// add records the exact span [a, b].
func (x *indexSpans) add(a, b uint64, resolve resolveFunc) error {
	e, err := x.planAdd(a, b, resolve)
	if err == nil {
		x.apply(e)
	}
	return err
}

func (x *indexSpans) clone() indexSpans { return indexSpans{s: slices.Clone(x.s)} }
