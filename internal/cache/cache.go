// Package cache is the block cache shared by every open SST of a DB: a
// fixed-capacity, sharded CLOCK cache of decompressed blocks keyed by
// (cache id, block offset).
//
// # Why CLOCK and not LRU
//
// A hit is by far the most frequent operation, and under LRU every hit moves
// the entry to the front of a list, which needs the shard's exclusive lock.
// CLOCK (second chance) only sets a "referenced" bit on a hit, so hits take
// the shard's read lock and run in parallel; eviction, done under the write
// lock by Set, sweeps a hand round a ring of entries, clearing referenced
// bits and evicting the first entry whose bit is already clear. Its hit rate
// is close to LRU's on block-cache workloads (Pebble and RocksDB both moved
// from LRU to CLOCK variants for the same contention reason).
//
// # Values and lifetimes
//
// A cached value is a block's decompressed bytes and a 64-bit checksum of
// them, which the SST reader re-verifies on every hit when paranoid cache
// checks are on (this catches memory corruption of a long-lived cached block,
// the failure Pebble issue #6175 describes). The bytes live outside the Go
// heap, in the cache's manual.Allocator (a slab allocator over anonymous
// mmap), so a cache of N bytes costs N bytes of memory, not the up to 2N
// that garbage-collector pacing lets a heap of dead blocks grow to, and an
// evicted block's memory is reused or returned to the OS at once.
//
// So values are reference counted, and the counts are exact:
//
//   - Alloc returns a Handle holding the only reference to a new buffer; the
//     caller fills it and may publish it with Set, which adds the cache's own
//     reference (or none, if the block is too large to cache, or if its
//     shard is full and turns it away: see Admission).
//   - Get returns a Handle holding a new reference (one atomic increment,
//     under the shard's read lock, while the cache's reference is still held,
//     so a count never rises from zero).
//   - Eviction, replacement by Set, Delete, EvictFile and SetCapacity drop
//     the cache's reference, after unlinking the entry under the write lock,
//     so no Get can find it any more.
//   - Handle.Release drops the holder's reference; the last one frees the
//     buffer. A holder must release exactly once and not touch the bytes
//     after: a block evicted while it is read stays intact until then, and
//     its memory is never handed to anyone else before.
//
// # Admission
//
// A shard with room takes every block. A full one takes a block only if it
// turned the same block away lately (see doorkeeper): one read once is
// used and freed by its reader instead of evicting a block as likely to
// be read again. So reads spread over a DB many times the cache pay no
// eviction for most misses, and one pass of a scan cannot flush the cache.
//
// Blocks are immutable once published: the cache never writes into a
// buffer. The one exception is ForEachBlock, which exists so a stress
// test can flip bits in cached blocks.
//
// In invariants builds (go test -tags invariants) a freed buffer is poisoned
// and made inaccessible (see manual.Allocator), Handle.Data and Sum panic on
// a released handle, and Set panics on a handle already published. In every
// build, a Release after the block was freed panics (the Handle's entry
// generation has moved on). A Handle released twice while others still
// hold the block is not caught: its second Release takes one of their
// references, as it did before entries were reused.
//
// # Concurrency
//
// A *Cache is safe for concurrent use by any number of goroutines. Each shard
// has its own reader/writer lock (an rwLock: a sync.RWMutex that spins
// briefly before it blocks); Get takes it shared, Set / Delete / EvictFile
// take it exclusive. The last Release of a block frees it on the releasing
// goroutine, outside any shard lock when possible. Metrics are read with
// atomics and are not a consistent snapshot across shards. A Handle is
// owned by one goroutine at a time (it may be passed on); its Data may be
// read by any number of goroutines while it is held.
//
// A nil *Cache is valid and caches nothing: New(0) returns nil, Get always
// misses, Set does nothing, and Alloc returns Go heap buffers that Release
// leaves to the collector. Callers need no "is there a cache" branches.
package cache

import (
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/vigildb/vigil/internal/invariants"
	"github.com/vigildb/vigil/internal/manual"
)

