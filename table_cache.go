package vigil

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/internal/rangedel"
	"github.com/vigildb/vigil/sst"
)

// tableCache keeps open SST readers, at most capacity of them, evicting by
// CLOCK (second chance): a table used since the hand last passed it stays.
//
// Concurrency: safe for concurrent use. A hit takes no lock and writes only
// the entry's own reference count (and, once per eviction sweep, its
// second-chance bit): a Get probes a table per level and every L0 file, and
// with a mutex, an LRU list moved on each hit and shared counters, two
// readers on two cores spent more time passing those cache lines between
// them than reading (two threads read slower than one). Misses and
// eviction serialise on mu.
//
// Invariants: an entry is in entries exactly while it is in ring (both
// changed under mu). Its reference count is the cache's one reference while
// it is cached plus one per user from get (or peek) until release; the
// file is closed when the count reaches zero, so eviction never closes a
// table under a reader, and a count that reached zero is never raised
// again (peek's tryRef), so a closed reader is never handed out.
type tableCache struct {
	tableCacheOptions
	capacity int

	// entries maps a file number to its *tableEntry; read without mu.
	entries sync.Map

	mu sync.Mutex
	// closed is set by close: no table opens after it (an iterator that
	// outlived DB.Close must not leak descriptors into a dead cache).
	closed bool
	// ring holds the cached entries in CLOCK order; hand is the next one
	// the eviction sweep looks at.
	ring []*tableEntry
	hand int
	// evictedHits are the hits of entries no longer cached.
	evictedHits int64
	// nextCacheID namespaces each opened reader's blocks in the block cache.
	nextCacheID atomic.Uint64

	misses atomic.Int64
}

// tableEntry is one open table. reader, err and tombs are set before ready
// is closed and isReady set, and never change after.
type tableEntry struct {
	c       *tableCache
	fileNum uint64
	// refs and hits share the cache line a hit writes anyway.
	refs atomic.Int32
	hits atomic.Int64
	// used is CLOCK's second-chance bit: set by a hit (noteHit), cleared
	// by the sweep.
	used    atomic.Bool
	isReady atomic.Bool
	ready   chan struct{}
	reader  *sst.Reader
	err     error
	// tombs indexes the table's range tombstones, so that a Get that sees
	// all of them is one binary search instead of a pass over every one;
	// built once, when the table opens.
	tombs rangedel.Index
	// pos is the entry's index in ring; -1 once evicted. Guarded by c.mu.
	pos int
}

// tableCacheOptions are what the table cache opens tables with: the DB's
// file system and directory, its block cache (nil: none) and whether
// cached blocks are re-verified on every hit.
type tableCacheOptions struct {
	fs                  vfs.FS
	dirname             string
	blockCache          *sst.Cache
	paranoidCacheChecks bool
	cmp                 *base.Comparer // the DB's, resolved (nil: the default)
}

// newTableCache returns a cache of at most capacity open tables (less a
// few, for the other files a DB keeps open).
func newTableCache(o tableCacheOptions, capacity int) *tableCache {
	// Leave room for the WALs, MANIFEST, LOG and directory handles.
	if capacity > 64 {
		capacity -= 10
	}
	if o.cmp == nil {
		o.cmp = base.DefaultComparer
	}
	return &tableCache{tableCacheOptions: o, capacity: capacity}
}

// tryRef takes a reference unless the count already reached zero (the
// entry was evicted and its last user is closing it).
func (e *tableEntry) tryRef() bool { return tryRef(&e.refs) }

// get returns the open table for f with a reference; callers release it.
// A table still opening, or whose open failed, takes getSlow, which waits
// for it or returns the failure.
func (c *tableCache) get(f *manifest.FileMetadata) (*tableEntry, error) {
	if e := c.peek(f); e != nil {
		e.noteHit()
		return e, nil
	}
	return c.getSlow(f)
}

// peek returns the open table for f with a reference, or nil if it is not
// open and ready (peek never opens one, nor waits for an open). Unlike get
// it neither counts a hit nor sets the CLOCK bit: its caller may not read
// the table, and calls noteHit when it does.
func (c *tableCache) peek(f *manifest.FileMetadata) *tableEntry {
	v, ok := c.entries.Load(f.FileNum)
	if !ok {
		return nil
	}
	e := v.(*tableEntry)
	if !e.isReady.Load() || !e.tryRef() {
		return nil
	}
	if e.err != nil {
		e.release()
		return nil
	}
	return e
}

// noteHit counts a use of an open table (get's hit; a Get's use of a table
// it peeked) and sets its CLOCK bit.
func (e *tableEntry) noteHit() {
	// Avoid dirtying the line when the bit is already set.
	if !e.used.Load() {
		e.used.Store(true)
	}
	e.hits.Add(1)
}

