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
// the failure Pebble issue #6175 describes). Blocks are immutable once
// inserted: the cache never writes into a buffer, and eviction only drops the
// cache's reference, so a slice returned by Get stays valid (and unchanged)
// for as long as the caller holds it — the garbage collector, not a reference
// count, frees evicted blocks. The one exception is ForEachForTesting, which
// exists so a stress test can flip bits in cached blocks.
//
// # Concurrency
//
// A *Cache is safe for concurrent use by any number of goroutines. Each shard
// has its own RWMutex; Get takes it shared, Set / Delete / EvictFile take it
// exclusive. Metrics are read with atomics and are not a consistent snapshot
// across shards.
//
// A nil *Cache is valid and caches nothing: New(0) returns nil, Get always
// misses, Set does nothing. Callers need no "is there a cache" branches.
package cache

import (
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
)

// EntryOverhead is the number of bytes charged against the capacity for each
// cached block on top of its length: the entry struct, its map slot and slice
// headers. It keeps a cache of many tiny blocks from using far more memory
// than its capacity says.
const EntryOverhead = 96

// minShardCapacity is the smallest capacity a shard is given; small caches
// use fewer shards rather than shards too small to hold a block.
const minShardCapacity = 1 << 20

// Metrics are counters of a cache since it was created.
type Metrics struct {
	Capacity int64 // bytes, as given to New or SetCapacity
	Size     int64 // bytes charged now (block lengths + EntryOverhead each)
	Count    int64 // blocks cached now
	Hits     int64 // Get calls that found the block
	Misses   int64 // Get calls that did not
}

// String renders the metrics on one line, for logs and the DB's metrics.
func (m Metrics) String() string {
	hitRate := 0.0
	if t := m.Hits + m.Misses; t > 0 {
		hitRate = 100 * float64(m.Hits) / float64(t)
	}
	return fmt.Sprintf("block cache: %d/%d bytes, %d blocks, %d hits, %d misses (%.1f%% hit rate)",
		m.Size, m.Capacity, m.Count, m.Hits, m.Misses, hitRate)
}

type key struct {
	id, offset uint64
}

// entry is one cached block. key, data and sum are immutable once the entry
// is published in a shard's map (Set replaces the whole entry rather than
// mutating it, so a concurrent Get under the read lock never sees a torn
// value); prev/next belong to the shard's ring and are only touched under the
// shard's write lock; referenced is written by Get under the read lock, hence
// atomic.
type entry struct {
	key        key
	data       []byte
	sum        uint64
	charge     int64
	referenced atomic.Bool
	prev, next *entry
}

// shard is one independently locked part of the cache. Invariants (under
// mu): m and the ring hold exactly the same entries; size is the sum of their
// charges and stays <= capacity after every Set returns; hand is nil iff the
// ring is empty.
type shard struct {
	mu       sync.RWMutex
	m        map[key]*entry
	hand     *entry // next entry the CLOCK hand examines
	size     int64
	capacity int64
	count    int64

	hits, misses atomic.Int64
	sizeA        atomic.Int64 // mirrors size for lock-free Metrics
	countA       atomic.Int64 // mirrors count

	_ [64]byte // keep shards' hot fields on different cache lines
}

// Cache is a sharded CLOCK block cache. See the package comment for the
// concurrency contract and value lifetimes.
type Cache struct {
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
		shards: make([]shard, n),
		shift:  uint(64 - bits.TrailingZeros(uint(n))),
	}
	c.capacityA.Store(capacityBytes)
	per := capacityBytes / int64(n)
	for i := range c.shards {
		c.shards[i].m = make(map[key]*entry)
		c.shards[i].capacity = per
	}
	// Give the remainder to shard 0 so the total is exactly the capacity.
	c.shards[0].capacity += capacityBytes - per*int64(n)
	return c
}

func (c *Cache) shardFor(k key) *shard {
	if len(c.shards) == 1 {
		return &c.shards[0]
	}
	// fmix64 (MurmurHash3's finalizer) over a mix of both halves: blocks of
	// one table spread over all shards, and so do equal offsets of different
	// tables.
	h := k.id*0x9e3779b97f4a7c15 ^ k.offset
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return &c.shards[h>>c.shift]
}