// EntryOverhead is the number of bytes charged against the capacity for each
// cached block on top of the memory its buffer takes (its slab slot, at
// most 1/16 more than its length above 1 KiB): the entry struct and its table
// slot. It keeps a cache of many tiny blocks from using far more memory
// than its capacity says.
const EntryOverhead = 128

// minShardCapacity is the smallest capacity a shard is given; small caches
// use fewer shards rather than shards too small to hold a block.
const minShardCapacity = 1 << 20

// Metrics are counters of a cache since it was created.
type Metrics struct {
	Capacity int64 // bytes, as given to New or SetCapacity
	Size     int64 // bytes charged now (buffer sizes + EntryOverhead each)
	Count    int64 // blocks cached now
	Hits     int64 // Get calls that found the block
	Misses   int64 // Get calls that did not
	// Rejected counts the blocks Set did not cache because their shard was
	// full and they had not been offered lately (see doorkeeper).
	Rejected int64
	// Mapped is the memory the cache's allocator has mapped from the OS
	// (outside the Go heap): cached blocks, blocks evicted but still held
	// by readers, buffers being filled, and the allocator's free slots and
	// spare chunks.
	Mapped int64
	// InUse is the part of Mapped in live buffers (cached or held).
	InUse int64
}

// String renders the metrics on one line, for logs and the DB's metrics.
func (m Metrics) String() string {
	hitRate := 0.0
	if t := m.Hits + m.Misses; t > 0 {
		hitRate = 100 * float64(m.Hits) / float64(t)
	}
	return fmt.Sprintf("block cache: %d/%d bytes, %d blocks, %d hits, %d misses (%.1f%% hit rate), %d not admitted, %d bytes mapped",
		m.Size, m.Capacity, m.Count, m.Hits, m.Misses, hitRate, m.Rejected, m.Mapped)
}

type key struct {
	id, offset uint64
}

// entry is one block buffer and its reference count. buf is set
// by Alloc and immutable; key, sum, charge and cached are written by Set
// before the entry is published in a shard's table (while only the Alloc
// caller can see it) and immutable after, so a Get under the read lock
// never sees a torn value (Set replaces a whole entry rather than mutating
// one); prev/next belong to the shard's ring and are only touched under the
// shard's write lock; referenced is written by Get under the read lock,
// hence atomic. refs counts the Handles not yet released plus one while the
// entry is in a shard (cached); at zero the buffer is freed and the entry
// goes back to entryPool for the next Alloc, its generation advanced. A
// Handle carries the generation it was made in, and Release checks it: a
// Handle whose block was freed since (released already, or a copy of one)
// panics instead of reaching the count of the block that reuses its entry.
//
// Why reuse entries: most misses on a DB larger than the cache are blocks
// the cache turns away (see doorkeeper), so their entries would die at
// once, beside the long-lived entries of cached blocks. Allocated afresh,
// they left the collector's spans of entries sparsely used, and the next
// phase of a run (seeks after Gets) mapped new memory for its own objects:
// 3 MB more peak RSS in a 10M-key read run.
type entry struct {
	key        key
	buf        manual.Buf // a manual.HeapBuf for a nil cache's Go heap buffer
	sum        uint64
	charge     int64
	refs       atomic.Int32
	referenced atomic.Bool
	cached     bool // Set published it (whether or not it is still cached)
	prev, next *entry
	gen        atomic.Uint32 // advanced each time the entry is freed
}

// entryPool holds freed entries for Alloc.
var entryPool = sync.Pool{New: func() any { return new(entry) }}

func (e *entry) release() {
	switch n := e.refs.Add(-1); {
	case n == 0:
		e.buf.Free()
		e.key, e.buf, e.sum, e.charge, e.cached = key{}, manual.Buf{}, 0, 0, false
		e.referenced.Store(false)
		e.prev, e.next = nil, nil
		e.gen.Add(1)
		entryPool.Put(e)
	case n < 0:
		panic("cache: block released more times than it was referenced")
	}
}

// live panics if h's entry was freed since h was made (a use after
// release: the entry may hold another block now).
func (h Handle) live(what string) {
	if h.e.gen.Load() != h.gen {
		panic("cache: " + what + " of a released block (use after release)")
	}
}

