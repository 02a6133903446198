package skiplist

// Insertion: tower heights, prepared nodes, the splice search and the
// bottom-up CAS linking, and the Inserter that remembers the last splice.

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sync/atomic"
	"unsafe"
)

// randomHeight draws a tower height with P(height >= k) = 2^-(k-1): one
// random word, one bit per level.
//
// Why 1/2 and not the 1/4 of LevelDB or the 1/e of Pebble: a search in a
// memtable larger than the CPU cache costs its cache misses, and with p =
// 1/2 the node a search stops before at one level is more often the one it
// compares first at the next level down, already loaded. Measured on 2^20
// db_bench entries (BenchmarkGet, BenchmarkInsert/random, 3-5 alternating
// runs): Get 5.07 -> 3.67 us and random insert 1.70 -> 1.39 us against
// p = 1/4, with 1/e in between. Upper links average 0.33 against 1 per
// node; with link summaries they are 8 bytes each, so p = 1/4 would save
// about 5 of the 149 bytes a db_bench entry takes, and it made
// BenchmarkGetShapes 27–43% slower on every shape (6 alternating runs).
func (l *Skiplist) randomHeight() int {
	h := 1 + bits.TrailingZeros64(rand.Uint64())
	if h > l.maxHeight {
		h = l.maxHeight
	}
	return h
}

// Pending is a node allocated in the arena but not linked into the list yet.
// The caller fills Key and Value in place (so an entry assembled from several
// parts needs no temporary copy) and then links it with Link or
// Inserter.Link. A Pending that is never linked wastes its arena bytes and is
// otherwise harmless.
type Pending struct {
	// Key and Value are the node's key and value bytes in the arena. Write
	// them completely before linking; never write them afterwards.
	Key, Value []byte
	off        uint32
	height     int
}

// Prepare allocates a node for a key and value of the given lengths. It fails
// with ErrArenaFull if the arena lacks room (nothing is consumed then), and
// with ErrInvalidArgument for negative lengths or, under InternalKeys, keys
// shorter than the 8-byte trailer.
func (l *Skiplist) Prepare(keyLen, valueLen int) (Pending, error) {
	if keyLen < 0 || valueLen < 0 {
		return Pending{}, fmt.Errorf("%w: negative key or value length", ErrInvalidArgument)
	}
	if l.internalKeys && keyLen < 8 {
		return Pending{}, fmt.Errorf("%w: internal key of %d bytes is shorter than its 8-byte trailer", ErrInvalidArgument, keyLen)
	}
	h := l.randomHeight()
	size := nodeSize(h, uint64(keyLen), uint64(valueLen))
	if size > uint64(len(l.buf)) {
		return Pending{}, fmt.Errorf("%w: entry of %d+%d bytes exceeds the arena capacity %d",
			ErrArenaFull, keyLen, valueLen, len(l.buf))
	}
	align := uint32(nodeAlign)
	if h > 1 {
		align = towerAlign
	}
	start, ok := l.arena.alloc(uint32(size), align)
	if !ok {
		return Pending{}, ErrArenaFull
	}
	off := start + uint32(h-1)*towerLink
	p := unsafe.Add(l.base, off)
	ks := int(off) + offKey
	if packed(uint64(keyLen), uint64(valueLen)) {
		*(*uint32)(unsafe.Add(p, offLens)) = uint32(keyLen)<<lensValBits | uint32(valueLen)
	} else {
		*(*uint32)(unsafe.Add(p, offLens)) = lensEscape
		*(*uint32)(unsafe.Add(p, offKeyLen)) = uint32(keyLen)
		*(*uint32)(unsafe.Add(p, offValLen)) = uint32(valueLen)
		ks = int(off) + escHeader
	}
	vs := ks + keyLen
	return Pending{
		Key:    l.buf[ks:vs:vs],
		Value:  l.buf[vs : vs+valueLen : vs+valueLen],
		off:    off,
		height: h,
	}, nil
}

// Add copies key and value into the arena and links them into the list. It
// returns ErrArenaFull if the arena is full and ErrRecordExists if an equal
// key is present (the node's arena bytes are then wasted). Safe for
// concurrent use.
func (l *Skiplist) Add(key, value []byte) error {
	p, err := l.Prepare(len(key), len(value))
	if err != nil {
		return err
	}
	copy(p.Key, key)
	copy(p.Value, value)
	return l.link(p, nil)
}

// Link links a prepared node into the list. See Add for the errors.
func (l *Skiplist) Link(p Pending) error { return l.link(p, nil) }

