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
// the next one rebuilds it (see tombCache). The bounds are copies, not arena
// aliases: the cache was checked (order, protection bytes) when it was
// built, and a later bit flip in the arena cannot move a cached bound
// unchecked; flush still verifies the arena itself.
type memTombCache struct {
	n int64
	// all holds every tombstone seen, in skiplist order, and idx their
	// fragments.
	all []base.RangeTombstone
	idx tombIndex
}

// tombstones returns the memtable's range tombstones and, from the cache,
// their index; without a current cache, the tombstones visible at snap read
// from the skiplist and a nil index. The result must not be modified.
func (e *memTableEntry) tombstones(snap uint64) ([]base.RangeTombstone, *tombIndex, error) {
	c, err := e.tombCache()
	if err != nil {
		return nil, nil, err
	}
	if c != nil {
		return c.all, &c.idx, nil
	}
	ts, err := e.mt.RangeDels(snap)
	return ts, nil, err
}

// tombCache returns a cache current with the tombstone count, building it
// if needed, or nil when none is worth building yet.
func (e *memTableEntry) tombCache() (*memTombCache, error) {
	n := e.rangeDels.Load()
	if n == 0 {
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
	c := &memTombCache{n: n, all: ts, idx: newTombIndex(ts)}
	e.tombs.Store(c)
	return c, nil
}