// Handle is a reference to a block buffer: one from Alloc, or a cached
// block from Get. The bytes stay valid and unchanged until Release, which
// must be called exactly once; the zero Handle is empty (Valid is false,
// Release does nothing). A Handle is two words: pass it by value, but
// release only one copy (a Release after the block was freed panics).
type Handle struct {
	e   *entry
	gen uint32 // e's generation when the Handle was made
}

// Valid reports whether h refers to a block.
func (h Handle) Valid() bool { return h.e != nil }

// Data returns the block's bytes, valid until Release. They must not be
// modified once the block is published by Set.
func (h Handle) Data() []byte {
	if h.e == nil {
		return nil
	}
	if invariants.Enabled {
		h.live("Data")
	}
	return h.e.buf.Bytes()
}

// Sum returns the checksum the block was cached with (0 before Set).
func (h Handle) Sum() uint64 {
	if h.e == nil {
		return 0
	}
	if invariants.Enabled {
		h.live("Sum")
	}
	return h.e.sum
}

// Release drops the reference; the last reference frees the block. Neither
// h nor the bytes it returned may be used afterwards.
func (h Handle) Release() {
	if h.e != nil {
		h.live("Release")
		h.e.release()
	}
}

// dropList collects entries whose cache reference a shard operation
// dropped, to release them after the shard's lock is released (freeing may
// take the allocator's lock, and rarely munmap). Beyond its capacity, they
// are released at once.
type dropList struct {
	n int
	a [4]*entry
}

func (d *dropList) add(e *entry) {
	if d.n < len(d.a) {
		d.a[d.n] = e
		d.n++
		return
	}
	e.release()
}

func (d *dropList) release() {
	for i := 0; i < d.n; i++ {
		d.a[i].release()
		d.a[i] = nil
	}
	d.n = 0
}

// shard is one independently locked part of the cache. Invariants (under
// mu): m and the ring hold exactly the same entries; size is the sum of their
// charges and stays <= capacity after every Set returns; hand is nil iff the
// ring is empty.
type shard struct {
	mu       rwLock
	m        table
	hand     *entry // next entry the CLOCK hand examines
	size     int64
	capacity int64
	count    int64
	door     doorkeeper // the blocks this shard turned away lately

	hits, misses atomic.Int64
	rejected     atomic.Int64 // blocks turned away (Metrics.Rejected)

	sizeA  atomic.Int64 // mirrors size for lock-free Metrics
	countA atomic.Int64 // mirrors count

	_ [64]byte // keep shards' hot fields on different cache lines
}

// Cache is a sharded CLOCK block cache. See the package comment for the
// concurrency contract and value lifetimes.
type Cache struct {
	alloc  *manual.Allocator
	shards []shard
	shift  uint // 64 - log2(len(shards))
	// capacityA is the current capacity (New's, or SetCapacity's).
	capacityA atomic.Int64
}

// New returns a cache holding up to capacityBytes bytes of blocks (each
// charged its length plus EntryOverhead). A capacity <= 0 disables caching:
// New returns nil, which every method accepts.
func New(capacityBytes int64) *Cache {
	if capacityBytes <= 0 {
		return nil
	}
	n := 4 * runtime.GOMAXPROCS(0)
	for n > 1 && capacityBytes/int64(n) < minShardCapacity {
		n /= 2
	}
	// Round down to a power of two so the shard index is a shift.
	n = 1 << (bits.Len(uint(n)) - 1)
	c := &Cache{
		alloc:  manual.NewAllocator(),
		shards: make([]shard, n),
		shift:  uint(64 - bits.TrailingZeros(uint(n))),
	}
	c.capacityA.Store(capacityBytes)
	per := capacityBytes / int64(n)
	for i := range c.shards {
		c.shards[i].capacity = per
	}
	// Give the remainder to shard 0 so the total is exactly the capacity.
	c.shards[0].capacity += capacityBytes - per*int64(n)
	return c
}

// shardFor returns the shard of a key of hash h: its top bits (shift is
// 64 for a single shard, and a shift by 64 gives 0).
func (c *Cache) shardFor(h uint64) *shard {
	return &c.shards[h>>c.shift]
}