// splice is where a probe goes at one level: between prev and next, with
// nsum the summary the link prev→next holds (levels >= 1; 0 at level 0).
type splice struct{ prev, next, nsum uint32 }

// probe is what an insert's searches compare nodes with: the new key as
// prefix and trailer, its abbreviation pa, and the summary ps that searches
// of levels >= 1 compare link summaries with (noSummary when they must not:
// validating, or before the list has a summary prefix; see useSummary).
type probe struct {
	prefix  []byte
	trailer uint64
	pa      uint64
	ps      uint32

	sp     *summaryPrefix // the list's, when the insert began (nil: none)
	sum    uint32         // the key's summary under sp, once computed
	hasSum bool
}

// summary returns the key's summary under pr.sp (0 without one), which
// the links to the new node carry. It is computed on first use: an insert
// that neither searches above level 0 nor links there (most sequential
// inserts through an Inserter) needs none.
func (pr *probe) summary() uint32 {
	if !pr.hasSum {
		pr.hasSum = true
		if pr.sp != nil {
			pr.sum = summaryOf(pr.sp, pr.prefix)
		}
	}
	return pr.sum
}

// useSummary sets pr.ps for a search of levels >= 1.
func (pr *probe) useSummary(validate bool) {
	if pr.sp != nil && !validate {
		pr.ps = pr.summary()
	}
}

// spliceAt walks level lvl forward from start, which must sort before the
// probe, and returns the adjacent pair (prev, next) with prev < probe <= next.
// eq reports next == probe. bound is a node known to sort after the probe
// (the tail if none): reaching it ends the walk without a comparison. At
// levels >= 1 a link whose summary exceeds pr.ps ends it too. With validate
// it checks every link it moves along, and bounds.
func (l *Skiplist) spliceAt(pr *probe, lvl int, start, bound uint32, validate bool) (sp splice, eq bool, err error) {
	if l.order == orderUser {
		return l.spliceAtUser(pr, lvl, start, validate)
	}
	x := start
	xa := l.abbrevAt(x)
	for {
		nx, ns := l.loadStep(x, lvl)
		if ns > pr.ps {
			return splice{x, nx, ns}, false, nil
		}
		if nx == l.tail || nx == bound {
			return splice{x, nx, ns}, false, nil
		}
		if validate && !l.linkInBounds(nx, lvl) {
			return splice{}, false, l.linkError(x, nx, lvl)
		}
		na := l.abbrevAt(nx)
		var c int
		switch {
		case na < pr.pa:
			c = 1
		case na > pr.pa:
			c = -1
		default:
			if validate {
				if err := l.checkExtent(nx); err != nil {
					return splice{}, false, err
				}
			}
			c = l.cmpProbe(pr.prefix, pr.trailer, nx)
		}
		if c <= 0 {
			return splice{x, nx, ns}, c == 0, nil
		}
		if validate && x != l.head {
			if err := l.checkPair(x, xa, nx, na, "insert search"); err != nil {
				return splice{}, false, err
			}
		}
		x, xa = nx, na
	}
}

// findSplice computes the splice of every level from the top. eq reports an
// equal key in the list.
func (l *Skiplist) findSplice(pr *probe, spl *[MaxHeight]splice, validate bool) (eq bool, err error) {
	pr.useSummary(validate)
	x, bound := l.head, l.tail
	for lvl := int(l.height.Load()) - 1; lvl >= 0; lvl-- {
		sp, e, err := l.spliceAt(pr, lvl, x, bound, validate)
		if err != nil || e {
			return e, err
		}
		spl[lvl] = sp
		x, bound = sp.prev, sp.next
	}
	return false, nil
}

