package rangedel

import (
	"math/bits"
	"sync/atomic"

	"github.com/vigildb/vigil/internal/base"
)

// Cache holds the tombstones of a source that keeps growing (a memtable),
// copied and indexed once per tombstone count.
//
// Without it, every Get and every new iterator would walk all of a
// memtable's tombstones (decoding each, checking its protection bytes,
// allocating the list): a memtable with thousands of DeleteRanges made
// every read thousands of times slower. RocksDB caches a fragmented list
// per memtable for the same reason.
//
// Concurrency and invariants. A cached set is immutable once published and
// any number of readers use it at once. It records n, the source's
// tombstone count read before the source was scanned; a writer adds its
// tombstones to the source before it counts them, and counts them before
// their seqnums are published. So a set whose n equals the current count
// holds every tombstone a reader at a published snapshot can see (it may
// hold newer, unpublished ones too, which the snapshot filter drops). When
// the count has moved on, readers read the source directly until log2(n)
// of them have found the cache stale, and the next one rebuilds it. The
// bounds are copies, not aliases of the source's memory: the set was
// checked when it was built (order, protection bytes), and a later bit flip
// in the source cannot move a cached bound unchecked.
type Cache struct {
	cur atomic.Pointer[cached]
	// stale counts reads that found cur stale or missing since the last
	// rebuild.
	stale atomic.Int64
}

type cached struct {
	n   int64
	all []Tombstone
	idx Index
}

// Source is what a Cache caches: RangeDels(snap) returns the source's
// tombstones visible at snap, in a slice the caller may keep and modify
// (its bounds may alias the source's memory).
type Source interface {
	RangeDels(snap uint64) ([]Tombstone, error)
}

// Get returns the source's tombstones and their index if the cache is
// current with n, the number of tombstones the source holds now, building
// it from src when it is missing or stale and enough reads have found it
// so (the index in cmp's order). ok is false when the caller should read
// the source directly this time. The result must not be modified. (An interface, not a closure: a
// read through the cache allocates nothing.)
func (c *Cache) Get(cmp *base.Comparer, n int64, src Source) (all []Tombstone, idx *Index, ok bool, err error) {
	if n == 0 {
		return nil, nil, false, nil
	}
	if x := c.cur.Load(); x != nil && x.n == n {
		return x.all, &x.idx, true, nil
	}
	// Stale or missing. A rebuild sorts every tombstone, about log2(n)
	// times the cost of the plain pass a read makes without a cache, so a
	// workload that adds a tombstone between every two reads would pay more
	// than it did with no cache at all. Reads take the plain pass until
	// that many have found the cache stale; then one rebuilds. This keeps
	// the worst case within about twice the uncached cost.
	if c.stale.Add(1) <= int64(bits.Len64(uint64(n))) {
		return nil, nil, false, nil
	}
	c.stale.Store(0)
	ts, err := src.RangeDels(base.SeqNumMax)
	if err != nil {
		return nil, nil, false, err
	}
	// ts is ours: point its bounds at copies, one allocation for all.
	size := 0
	for _, t := range ts {
		size += len(t.Start) + len(t.End)
	}
	buf := make([]byte, 0, size)
	for i, t := range ts {
		buf = append(buf, t.Start...)
		buf = append(buf, t.End...)
		end := len(buf)
		mid := end - len(t.End)
		start := mid - len(t.Start)
		ts[i].Start, ts[i].End = buf[start:mid:mid], buf[mid:end:end]
	}
	x := &cached{n: n, all: ts, idx: NewIndex(cmp, ts)}
	c.cur.Store(x)
	return x.all, &x.idx, true, nil
}
