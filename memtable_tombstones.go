package vigil

import (
	"math/bits"

	"github.com/vigildb/vigil/internal/base"
)

// Range tombstones of a memtable, decoded and fragmented once.
//
// Without this, every Get and every new iterator walked all of a memtable's
// range tombstones (decoding each, checking its protection bytes, allocating
// the list): a memtable with thousands of DeleteRanges made every read
// thousands of times slower. RocksDB caches a fragmented list per memtable
// for the same reason.
//
// Concurrency and invariants. A cache is immutable once published through
// memTableEntry.tombs, and any number of readers use it at once. It records
// n, the value of memTableEntry.rangeDels read before its scan of the
// skiplist; a batch adds its tombstones to the skiplist before it counts
// them, and counts them before its seqnums are published. So a cache whose
// n equals the current count holds every tombstone a reader at a published
// snapshot can see (it may hold newer, unpublished ones too, which the
// snapshot filter drops). When the count has moved on, readers read the
// skiplist directly until log2(n) of them have found the cache stale, and
// the next one rebuilds it (see tombCache). The bounds are copies, not arena aliases: the cache was
// checked (order, protection bytes) when it was built, and a later bit flip
// in the arena cannot move a cached bound unchecked; flush still verifies the
// arena itself.
type memTombCache struct {
	n      int64
	maxSeq uint64
	// all holds every tombstone seen, in skiplist order.
	all []base.RangeTombstone
	// frags fragments all of them, for readers whose snapshot is at or
	// above maxSeq (the usual case: a read at the latest state).
	frags fragments
}

// memTombCacheMin is the tombstone count from which a memtable keeps a
// cache. Even at 4 tombstones a cached Get took 1 us against 3.4 us for the
// scan (BenchmarkGetRangeDels), so every memtable with tombstones keeps one
// (once a few reads have asked for it, see tombCache); the constant stays so
// that tests can see the threshold.
const memTombCacheMin = 1

// raiseTombCover is raiseCover over this memtable's tombstones: the larger
// of cover and the largest seq of a tombstone visible at snap that covers
// key. With a cache and a snapshot at or above every cached seq it is one
// binary search.
func (e *memTableEntry) raiseTombCover(key []byte, snap, cover uint64) (uint64, error) {
	c, err := e.tombCache()
	if err != nil {
		return 0, err
	}
	if c != nil && snap >= c.maxSeq {
		if s := c.frags.coverSeq(key); s > cover {
			cover = s
		}
		return cover, nil
	}
	var ts []base.RangeTombstone
	if c != nil {
		ts = c.all
	} else if ts, err = e.mt.RangeDels(snap); err != nil {
		return 0, err
	}
	return raiseCover(ts, key, snap, cover), nil
}

// tombCache returns a cache current with the tombstone count, building it
// if needed, or nil when the memtable has too few tombstones to keep one.
func (e *memTableEntry) tombCache() (*memTombCache, error) {
	n := e.rangeDels.Load()
	if n < memTombCacheMin {
		return nil, nil
	}
	if c := e.tombs.Load(); c != nil && c.n == n {
		return c, nil
	}
	// Stale or missing. A rebuild sorts every tombstone, about log2(n)
	// times the cost of the plain pass a read makes without a cache, so a
	// workload that adds a tombstone between every two reads would pay more
	// than it did with no cache at all. Reads take the plain pass until
	// that many have found the cache stale; then one rebuilds. This keeps
	// the worst case within about twice the uncached cost.
	if e.tombStale.Add(1) <= int64(bits.Len64(uint64(n))) {
		return nil, nil
	}
	e.tombStale.Store(0)
	ts, err := e.mt.RangeDels(base.SeqNumMax)
	if err != nil {
		return nil, err
	}
	c := &memTombCache{n: n, all: make([]base.RangeTombstone, len(ts))}
	// One allocation for all the copied bounds.
	size := 0
	for _, t := range ts {
		size += len(t.Start) + len(t.End)
	}
	buf := make([]byte, 0, size)
	for i, t := range ts {
		buf = append(buf, t.Start...)
		start := buf[len(buf)-len(t.Start):]
		buf = append(buf, t.End...)
		end := buf[len(buf)-len(t.End):]
		c.all[i] = base.RangeTombstone{Start: start[:len(start):len(start)], End: end[:len(end):len(end)], Seq: t.Seq}
		c.maxSeq = max(c.maxSeq, t.Seq)
	}
	c.frags = buildFragments(c.all, base.SeqNumMax)
	e.tombs.Store(c)
	return c, nil
}