// link inserts the prepared node. With ins non-nil it starts from (and
// refreshes) the inserter's cached splice.
func (l *Skiplist) link(pn Pending, ins *Inserter) error {
	h := pn.height
	prefix, trailer, _ := l.splitProbe(pn.Key)
	// Field by field, not a composite literal: the compiler builds a literal
	// in a temporary and copies it with 16-byte loads that stall on the
	// 8-byte stores just made (store forwarding), ~15 ns on every insert.
	var pr probe
	pr.prefix, pr.trailer, pr.ps = prefix, trailer, noSummary
	if l.order == orderUser {
		pr.pa = l.userAbbrevOf(prefix) // what spliceAtUser and cmpProbeAbbrev compare
	} else {
		pr.pa = l.abbrevOf(prefix)
	}
	validate := l.validate
	if pn.off >= l.sumAt.Load() && l.sum.Load() == nil {
		l.pickSummaryPrefix(pn.off)
	}
	pr.sp = l.sum.Load()

	// Raise the list height first so that the search below fills the splice
	// of every level the new tower will occupy. New levels run head→tail.
	for {
		lh := l.height.Load()
		if int(lh) >= h || l.height.CompareAndSwap(lh, uint32(h)) {
			break
		}
	}

	var local [MaxHeight]splice
	spl := &local
	var eq bool
	var err error
	if ins != nil {
		spl = &ins.spl
		eq, err = ins.findSplice(&pr, validate)
	} else {
		eq, err = l.findSplice(&pr, spl, validate)
	}
	if err != nil || eq {
		if ins != nil {
			ins.height = 0
		}
		if err != nil {
			return err
		}
		return ErrRecordExists
	}

	if err := l.linkTower(pn, spl, &pr, validate); err != nil {
		if ins != nil {
			ins.height = 0
		}
		return err
	}
	return nil
}

// linkTower links node pn at every level of its tower, bottom-up, between
// the nodes of spl (found for its key), leaving spl naming pn as each
// level's predecessor for the next insert.
//
// Link bottom-up. The level-0 CAS publishes the node; its fields were
// written before and are never written again, so plain stores suffice
// for them and for the node's own links, which nobody can reach through
// level i before the level-i CAS.
//
//	before:  prev ──────────► next        after:  prev ──► nd ──► next
//	         prev ◄────────── next                prev ◄── nd ◄── next (level 0)
//
//	1. nd.next[i] = next (and nd.prev[0] = prev)
//	2. level 0 only: if next.prev[0] still names an older node although
//	   prev.next[0] == next, an earlier inserter has linked prev but not
//	   yet moved the back link: do it for them (CAS), so that step 4
//	   cannot race with their late back-link update.
//	3. CAS prev.next[i]: next → nd. On failure another node went in
//	   between: recompute the splice at this level from prev and retry.
//	4. level 0 only: CAS next.prev[0]: prev → nd. Failure is fine: a
//	   later inserter already helped (step 2 on their side) and moved it
//	   to nd or to a node after nd.
func (l *Skiplist) linkTower(pn Pending, spl *[MaxHeight]splice, pr *probe, validate bool) error {
	nd, h := pn.off, pn.height
	for i := 0; i < h; i++ {
		sp := spl[i]
		for {
			if l.testYield != nil {
				l.testYield()
			}
			if i == 0 {
				if l.checkNeigh != nil {
					if err := l.checkNeighbors(sp.prev, sp.next); err != nil {
						return err
					}
				}
				if l.link0(nd, sp.prev, sp.next) {
					break
				}
			} else {
				// The link to next moves to nd with its summary.
				*l.towerPtr(nd, i) = linkWord(sp.next, sp.nsum)
				if atomic.CompareAndSwapUint64(l.towerPtr(sp.prev, i), linkWord(sp.next, sp.nsum), linkWord(nd, pr.summary())) {
					break
				}
			}
			nsp, e, err := l.spliceAt(pr, i, sp.prev, l.tail, validate)
			if err == nil && e {
				if i == 0 {
					err = ErrRecordExists
				} else {
					// Level 0 holds nd, so no equal key can be linked anywhere;
					// finding one above means the list is damaged. nd stays
					// linked at the levels below i.
					err = fmt.Errorf("%w: skiplist key %s found twice (level %d) while linking it",
						ErrCorruption, hexKey(pn.Key), i)
				}
			}
			if err != nil {
				return err
			}
			sp = nsp
		}
		spl[i] = splice{nd, sp.next, sp.nsum}
	}
	return nil
}

// link0 tries to link nd between prev and next at level 0, steps 1 to 4
// of linkTower's comment; false means another node went in between.
func (l *Skiplist) link0(nd, prev, next uint32) bool {
	*l.next0Ptr(nd) = next
	*l.prevPtr(nd) = prev
	np := l.loadPrev(next)
	if np != prev && l.loadNext(prev, 0) == next {
		atomic.CompareAndSwapUint32(l.prevPtr(next), np, prev)
	}
	if !atomic.CompareAndSwapUint32(l.next0Ptr(prev), next, nd) {
		return false
	}
	if l.testYield != nil {
		l.testYield()
	}
	atomic.CompareAndSwapUint32(l.prevPtr(next), prev, nd)
	return true
}