// Alloc returns a Handle to a new buffer of n bytes outside the Go heap
// (its contents unspecified), holding the only reference to it. The caller
// fills it, then may publish it with Set; either way it calls Release when
// done with the bytes. On a nil cache the buffer is on the Go heap.
func (c *Cache) Alloc(n int) Handle {
	e := entryPool.Get().(*entry)
	if c == nil {
		e.buf = manual.HeapBuf(make([]byte, n))
	} else {
		e.buf = c.alloc.Alloc(n)
	}
	e.refs.Store(1)
	return Handle{e, e.gen.Load()}
}

// Get returns a Handle to the block cached under (id, offset), with a new
// reference the caller must release, and the checksum stored with it in
// Handle.Sum. The bytes must not be modified. Get does not allocate.
func (c *Cache) Get(id, offset uint64) (Handle, bool) {
	if c == nil {
		return Handle{}, false
	}
	k := key{id, offset}
	h := hashKey(k)
	s := c.shardFor(h)
	s.mu.RLock()
	e := s.m.get(h, k)
	if e != nil {
		// The cache's reference is held (e is in the table, and removing it
		// takes the write lock), so the count is >= 1 here.
		e.refs.Add(1)
		// Avoid dirtying the cache line when the bit is already set.
		if !e.referenced.Load() {
			e.referenced.Store(true)
		}
	}
	s.mu.RUnlock()
	if e == nil {
		s.misses.Add(1)
		return Handle{}, false
	}
	s.hits.Add(1)
	return Handle{e, e.gen.Load()}, true
}

// Set caches the block of h (a Handle from Alloc, filled and not published
// before) under (id, offset) with its checksum sum, replacing any block
// cached there, and evicts blocks until the shard is within capacity. The
// cache takes a reference of its own: the caller keeps its reference and
// still releases it; nobody may modify the bytes any more. A block whose
// charge exceeds a shard's capacity is not cached, nor is a new block when
// its shard is full and did not turn it away lately (see doorkeeper): the
// caller's reference is then the only one.
func (c *Cache) Set(id, offset uint64, h Handle, sum uint64) {
	e := h.e
	if c == nil || e == nil {
		return
	}
	if e.cached {
		panic("cache: Set of a block already published")
	}
	if invariants.Enabled {
		h.live("Set")
	}
	k := key{id, offset}
	hk := hashKey(k)
	s := c.shardFor(hk)
	charge := int64(e.buf.Size()) + EntryOverhead
	var drop dropList
	s.mu.Lock()
	if charge > s.capacity {
		s.mu.Unlock()
		return
	}
	if s.size+charge > s.capacity && !s.door.seen(hk) && s.m.get(hk, k) == nil {
		// Full, and a block not asked for lately: see doorkeeper.
		s.door.add(hk, s.count)
		s.mu.Unlock()
		s.rejected.Add(1)
		return
	}
	e.key, e.sum, e.charge, e.cached = k, sum, charge, true
	e.refs.Add(1)
	if old := s.m.put(hk, e); old != nil {
		s.unlink(old)
		drop.add(old)
	}
	s.link(e)
	for s.size > s.capacity {
		drop.add(s.evictOne())
	}
	s.publish()
	s.mu.Unlock()
	drop.release()
}

// SetCapacity changes the cache's capacity, evicting blocks at once if it
// shrank. The DB calls it when a memory budget is shared with memtables
// (Options.MemoryBudget): the cache gets what the memtables leave.
func (c *Cache) SetCapacity(capacityBytes int64) {
	if c == nil {
		return
	}
	capacityBytes = max(capacityBytes, int64(len(c.shards))*EntryOverhead)
	per := capacityBytes / int64(len(c.shards))
	for i := range c.shards {
		s := &c.shards[i]
		var drop dropList
		s.mu.Lock()
		s.capacity = per
		if i == 0 {
			s.capacity += capacityBytes - per*int64(len(c.shards))
		}
		for s.size > s.capacity {
			drop.add(s.evictOne())
		}
		s.publish()
		s.mu.Unlock()
		drop.release()
	}
	c.capacityA.Store(capacityBytes)
}

