package skiplist

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Verify checks the whole list and returns the number of entries. It is the
// flush-side check: it walks level 0 and verifies that every link and length
// stays inside the arena, that keys strictly increase (full comparisons), that
// every back link names the node's predecessor, that the tail's back link
// names the last node, and that every upper level visits, in order, nodes of
// level 0 and ends at the tail (so it is strictly increasing and has no more
// nodes than level 0), and that every link summary of levels 1 and up is
// its target's (see summary.go). For each entry, in order, it calls fn (if
// not nil) with the key and value, stopping at the first error fn returns.
// A failed check returns an error wrapping ErrCorruption that names the
// keys and offsets involved.
//
// The upper levels are checked in the same walk: want[lvl] is the node the
// level-lvl chain names next, and when level 0 reaches it, its own level-lvl
// link becomes the next want. A chain that names anything but the level-0
// nodes after the last one it named, in order, is never reached again, and
// its want is not the tail at the end. Why one walk: a memtable far larger
// than the CPU caches costs a cache miss per node visited, and the separate
// walks of levels 1 and up visited as many nodes again: Validate of a 1M-
// entry random-order memtable took 660 ns an entry, 354 without them.
//
// Verify must not run concurrently with inserts: back links legitimately lag
// while an insert is in progress.
func (l *Skiplist) Verify(fn func(key, value []byte) error) (int, error) {
	h := int(l.height.Load())
	if h < 1 || h > l.maxHeight {
		return 0, fmt.Errorf("%w: skiplist height %d outside [1, %d]", ErrCorruption, h, l.maxHeight)
	}
	// want[lvl] is the node the level-lvl chain names next, and wantSum
	// the summary its link gave it.
	var want, wantSum [MaxHeight]uint32
	for lvl := 1; lvl < MaxHeight; lvl++ {
		w := l.loadLink(l.head, lvl)
		nx := uint32(w)
		if lvl >= h && nx != l.tail {
			return 0, fmt.Errorf("%w: skiplist level %d is above the list height %d but not empty", ErrCorruption, lvl, h)
		}
		if nx != l.tail && !l.inTower(nx) {
			return 0, l.linkError(l.head, nx, lvl)
		}
		want[lvl], wantSum[lvl] = nx, uint32(w>>32)
	}
	sp := l.sum.Load()
	n := 0
	var touch uint32
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
		// A node of height k is named by the chains of levels 1..k-1
		// and by no higher one: stop at the first level that does not
		// name it (a chain skipped this way is caught at the end).
		if h > 1 && want[1] == nd {
			if err := l.verifySummaries(sp, nd, h, &want, &wantSum); err != nil {
				return n, err
			}
		}
		for lvl := 1; lvl < h && want[lvl] == nd; lvl++ {
			w := l.loadLink(nd, lvl)
			nx := uint32(w)
			if nx != l.tail && !l.inTower(nx) {
				return n, l.linkError(nd, nx, lvl)
			}
			want[lvl], wantSum[lvl] = nx, uint32(w>>32)
		}
		// Level 0 is a chain of dependent loads: the next node's address
		// is known only once this node is in. The wants of levels 1 and
		// 2 are nodes some 2 and 4 ahead, known already: loading them
		// now overlaps their cache misses with the chain's (Validate of
		// the 1M random-order memtable: 370 -> ~310 ns an entry). Both
		// are the tail or checked in bounds.
		touch += *(*uint32)(unsafe.Add(l.base, want[1])) + *(*uint32)(unsafe.Add(l.base, want[2]))
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
	for lvl := 1; lvl < h; lvl++ {
		if want[lvl] != l.tail {
			return n, fmt.Errorf("%w: skiplist level %d names offset %d, which is not one of the level-0 nodes after the last one it named, in order (the level is out of order, or links outside the list)",
				ErrCorruption, lvl, want[lvl])
		}
	}
	touchSink.Store(touch)
	return n, nil
}

// verifySummaries checks the summaries that the links of levels 1 and up
// which name nd gave it: each must be 0 (written before the list chose its
// summary prefix, or nd's own summary is 0) or nd's summary under sp.
func (l *Skiplist) verifySummaries(sp *summaryPrefix, nd uint32, h int, want, wantSum *[MaxHeight]uint32) error {
	s, known := uint32(0), sp == nil
	for lvl := 1; lvl < h && want[lvl] == nd; lvl++ {
		got := wantSum[lvl]
		if got == 0 {
			continue
		}
		if !known {
			s, known = summaryOf(sp, l.userKeyAt(nd)), true // once a node, and only for a summary to check
		}
		if got != s {
			return fmt.Errorf("%w: skiplist link at level %d to key %s at offset %d carries summary %#x, but the key's summary is %#x",
				ErrCorruption, lvl, hexKey(l.keyAt(nd)), nd, got, s)
		}
	}
	return nil
}

// touchSink keeps the loads of Verify's look-ahead from being optimised
// away.
var touchSink atomic.Uint32

// yieldEvery is how many nodes Verify checks between yields of its
// processor. Verify runs on a flush goroutine over a whole memtable (a 64 MiB
// one takes 10-15 ms), and Go preempts a running goroutine only after 10 ms:
// on a 2-core machine a writer that became runnable meanwhile waited for
// it, which was the slowest write of a random fill (9-14 ms, seen in an
// execution trace). 1,024 nodes are some 20-50 µs of work.
const yieldEvery = 1024
