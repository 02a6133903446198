package vigil

import (
	"container/list"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/internal/rangedel"
	"github.com/vigildb/vigil/sst"
)

// tableCache keeps open SST readers, at most capacity of them, evicting the
// least recently used one that no reader is using.
//
// Concurrency: safe for concurrent use. An entry is reference counted: the
// cache holds one reference while the entry is cached, and each user holds
// one from get until release; the file is closed when the count reaches
// zero, so eviction never closes a table under a reader.
type tableCache struct {
	d        *DB
	capacity int

	mu sync.Mutex
	// closed is set by close: no table opens after it (an iterator that
	// outlived DB.Close must not leak descriptors into a dead cache).
	closed  bool
	entries map[uint64]*tableEntry
	lru     list.List // of *tableEntry, most recent at the front
	// nextCacheID namespaces each opened reader's blocks in the block cache.
	nextCacheID atomic.Uint64

	hits, misses atomic.Int64
}

// tableEntry is one open table. reader and err are set once ready is closed.
type tableEntry struct {
	c       *tableCache
	fileNum uint64
	refs    atomic.Int32
	ready   chan struct{}
	reader  *sst.Reader
	err     error
	// tombs indexes the table's range tombstones, so that a Get that sees
	// all of them is one binary search instead of a pass over every one;
	// built once, when the table opens.
	tombs   rangedel.Index
	elem    *list.Element
	evicted bool
}

func newTableCache(d *DB, capacity int) *tableCache {
	// Leave room for the WALs, MANIFEST, LOG and directory handles.
	if capacity > 64 {
		capacity -= 10
	}
	return &tableCache{d: d, capacity: capacity, entries: make(map[uint64]*tableEntry)}
}

// get returns the open table for f with a reference; callers release it.
func (c *tableCache) get(f *manifest.FileMetadata) (*tableEntry, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	e, ok := c.entries[f.FileNum]
	if ok {
		e.refs.Add(1)
		c.lru.MoveToFront(e.elem)
		c.mu.Unlock()
		<-e.ready
		if e.err != nil {
			e.release()
			return nil, e.err
		}
		c.hits.Add(1)
		return e, nil
	}
	c.misses.Add(1)
	e = &tableEntry{c: c, fileNum: f.FileNum, ready: make(chan struct{})}
	e.refs.Store(2) // the cache's and the caller's
	e.elem = c.lru.PushFront(e)
	c.entries[f.FileNum] = e
	c.evictLocked()
	c.mu.Unlock()

	e.reader, e.err = c.open(f)
	if e.err == nil {
		if ts := e.reader.RangeDels(); len(ts) > 0 {
			e.tombs = rangedel.NewIndex(ts)
		}
	}
	close(e.ready)
	if e.err != nil {
		// Don't cache failures: the next get retries (the error may be
		// transient, an injected I/O error for instance).
		c.mu.Lock()
		if !e.evicted {
			c.removeLocked(e)
		}
		c.mu.Unlock()
		err := e.err
		e.release()
		return nil, err
	}
	return e, nil
}

func (c *tableCache) open(f *manifest.FileMetadata) (*sst.Reader, error) {
	d := c.d
	name := makeFilename(d.fs, d.dirname, fileTypeTable, f.FileNum)
	file, err := d.fs.Open(name)
	if err != nil {
		return nil, fmt.Errorf("opening table %s: %w", name, err)
	}
	st, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("stat of table %s: %w", name, err)
	}
	if uint64(st.Size()) != f.Size {
		file.Close()
		return nil, fmt.Errorf("%w: table %s is %d bytes, the MANIFEST says %d", ErrCorruption, name, st.Size(), f.Size)
	}
	r, err := sst.Open(file, name, st.Size(), sst.ReaderOptions{
		FileNum:             f.FileNum,
		Cache:               d.blockCache,
		CacheID:             c.nextCacheID.Add(1),
		ParanoidCacheChecks: d.opts.ParanoidMemoryChecks,
		GlobalSeqNum:        f.GlobalSeqNum,
	})
	if err != nil {
		// sst.Open closed the file.
		return nil, fmt.Errorf("opening table %s: %w", name, err)
	}
	return r, nil
}

// evictLocked drops least recently used entries over capacity. Entries in
// use stay open until released.
func (c *tableCache) evictLocked() {
	for c.lru.Len() > c.capacity {
		back := c.lru.Back()
		if back == nil {
			return
		}
		c.removeLocked(back.Value.(*tableEntry))
	}
}

// removeLocked takes e out of the cache and drops the cache's reference.
func (c *tableCache) removeLocked(e *tableEntry) {
	if e.evicted {
		return
	}
	e.evicted = true
	c.lru.Remove(e.elem)
	delete(c.entries, e.fileNum)
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
	if e, ok := c.entries[fileNum]; ok {
		c.removeLocked(e)
	}
	c.mu.Unlock()
}

// indexBytes returns the bytes of index and filter blocks the open tables
// keep in memory.
func (c *tableCache) indexBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for e := c.lru.Front(); e != nil; e = e.Next() {
		te := e.Value.(*tableEntry)
		select {
		case <-te.ready:
		default:
			continue // still opening
		}
		if te.reader != nil {
			p := te.reader.Properties()
			n += int64(p.IndexSize + p.FilterSize)
		}
	}
	return n
}

// size returns the number of open tables.
func (c *tableCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// close drops every cached table.
func (c *tableCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for c.lru.Len() > 0 {
		c.removeLocked(c.lru.Front().Value.(*tableEntry))
	}
	return nil
}
