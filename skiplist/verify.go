package skiplist

import (
	"fmt"
	"runtime"
)

// Verify checks the whole list and returns the number of entries. It is the
// flush-side check: it walks level 0 and verifies that every link and length
// stays inside the arena, that keys strictly increase (full comparisons), that
// every back link names the node's predecessor, that the tail's back link
// names the last node, and that every upper level is strictly increasing,
// ends at the tail and has no more nodes than level 0. For each entry, in
// order, it calls fn (if not nil) with the key and value, stopping at the
// first error fn returns. A failed check returns an error wrapping
// ErrCorruption that names the keys and offsets involved.
//
// Verify must not run concurrently with inserts: back links legitimately lag
// while an insert is in progress.
func (l *Skiplist) Verify(fn func(key, value []byte) error) (int, error) {
	n := 0
	prev := l.head
	for {
		nd := l.loadNext(prev, 0)
		if nd == l.tail {
			break
		}
		if !l.inBounds(nd) {
			return n, l.linkError(prev, nd, 0)
		}
		if err := l.checkExtent(nd); err != nil {
			return n, err
		}
		if prev != l.head && l.Compare(l.keyAt(prev), l.keyAt(nd)) >= 0 {
			return n, l.orderError(prev, nd, "verify level 0")
		}
		if p := l.loadPrev(nd); p != prev {
			return n, fmt.Errorf("%w: skiplist back link of key %s at offset %d names offset %d, but its predecessor is at offset %d",
				ErrCorruption, hexKey(l.keyAt(nd)), nd, p, prev)
		}
		if fn != nil {
			if err := fn(l.keyAt(nd), l.valueAt(nd)); err != nil {
				return n, err
			}
		}
		if n++; n%yieldEvery == 0 {
			runtime.Gosched()
		}
		prev = nd
	}
	if p := l.loadPrev(l.tail); p != prev {
		return n, fmt.Errorf("%w: skiplist tail back link names offset %d, but the last node is at offset %d",
			ErrCorruption, p, prev)
	}
	h := int(l.height.Load())
	if h < 1 || h > l.maxHeight {
		return n, fmt.Errorf("%w: skiplist height %d outside [1, %d]", ErrCorruption, h, l.maxHeight)
	}
	for lvl := 1; lvl < MaxHeight; lvl++ {
		x, count := l.head, 0
		for {
			nx := l.loadNext(x, lvl)
			if nx == l.tail {
				break
			}
			if lvl >= h {
				return n, fmt.Errorf("%w: skiplist level %d is above the list height %d but not empty", ErrCorruption, lvl, h)
			}
			if !l.inBounds(nx) {
				return n, l.linkError(x, nx, lvl)
			}
			if err := l.checkExtent(nx); err != nil {
				return n, err
			}
			if x != l.head && l.Compare(l.keyAt(x), l.keyAt(nx)) >= 0 {
				return n, l.orderError(x, nx, fmt.Sprintf("verify level %d", lvl))
			}
			if count++; count > n {
				return n, fmt.Errorf("%w: skiplist level %d has more nodes than level 0 (%d)", ErrCorruption, lvl, n)
			}
			if count%yieldEvery == 0 {
				runtime.Gosched()
			}
			x = nx
		}
	}
	return n, nil
}

// yieldEvery is how many nodes Verify checks between yields of its
// processor. Verify runs on a flush goroutine over a whole memtable (a 64 MiB
// one takes 10-15 ms), and Go preempts a running goroutine only after 10 ms:
// on a 2-core machine a writer that became runnable meanwhile waited for
// it, which was the slowest write of a random fill (9-14 ms, seen in an
// execution trace). 1,024 nodes are some 20-50 µs of work.
const yieldEvery = 1024
