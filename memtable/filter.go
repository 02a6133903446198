package memtable

import (
	"sync"
	"sync/atomic"

	"github.com/vigildb/vigil/internal/manual"
	"github.com/zeebo/xxh3"
)

// filter is a blocked bloom filter over the user keys of a memtable's point
// entries (Set, Delete, Merge), so that a Get of a key the memtable does not
// hold, which after a random fill is nearly every Get, costs one cache line
// instead of a skiplist search: a full 64 MiB memtable is a search of some
// twenty levels, each a cache miss, 1-3 µs on the machines we measure.
// RocksDB has the same thing behind memtable_whole_key_filtering.
//
// Each key sets filterProbes bits in one 512-bit line picked by its hash.
// The key's hash is xxh3 of its bytes, the hash the tables' filters use:
// keys the comparer calls equal are the same bytes (base.Comparer).
//
// Concurrency: add is safe for concurrent use with itself and mayContain
// (bits are set with atomic ORs and read with atomic loads).
//
// Invariants: bits are only ever set, never cleared, while the memtable
// lives. A bit cleared by memory corruption could hide a key; that is why
// ParanoidMemoryChecks, which promises to find corruption instead of
// answering wrongly, has no filter (see Options.FilterBytes).
type filter struct {
	words    []uint64 // numLines lines of filterLineWords words
	numLines uint64
	manual   bool // words came from manual.AllocSlice
}

const (
	filterLineWords = 8 // 64-byte lines
	filterLineBits  = filterLineWords * 64
	// filterProbes: a memtable gets about 8 bits a key at the default
	// size (entries of ~130 bytes, 1/128 of the arena); 6 probes minimise
	// the false positives of a blocked filter there (~2.5 %).
	filterProbes = 6
)

// filterSize is the size of a filter of about n bytes: whole lines, at
// least one (0 for n <= 0: none).
func filterSize(n int) int {
	if n <= 0 {
		return 0
	}
	return max(1, n/(filterLineWords*8)) * filterLineWords * 8
}

// newFilter returns a filter of filterSize(n) bytes (n > 0), outside the
// Go heap if manualMem (free releases it).
func newFilter(n int, manualMem bool) *filter {
	lines := filterSize(n) / (filterLineWords * 8)
	f := &filter{numLines: uint64(lines), manual: manualMem}
	if manualMem {
		f.words = manual.AllocSlice[uint64](lines * filterLineWords)
	} else {
		f.words = make([]uint64, lines*filterLineWords)
	}
	return f
}

// free releases a manual filter's memory; nothing may use f afterwards.
func (f *filter) free() {
	if f != nil && f.manual {
		manual.FreeSlice(f.words)
		f.words = nil
	}
}

// filterHash is the hash the filter keeps of a user key.
func filterHash(userKey []byte) uint64 { return xxh3.Hash(userKey) }

// line returns the words of the line for hash h.
func (f *filter) line(h uint64) []uint64 {
	l := (uint64(uint32(h)) * f.numLines) >> 32
	return f.words[l*filterLineWords : (l+1)*filterLineWords : (l+1)*filterLineWords]
}

// touch loads a word of h's line and returns it (which means nothing): add
// calls it before the skiplist search so that the line is in the cache
// when add sets its bits.
func (f *filter) touch(h uint64) uint64 { return atomic.LoadUint64(&f.line(h)[0]) }

// add sets h's bits.
func (f *filter) add(h uint64) {
	line := f.line(h)
	var masks [filterLineWords]uint64
	hi := uint32(h >> 32)
	delta := hi>>17 | hi<<15
	for range filterProbes {
		bit := hi % filterLineBits
		masks[bit/64] |= 1 << (bit % 64)
		hi += delta
	}
	for i, m := range masks {
		if m != 0 && atomic.LoadUint64(&line[i])&m != m {
			atomic.OrUint64(&line[i], m)
		}
	}
}

// mayContain reports whether a key of hash h may have been added; false is
// certain.
func (f *filter) mayContain(h uint64) bool {
	line := f.line(h)
	hi := uint32(h >> 32)
	delta := hi>>17 | hi<<15
	for range filterProbes {
		bit := hi % filterLineBits
		if atomic.LoadUint64(&line[bit/64])&(1<<(bit%64)) == 0 {
			return false
		}
		hi += delta
	}
	return true
}

// filterBuildAfterGets is how many Gets of keys it does not hold a
// memtable answers by searching before it builds its filter.
const filterBuildAfterGets = 1024

// lazyFilter is a MemTable's filter over its life. It is built once Gets
// of keys the memtable does not hold come (filterBuildAfterGets of them),
// not from the first Add: keeping a filter up to date costs an insert
// 10-15 % (its lines, spread over the filter, push skiplist nodes out of
// the CPU caches), which a memtable that only takes writes, as in a bulk
// load, would pay for nothing; and a Get the filter passes pays a line
// more for nothing, which a memtable whose Gets find their keys, as one
// that holds the whole working set, would pay for every Get.
//
// The build: start publishes a new filter (f), from which moment every Add
// sets its key's bits after linking its entry; a goroutine then adds every
// entry already in the skiplist (MemTable.backfillFilter) and marks the
// filter ready. No entry is missed: an Add either sees f published (its
// load of f comes after its link) and sets its own bits, or linked its
// entry before f was published, and so before the walk began, which sees
// it. Get consults the filter only once it is ready; before that, and if
// the walk fails (an entry fails its protection check: a Get that
// searches reports it), it searches.
//
// Concurrency: every method is safe for concurrent use, but stop, which
// waits for the build's goroutine, must come after every other call has
// returned (MemTable.Release's contract).
type lazyFilter struct {
	bytes     int  // filterSize(Options.FilterBytes); 0: never built
	after     int  // Gets before the build (filterBuildAfterGets; tests set fewer)
	manualMem bool // allocate outside the Go heap
	f         atomic.Pointer[filter]
	ready     atomic.Bool
	searched  atomic.Int64 // Gets that searched without a ready filter and missed
	stopping  atomic.Bool  // stop was called: the walk gives up
	building  sync.WaitGroup
}

// forGet returns the filter if it is ready, else nil.
func (l *lazyFilter) forGet() *filter {
	if l.ready.Load() {
		return l.f.Load()
	}
	return nil
}

// missed counts a Get that searched without a ready filter and did not
// find its key, and reports whether it is the one that should start the
// build.
func (l *lazyFilter) missed() bool {
	return l.bytes > 0 && l.searched.Add(1) == int64(l.after)
}

// start publishes a new filter and backfills it on a goroutine of its own
// with backfill, which adds the entries already there and reports whether
// it added them all.
func (l *lazyFilter) start(backfill func(f *filter, stop *atomic.Bool) bool) {
	f := newFilter(l.bytes, l.manualMem)
	if !l.f.CompareAndSwap(nil, f) {
		f.free()
		return
	}
	l.building.Add(1)
	go func() {
		defer l.building.Done()
		if backfill(f, &l.stopping) {
			l.ready.Store(true)
		}
	}()
}

// stop waits for a build to end (making it give up) and frees the filter.
func (l *lazyFilter) stop() {
	l.stopping.Store(true)
	l.building.Wait()
	if f := l.f.Load(); f != nil {
		f.free()
	}
}