// checkNeighbors runs Options.CheckNeighbor on the nodes a new node goes
// between at level 0 (sentinels excepted).
func (l *Skiplist) checkNeighbors(prev, next uint32) error {
	for _, x := range [2]uint32{prev, next} {
		if x == l.head || x == l.tail {
			continue
		}
		if !l.inBounds(x) {
			return l.linkError(prev, next, 0)
		}
		if err := l.checkExtent(x); err != nil {
			return err
		}
		if err := l.checkNeigh(l.keyAt(x), l.valueAt(x)); err != nil {
			return fmt.Errorf("%w: neighbour of an insert at offset %d: %w", ErrCorruption, x, err)
		}
	}
	return nil
}

// Inserter speeds up a run of inserts from one goroutine by remembering where
// the previous insert went: for keys that arrive in order (a sorted batch, a
// sequential load) the next splice is usually right there and no search from
// the top is needed. Its cache is only a starting point that is re-checked
// against the list, so concurrent inserts through other inserters are safe.
// An Inserter is used by one goroutine at a time. With a validating list the
// cache stays in use: a hit compares the probe with both cached neighbours,
// which proves their order, and the levels below are searched validated.
type Inserter struct {
	list   *Skiplist
	height uint32 // list height when the cache was filled; 0 = no cache
	spl    [MaxHeight]splice
}

// NewInserter returns an inserter for l.
func (l *Skiplist) NewInserter() *Inserter { return &Inserter{list: l} }

// Add is Skiplist.Add through the inserter's cache.
func (ins *Inserter) Add(key, value []byte) error {
	p, err := ins.list.Prepare(len(key), len(value))
	if err != nil {
		return err
	}
	copy(p.Key, key)
	copy(p.Value, value)
	return ins.list.link(p, ins)
}

// Link is Skiplist.Link through the inserter's cache.
func (ins *Inserter) Link(p Pending) error { return ins.list.link(p, ins) }

// cmpProbeAbbrev compares the probe with a node, abbreviation first (pa is
// abbrevOf(prefix)).
func (l *Skiplist) cmpProbeAbbrev(prefix []byte, trailer, pa uint64, off uint32) int {
	if l.order == orderUser {
		return l.cmpUserAbbrev(prefix, trailer, pa, off)
	}
	na := l.abbrevAt(off)
	switch {
	case na < pa:
		return 1
	case na > pa:
		return -1
	}
	return l.cmpProbe(prefix, trailer, off)
}

// findSplice fills ins.spl for the probe. It looks for the lowest cached level
// whose two nodes are still adjacent and bracket the probe, searches only the
// levels below it, and keeps the cached splices above (they bracket the probe
// too: cached splices are nested, each level's pair enclosing the one below).
// Otherwise it searches from the top.
func (ins *Inserter) findSplice(pr *probe, validate bool) (eq bool, err error) {
	l := ins.list
	lh := l.height.Load()
	start, bound, startLvl := l.head, l.tail, int(lh)
	if ins.height == lh {
		for lvl := 0; lvl < int(lh); lvl++ {
			s := ins.spl[lvl]
			if l.loadNext(s.prev, lvl) != s.next {
				continue // nodes went in between; a wider level may still do
			}
			if validate {
				// Cached offsets were bounds-checked when first read, but
				// the lengths behind them are read again now.
				for _, nd := range [2]uint32{s.prev, s.next} {
					if nd != l.head && nd != l.tail {
						if err := l.checkExtent(nd); err != nil {
							ins.height = 0
							return false, err
						}
					}
				}
			}
			if s.prev != l.head && l.cmpProbeAbbrev(pr.prefix, pr.trailer, pr.pa, s.prev) <= 0 {
				break // probe at or before the splice: full search
			}
			if s.next != l.tail {
				c := l.cmpProbeAbbrev(pr.prefix, pr.trailer, pr.pa, s.next)
				if c == 0 {
					return true, nil
				}
				if c > 0 {
					break // probe after the splice: full search
				}
			}
			start, bound, startLvl = s.prev, s.next, lvl+1
			// Level lvl itself is still exact.
			break
		}
	}
	ins.height = lh
	if startLvl == int(lh) {
		start, bound = l.head, l.tail
	}
	if startLvl > 1 {
		pr.useSummary(validate)
	}
	for lvl := startLvl - 1; lvl >= 0; lvl-- {
		sp, e, err := l.spliceAt(pr, lvl, start, bound, validate)
		if err != nil || e {
			return e, err
		}
		ins.spl[lvl] = sp
		start, bound = sp.prev, sp.next
	}
	return false, nil
}