// Get returns the block cached under (id, offset) and the checksum stored
// with it. The slice must not be modified; it stays valid after eviction.
// Get does not allocate.
func (c *Cache) Get(id, offset uint64) (data []byte, sum uint64, ok bool) {
	if c == nil {
		return nil, 0, false
	}
	k := key{id, offset}
	s := c.shardFor(k)
	s.mu.RLock()
	e := s.m[k]
	if e != nil {
		data, sum = e.data, e.sum
		// Avoid dirtying the cache line when the bit is already set.
		if !e.referenced.Load() {
			e.referenced.Store(true)
		}
	}
	s.mu.RUnlock()
	if e == nil {
		s.misses.Add(1)
		return nil, 0, false
	}
	s.hits.Add(1)
	return data, sum, true
}

// Set caches data under (id, offset) with its checksum sum, replacing any
// block cached there, and evicts blocks until the shard is within capacity.
// The cache keeps data (it does not copy it): the caller must not modify data
// afterwards. A block larger than a shard's capacity is not cached.
func (c *Cache) Set(id, offset uint64, data []byte, sum uint64) {
	if c == nil {
		return
	}
	k := key{id, offset}
	s := c.shardFor(k)
	charge := int64(len(data)) + EntryOverhead
	e := &entry{key: k, data: data, sum: sum, charge: charge}
	s.mu.Lock()
	if charge > s.capacity {
		s.mu.Unlock()
		return
	}
	if old := s.m[k]; old != nil {
		s.unlink(old)
	}
	s.m[k] = e
	s.link(e)
	for s.size > s.capacity {
		s.evictOne()
	}
	s.publish()
	s.mu.Unlock()
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
		s.mu.Lock()
		s.capacity = per
		if i == 0 {
			s.capacity += capacityBytes - per*int64(len(c.shards))
		}
		for s.size > s.capacity {
			s.evictOne()
		}
		s.publish()
		s.mu.Unlock()
	}
	c.capacityA.Store(capacityBytes)
}

// Delete drops the block cached under (id, offset), if any. The SST reader
// calls it when a cached block fails its paranoid check, so the next read
// goes back to the file instead of returning the same corrupt bytes forever.
func (c *Cache) Delete(id, offset uint64) {
	if c == nil {
		return
	}
	k := key{id, offset}
	s := c.shardFor(k)
	s.mu.Lock()
	if e := s.m[k]; e != nil {
		s.unlink(e)
		delete(s.m, k)
		s.publish()
	}
	s.mu.Unlock()
}

// EvictFile drops every block cached under id. A reader calls it when it is
// closed: ids are never reused, so those blocks could only waste capacity.
// It walks every entry of every shard, O(cached blocks).
func (c *Cache) EvictFile(id uint64) {
	if c == nil {
		return
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		if s.hand != nil {
			e := s.hand
			for n := s.count; n > 0; n-- {
				next := e.next
				if e.key.id == id {
					s.unlink(e)
					delete(s.m, e.key)
				}
				e = next
			}
			s.publish()
		}
		s.mu.Unlock()
	}
}

// Metrics returns the cache's counters. A nil cache reports zeros.
func (c *Cache) Metrics() Metrics {
	if c == nil {
		return Metrics{}
	}
	m := Metrics{Capacity: c.capacityA.Load()}
	for i := range c.shards {
		s := &c.shards[i]
		m.Size += s.sizeA.Load()
		m.Count += s.countA.Load()
		m.Hits += s.hits.Load()
		m.Misses += s.misses.Load()
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

// ForEachForTesting calls fn with the bytes of every cached block, under the
// shard's write lock, so that a test can corrupt cached blocks in place (the
// stress test's model of a RAM bit flip). fn must not call the cache. Never
// use it outside tests: it breaks the immutability every reader relies on.
func (c *Cache) ForEachForTesting(fn func(data []byte)) {
	if c == nil {
		return
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		e := s.hand
		for n := s.count; n > 0; n-- {
			fn(e.data)
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

// unlink removes e from the ring (not from the map).
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
// evicts the first unreferenced one. It terminates within two revolutions:
// the first clears every bit it passes.
func (s *shard) evictOne() {
	for {
		e := s.hand
		if e.referenced.Load() {
			e.referenced.Store(false)
			s.hand = e.next
			continue
		}
		s.unlink(e)
		delete(s.m, e.key)
		return
	}
}

func (s *shard) publish() {
	s.sizeA.Store(s.size)
	s.countA.Store(s.count)
}
