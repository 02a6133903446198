package sst

import (
	"github.com/vigildb/vigil/internal/cache"
	"github.com/vigildb/vigil/internal/private"
)

// Cache is a block cache for the Readers of one process: sharded CLOCK,
// blocks kept outside the Go heap and reference counted, so that a block
// evicted while a reader holds it stays valid until released. Create one
// with NewCache, hand it to ReaderOptions.Cache, resize it with SetCapacity
// and read its use with Metrics; what it holds and how is the engine's
// business. A DB has its own (Options.BlockCacheSize).
//
// Safe for concurrent use. A nil *Cache caches nothing.
type Cache struct{ c *cache.Cache }

// CacheMetrics are a cache's size and use.
type CacheMetrics struct {
	Capacity int64 // bytes, as given to NewCache or SetCapacity
	Size     int64 // bytes charged now
	Count    int64 // blocks cached now
	Hits     int64 // lookups that found the block
	Misses   int64 // lookups that did not
	// Mapped is the memory mapped from the OS for blocks (cached, evicted
	// but still held, being filled) and the allocator's spare space; InUse
	// is the part of it in live blocks.
	Mapped, InUse int64
}

// NewCache returns a block cache of capacityBytes (0 or less: none, a nil
// *Cache, which caches nothing).
func NewCache(capacityBytes int64) *Cache { return wrapCache(cache.New(capacityBytes)) }

func wrapCache(c *cache.Cache) *Cache {
	if c == nil {
		return nil
	}
	return &Cache{c: c}
}

// internal returns the engine's cache (nil for a nil Cache).
func (c *Cache) internal() *cache.Cache {
	if c == nil {
		return nil
	}
	return c.c
}

// Capacity returns the capacity in bytes (0 for a nil Cache).
func (c *Cache) Capacity() int64 { return c.internal().Capacity() }

// SetCapacity changes the capacity, evicting what no longer fits. A nil
// Cache stays nil.
func (c *Cache) SetCapacity(capacityBytes int64) {
	if c != nil {
		c.c.SetCapacity(capacityBytes)
	}
}

// Metrics returns the cache's size and use (zero for a nil Cache).
func (c *Cache) Metrics() CacheMetrics {
	if c == nil {
		return CacheMetrics{}
	}
	m := c.c.Metrics()
	return CacheMetrics{Capacity: m.Capacity, Size: m.Size, Count: m.Count, Hits: m.Hits, Misses: m.Misses, Mapped: m.Mapped, InUse: m.InUse}
}

func init() {
	// The DB builds its cache itself (it shares it with the memtables'
	// budget) and hands its tables this view of it.
	private.WrapBlockCache = func(c any) any { return wrapCache(c.(*cache.Cache)) }
}