// getSlow is get's path under mu: the table is not cached (or was evicted
// between the lookup and the reference), so open it, or wait for the get
// that is opening it.
func (c *tableCache) getSlow(f *manifest.FileMetadata) (*tableEntry, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if v, ok := c.entries.Load(f.FileNum); ok {
		e := v.(*tableEntry)
		// Cached entries hold the cache's reference, so under mu the
		// count is at least one.
		e.refs.Add(1)
		c.mu.Unlock()
		<-e.ready // another get may still be opening it
		if e.err != nil {
			// The open failed; return its error rather than retry
			// forever on a file that cannot open (failures are not
			// cached).
			e.release()
			return nil, e.err
		}
		e.noteHit()
		return e, nil
	}
	c.misses.Add(1)
	e := &tableEntry{c: c, fileNum: f.FileNum, ready: make(chan struct{}), pos: len(c.ring)}
	e.refs.Store(2) // the cache's and the caller's
	c.ring = append(c.ring, e)
	c.entries.Store(f.FileNum, e)
	c.evictLocked(e)
	c.mu.Unlock()

	e.reader, e.err = c.open(f)
	if e.err == nil {
		if ts := e.reader.RangeDels(); len(ts) > 0 {
			e.tombs = rangedel.NewIndex(c.cmp, ts)
		}
	}
	e.isReady.Store(true)
	close(e.ready)
	if e.err != nil {
		// Don't cache failures: the next get retries (the error may be
		// transient, an injected I/O error for instance).
		c.mu.Lock()
		c.removeLocked(e)
		c.mu.Unlock()
		err := e.err
		e.release()
		return nil, err
	}
	return e, nil
}

// open opens table f, checked against what the MANIFEST records of it
// (size, identity, whole-file checksum): a file put in its place is
// ErrCorruption here, for every reader alike.
func (c *tableCache) open(f *manifest.FileMetadata) (*sst.Reader, error) {
	name := makeFilename(c.fs, c.dirname, fileTypeTable, f.FileNum)
	r, err := sst.OpenFile(c.fs, name, sst.ReaderOptions{
		FileNum:             f.FileNum,
		Comparer:            c.cmp,
		Cache:               c.blockCache,
		CacheID:             c.nextCacheID.Add(1),
		ParanoidCacheChecks: c.paranoidCacheChecks,
		GlobalSeqNum:        f.GlobalSeqNum,
		Expect:              f.Expected(),
	})
	if err != nil {
		return nil, fmt.Errorf("opening table %06d: %w", f.FileNum, err)
	}
	return r, nil
}

// evictLocked drops entries while more than capacity are cached, by CLOCK:
// the hand passes over entries, clearing the second-chance bit of those
// used since its last pass and evicting the first one that was not. keep
// (the entry being added) is never the victim. Entries in use stay open
// until released.
func (c *tableCache) evictLocked(keep *tableEntry) {
	for len(c.ring) > c.capacity && len(c.ring) > 1 {
		if c.hand >= len(c.ring) {
			c.hand = 0
		}
		e := c.ring[c.hand]
		if e == keep || e.used.Load() {
			e.used.Store(false)
			c.hand++
			continue
		}
		c.removeLocked(e) // the last entry moves to hand: look at it next
	}
}

// removeLocked takes e out of the cache and drops the cache's reference.
func (c *tableCache) removeLocked(e *tableEntry) {
	if e.pos < 0 {
		return
	}
	last := len(c.ring) - 1
	c.ring[e.pos] = c.ring[last]
	c.ring[e.pos].pos = e.pos
	c.ring[last] = nil
	c.ring = c.ring[:last]
	e.pos = -1
	c.entries.Delete(e.fileNum)
	c.evictedHits += e.hits.Load()
	e.release()
}

// release drops one reference, closing the table at zero.
func (e *tableEntry) release() {
	if e.refs.Add(-1) == 0 && e.reader != nil {
		_ = e.reader.Close()
	}
}

// evict drops a table (it became obsolete).
func (c *tableCache) evict(fileNum uint64) {
	c.mu.Lock()
	if v, ok := c.entries.Load(fileNum); ok {
		c.removeLocked(v.(*tableEntry))
	}
	c.mu.Unlock()
}

// hits returns the number of gets that found their table open.
func (c *tableCache) hits() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.evictedHits
	for _, e := range c.ring {
		n += e.hits.Load()
	}
	return n
}

// indexBytes returns the memory the open tables' readers keep for their
// indexes and filters (sst.Reader.MetaMemory).
func (c *tableCache) indexBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, te := range c.ring {
		if !te.isReady.Load() {
			continue // still opening
		}
		if te.reader != nil {
			n += te.reader.MetaMemory()
		}
	}
	return n
}

// size returns the number of open tables.
func (c *tableCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ring)
}

// close drops every cached table.
func (c *tableCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for len(c.ring) > 0 {
		c.removeLocked(c.ring[len(c.ring)-1])
	}
	return nil
}