// Delete drops the block cached under (id, offset), if any (the cache's
// reference: holders keep theirs). The SST reader calls it when a cached
// block fails its paranoid check, so the next read goes back to the file
// instead of returning the same corrupt bytes forever.
func (c *Cache) Delete(id, offset uint64) {
	if c == nil {
		return
	}
	k := key{id, offset}
	h := hashKey(k)
	s := c.shardFor(h)
	s.mu.Lock()
	e := s.m.del(h, k)
	if e != nil {
		s.unlink(e)
		s.publish()
	}
	s.mu.Unlock()
	if e != nil {
		e.release()
	}
}

// EvictFile drops every block cached under id (the cache's references). A
// reader calls it when it is closed: ids are never reused, so those blocks
// could only waste capacity. It walks every entry of every shard, O(cached
// blocks).
func (c *Cache) EvictFile(id uint64) {
	if c == nil {
		return
	}
	for i := range c.shards {
		s := &c.shards[i]
		var drop dropList
		s.mu.Lock()
		if s.hand != nil {
			e := s.hand
			for n := s.count; n > 0; n-- {
				next := e.next
				if e.key.id == id {
					s.unlink(e)
					s.m.del(hashKey(e.key), e.key)
					drop.add(e)
				}
				e = next
			}
			s.publish()
		}
		s.mu.Unlock()
		drop.release()
	}
}

// Metrics returns the cache's counters. A nil cache reports zeros.
func (c *Cache) Metrics() Metrics {
	if c == nil {
		return Metrics{}
	}
	st := c.alloc.Stats()
	m := Metrics{Capacity: c.capacityA.Load(), Mapped: st.Mapped, InUse: st.InUse}
	for i := range c.shards {
		s := &c.shards[i]
		m.Size += s.sizeA.Load()
		m.Count += s.countA.Load()
		m.Hits += s.hits.Load()
		m.Misses += s.misses.Load()
		m.Rejected += s.rejected.Load()
	}
	return m
}

// Capacity returns the current capacity in bytes (0 for a nil cache).
func (c *Cache) Capacity() int64 {
	if c == nil {
		return 0
	}
	return c.capacityA.Load()
}

// ForEachBlock calls fn with the bytes of every cached block, under the
// shard's write lock, so that a test can corrupt cached blocks in place (the
// stress test's model of a RAM bit flip). fn must not call the cache nor
// keep the slice. Never use it outside tests: it breaks the immutability
// every reader relies on.
func (c *Cache) ForEachBlock(fn func(data []byte)) {
	if c == nil {
		return
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		e := s.hand
		for n := s.count; n > 0; n-- {
			fn(e.buf.Bytes())
			e = e.next
		}
		s.mu.Unlock()
	}
}

// link inserts e just behind the hand, so the hand reaches it last: a new
// block gets a full revolution before it can be evicted.
func (s *shard) link(e *entry) {
	if s.hand == nil {
		e.prev, e.next = e, e
		s.hand = e
	} else {
		e.next = s.hand
		e.prev = s.hand.prev
		e.prev.next = e
		s.hand.prev = e
	}
	s.size += e.charge
	s.count++
}

// unlink removes e from the ring (not from the table).
func (s *shard) unlink(e *entry) {
	if e.next == e {
		s.hand = nil
	} else {
		e.prev.next = e.next
		e.next.prev = e.prev
		if s.hand == e {
			s.hand = e.next
		}
	}
	e.prev, e.next = nil, nil
	s.size -= e.charge
	s.count--
}

// evictOne advances the hand, giving referenced entries a second chance, and
// evicts the first unreferenced one, returning it: the caller drops the
// cache's reference. It terminates within two revolutions: the first clears
// every bit it passes. (Whether readers hold the block does not matter: it
// leaves the cache and is freed when they release it.)
func (s *shard) evictOne() *entry {
	for {
		e := s.hand
		if e.referenced.Load() {
			e.referenced.Store(false)
			s.hand = e.next
			continue
		}
		s.unlink(e)
		s.m.del(hashKey(e.key), e.key)
		return e
	}
}

func (s *shard) publish() {
	s.sizeA.Store(s.size)
	s.countA.Store(s.count)
}
