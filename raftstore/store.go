package raftstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"github.com/vigildb/vigil"
)

// Key layout under Options.Prefix (P):
//
//	P "f"                               the log's floor: 8 bytes big-endian (see below)
//	P "l" <index: 8 bytes big-endian>   a chunk of log entries up to index (logchunk.go)
//	P "s" <key>                         a stable-store value
//
// Big-endian indexes sort numerically, so the log is one key range in
// index order, and the chunk holding entry i is the first key at or above
// i. Chunks never overlap.
//
// The floor is what spares raft's log compaction any read: a DeleteRange
// of a prefix of the log deletes the keys in its range, and the chunk that
// straddles its end keeps the entries below the end, hidden by the floor
// (entries below it are deleted, whatever a chunk holds). Every key below
// the floor is deleted, so only that one chunk can hold hidden entries.
// Any other write that cuts a chunk reads what it cuts and writes back
// what is left of it, in the same batch; a write below the floor first
// writes back the straddling chunk's visible part and drops the floor.
const (
	floorTag  = 'f'
	logTag    = 'l'
	logEndTag = logTag + 1
	stableTag = 's'
)

// ErrKeyNotFound is what Store.Get and Store.GetUint64 return for a missing
// key. hashicorp/raft recognizes a missing stable key by the error text
// "not found" (as its in-memory store and raft-boltdb return it), so this
// error's text is exactly that and it is returned unwrapped;
// errors.Is(ErrKeyNotFound, vigil.ErrNotFound) is true.
var ErrKeyNotFound error = keyNotFoundError{}

type keyNotFoundError struct{}

func (keyNotFoundError) Error() string        { return "not found" }
func (keyNotFoundError) Is(target error) bool { return target == vigil.ErrNotFound }

// Options configures a Store.
type Options struct {
	// Vigil is the options Open opens the DB with (nil: Vigil's defaults
	// with WALRecycleFiles = DefaultWALRecycleFiles, since every write of
	// a raft log is synced). New ignores it.
	Vigil *vigil.Options
	// Prefix is prepended to every key the store reads or writes, so that a
	// store can share a DB with other data (or with other stores under
	// other prefixes). Default: none.
	Prefix []byte
}

// Store is a raft.LogStore and a raft.StableStore over a Vigil DB.
//
// Every write is synced before it returns: StoreLogs is one Vigil batch
// applied with Sync (all the entries or, after a crash, none of them),
// DeleteRange one synced batch (the range deletion, with the log's floor
// or the rewrite of a chunk it cuts), Set and SetUint64 one synced put. GetLog returns
// raft.ErrLogNotFound for a missing entry, Get and GetUint64 return
// ErrKeyNotFound for a missing key; a value that does not decode is an
// error wrapping vigil.ErrCorruption.
//
// Concurrency: every method is safe for concurrent use, as hashicorp/raft
// needs (it reads the log from its replication goroutines while it
// appends). Writes to the log (StoreLog, StoreLogs, DeleteRange) are
// serialized by a mutex, which also keeps the cached FirstIndex and
// LastIndex exact; readers never take it. An index is published in the
// cache only after its entry is readable, so GetLog(LastIndex()) finds its
// entry unless a DeleteRange removed it meanwhile. Close must not run
// concurrently with other methods; after it every method that reads or
// writes the DB fails with an error wrapping vigil.ErrClosed.
//
// GetLog keeps the last chunk of several entries it read when the reads
// go in order (raft reads a follower's entries so, up to MaxAppendEntries
// at a time; a chunk is up to 64 KiB, which random reads need not copy). A write
// that deletes or rewrites stored entries bumps gen after it is applied
// and before it returns; a cached chunk is used only under the gen that
// was current before it was read, so no reader sees it once the write has
// returned. Appends beyond the last index change no stored chunk and leave
// gen alone.
type Store struct {
	db    *vigil.DB
	owned bool

	floorKey     []byte // Prefix "f"
	logPrefix    []byte // Prefix "l"
	logEnd       []byte // Prefix "m": the exclusive end of the log
	stablePrefix []byte // Prefix "s"

	// mu serializes log writes and guards what follows it.
	mu     sync.Mutex
	batch  *vigil.Batch
	keyBuf []byte
	valBuf []byte
	sizes  []int      // scratch: the encoded lengths of a chunk's entries
	region logRegion  // scratch for a write that rewrites stored chunks
	spans  indexSpans // the stored indexes (index 0 is a valid key)

	// first and last publish spans.bounds() to readers.
	first, last atomic.Uint64
	// floor is the log's floor: entries below it are deleted (0: none).
	// It changes under mu, after the write that stores it is applied.
	floor atomic.Uint64

	gen    atomic.Uint64               // bumped by every write that changes stored chunks
	cache  atomic.Pointer[cachedChunk] // GetLog's last chunk
	missed atomic.Uint64               // the index GetLog last found outside it
}

// cachedChunk is a chunk GetLog read, with a copy of its value; it is
// immutable once published.
type cachedChunk struct {
	gen uint64
	c   chunk
}

var (
	_ raft.LogStore    = (*Store)(nil)
	_ raft.StableStore = (*Store)(nil)
)

// keyPool holds key buffers for GetLog, so that a read allocates only the
// value it returns.
var keyPool = sync.Pool{New: func() any { b := make([]byte, 0, 64); return &b }}

// maxRetainedBatch bounds the batch buffer StoreLogs keeps between calls.
const maxRetainedBatch = 4 << 20

// Open opens (creating it if needed) the Vigil DB in dir and returns a
// Store over it. The Store owns the DB: Close closes it.
func Open(dir string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	vo := o.Vigil
	if vo == nil {
		vo = &vigil.Options{WALRecycleFiles: DefaultWALRecycleFiles}
	}
	db, err := vigil.Open(dir, vo)
	if err != nil {
		return nil, fmt.Errorf("raftstore: opening log store: %w", err)
	}
	s, err := New(db, &o)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// DefaultWALRecycleFiles is the vigil.Options.WALRecycleFiles of a Store
// opened without Vigil options: a log store syncs every write, so writing
// each WAL over an obsolete one's blocks spares the disk the zeros and
// the file creation and deletion a fresh WAL costs.
const DefaultWALRecycleFiles = 2

// New returns a Store over db, which stays the caller's: Close does not
// close it. It reads the first and last log keys to fill its index cache,
// so a DB must not be shared by two Stores under the same prefix.
func New(db *vigil.DB, opts *Options) (*Store, error) {
	var prefix []byte
	if opts != nil {
		prefix = opts.Prefix
	}
	tagged := func(tag byte) []byte {
		return append(append(make([]byte, 0, len(prefix)+1), prefix...), tag)
	}
	s := &Store{
		db:           db,
		floorKey:     tagged(floorTag),
		logPrefix:    tagged(logTag),
		logEnd:       tagged(logEndTag),
		stablePrefix: tagged(stableTag),
		batch:        db.NewBatch(),
	}
	floor, err := s.readFloor()
	if err != nil {
		return nil, fmt.Errorf("raftstore: reading the log's floor: %w", err)
	}
	s.floor.Store(floor)
	it, err := db.NewIter(&vigil.IterOptions{LowerBound: s.logPrefix, UpperBound: s.logEnd})
	if err != nil {
		return nil, fmt.Errorf("raftstore: reading the log bounds: %w", err)
	}
	var first, last uint64
	if it.First() {
		var c chunk
		if c, err = s.chunkAt(it); err == nil && it.Last() {
			first = max(c.first, floor)
			last, err = s.indexOf(it.Key())
		}
		if err == nil && first > last {
			err = corruptf("the log's floor %d lies above its last entry %d", floor, last)
		}
		// What lies between is not read: the span may have holes, which
		// the first write that cuts it looks up (see indexSpans).
		s.spans.s = []span{{lo: first, hi: last, exact: first == last}}
	}
	if err == nil {
		err = it.Error()
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("raftstore: reading the log bounds: %w", err)
	}
	s.first.Store(first)
	s.last.Store(last)
	return s, nil
}

// readFloor reads the log's floor (0 if none is stored).
func (s *Store) readFloor() (uint64, error) {
	v, err := s.db.Get(s.floorKey)
	switch {
	case errors.Is(err, vigil.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	case len(v) != 8:
		return 0, corruptf("the log's floor is %d bytes, want 8", len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// setFloor adds to b the store of floor (0: none). mu is held (valBuf).
func (s *Store) setFloor(b *vigil.Batch, floor uint64) {
	if floor == 0 {
		b.Delete(s.floorKey)
		return
	}
	s.valBuf = binary.BigEndian.AppendUint64(s.valBuf[:0], floor)
	b.Put(s.floorKey, s.valBuf)
}

// DB returns the Vigil DB the store keeps its data in.
func (s *Store) DB() *vigil.DB { return s.db }

// Close closes the DB if Open opened it; a Store from New leaves its DB
// open.
func (s *Store) Close() error {
	if !s.owned {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("raftstore: closing log store: %w", err)
	}
	return nil
}

// appendLogKey appends the key of log entry index to dst.
func (s *Store) appendLogKey(dst []byte, index uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, s.logPrefix...), index)
}

// appendLogKeyAfter appends the key of log entry index+1 to dst, or the
// log's end if index is the largest.
func (s *Store) appendLogKeyAfter(dst []byte, index uint64) []byte {
	if index == math.MaxUint64 {
		return append(dst, s.logEnd...)
	}
	return s.appendLogKey(dst, index+1)
}

// indexOf returns the index of a log key.
func (s *Store) indexOf(key []byte) (uint64, error) {
	if len(key) != len(s.logPrefix)+8 {
		return 0, corruptf("log key %x is %d bytes, want %d", key, len(key), len(s.logPrefix)+8)
	}
	return binary.BigEndian.Uint64(key[len(s.logPrefix):]), nil
}

// FirstIndex returns the index of the first entry in the log, or 0 if it is
// empty. It reads a cached value and never touches the DB.
func (s *Store) FirstIndex() (uint64, error) { return s.first.Load(), nil }

// LastIndex returns the index of the last entry in the log, or 0 if it is
// empty. It reads a cached value and never touches the DB.
func (s *Store) LastIndex() (uint64, error) { return s.last.Load(), nil }

// GetLog reads entry index into log, or returns raft.ErrLogNotFound.
// log.Data and log.Extensions share one freshly allocated buffer, which
// the caller may keep.
func (s *Store) GetLog(index uint64, log *raft.Log) error {
	gen := s.gen.Load() // before the read: see Store
	if index < s.floor.Load() {
		return raft.ErrLogNotFound
	}
	cc := s.cache.Load()
	if cc != nil && cc.gen == gen && cc.c.covers(index) {
		return decodeEntry(&cc.c, index, log)
	}
	it, err := s.db.NewIter(&vigil.IterOptions{LowerBound: s.logPrefix, UpperBound: s.logEnd})
	if err != nil {
		return fmt.Errorf("raftstore: GetLog(%d): %w", index, err)
	}
	c, ok, err := s.chunkFor(it, index)
	switch {
	case err != nil:
		err = fmt.Errorf("raftstore: GetLog(%d): %w", index, err)
	case !ok || !c.covers(index):
		err = raft.ErrLogNotFound
	default:
		// A read of the entry missed last, or of the one after it or
		// after the cached chunk, is a reader going in order, as raft's
		// replication does: it will want the rest of this chunk.
		inOrder := index-s.missed.Load() <= 1 || (cc != nil && cc.c.last()+1 == index)
		s.missed.Store(index)
		if c.n > 1 && inOrder {
			next := &cachedChunk{gen: gen}
			next.c, _ = parseChunk(c.last(), bytes.Clone(it.Value())) // parsed once already
			s.cache.Store(next)
		}
		err = decodeEntry(&c, index, log)
	}
	if cerr := it.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("raftstore: GetLog(%d): %w", index, cerr)
	}
	return err
}

// decodeEntry decodes entry index of c, which covers it, into log, from a
// copy of its bytes.
func decodeEntry(c *chunk, index uint64, log *raft.Log) error {
	if err := DecodeLog(bytes.Clone(c.entry(index)), log); err != nil {
		return fmt.Errorf("raftstore: GetLog(%d): %w", index, err)
	}
	if log.Index != index {
		return fmt.Errorf("raftstore: GetLog(%d): %w", index, corruptf("the chunk from index %d holds index %d in the place of %d", c.first, log.Index, index))
	}
	return nil
}

// chunkFor positions it (bounded to the log) at the chunk that would
// hold index (the first log key at or above it) and parses it; the chunk
// aliases the iterator's value. ok is false if there is none.
func (s *Store) chunkFor(it *vigil.Iterator, index uint64) (c chunk, ok bool, err error) {
	kp := keyPool.Get().(*[]byte)
	key := s.appendLogKey((*kp)[:0], index)
	ok = it.SeekGE(key)
	*kp = key
	keyPool.Put(kp)
	if !ok {
		return chunk{}, false, it.Error()
	}
	c, err = s.chunkAt(it)
	return c, err == nil, err
}

// chunkAt parses the chunk at the iterator's position.
func (s *Store) chunkAt(it *vigil.Iterator) (chunk, error) {
	last, err := s.indexOf(it.Key())
	if err != nil {
		return chunk{}, err
	}
	return parseChunk(last, it.Value())
}

// StoreLog stores one entry, synced.
func (s *Store) StoreLog(log *raft.Log) error {
	one := [1]*raft.Log{log}
	return s.StoreLogs(one[:])
}

// StoreLogs stores entries in one synced batch: after a crash either all of
// them are there or none. An entry whose index is already stored replaces
// it. The indexes need not be contiguous, with each other or with the log.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The spans after the write, planned before it (a lookup it needs must
	// not see the new entries' neighbourhood change under it).
	lo, hi := logs[0].Index, logs[0].Index
	oneRun := true
	for k, l := range logs {
		lo, hi = min(lo, l.Index), max(hi, l.Index)
		oneRun = oneRun && l.Index >= logs[0].Index && l.Index-logs[0].Index == uint64(k)
	}
	var edit spanEdit
	var next indexSpans
	var err error
	if oneRun {
		// Raft's case: ascending, contiguous.
		edit, err = s.spans.planAdd(lo, hi, s.seek)
	} else {
		next = s.spans.clone()
		for k := 0; k < len(logs) && err == nil; {
			a := logs[k].Index
			for k++; k < len(logs) && logs[k-1].Index < math.MaxUint64 && logs[k].Index == logs[k-1].Index+1; k++ {
			}
			err = next.add(a, logs[k-1].Index, s.seek)
		}
	}
	if err != nil {
		return fmt.Errorf("raftstore: StoreLogs(%d entries, %d..%d): finding the log bounds: %w", len(logs), lo, hi, err)
	}

	_, last := s.spans.bounds()
	appending := oneRun && (len(s.spans.s) == 0 || lo > last)
	floor := s.floor.Load()
	b := s.batch
	b.Reset()
	if lo < floor {
		// Below the floor: the floor goes (see the key layout).
		err = s.dropFloor(b, floor)
	}
	if err == nil && appending {
		// Raft's case: no stored chunk is touched.
		s.putChunks(b, logs)
	} else if err == nil {
		err = s.region.rewrite(s, b, logs, floor)
	}
	if err == nil {
		err = s.db.Apply(b, vigil.Sync)
	}
	if err == nil && lo < floor {
		s.floor.Store(0)
	}
	if !appending {
		s.gen.Add(1)
	}
	if b.Len() > maxRetainedBatch {
		s.batch = s.db.NewBatch()
	}
	if cap(s.valBuf) > maxRetainedBatch {
		s.valBuf = nil
	}
	if err != nil {
		return fmt.Errorf("raftstore: StoreLogs(%d entries, %d..%d): %w", len(logs), lo, hi, err)
	}
	// The entries are readable now: publish the new bounds.
	if oneRun {
		s.spans.apply(edit)
	} else {
		s.spans = next
	}
	s.publish()
	return nil
}

// putChunks adds to b the chunks of logs, whose indexes are consecutive.
func (s *Store) putChunks(b *vigil.Batch, logs []*raft.Log) {
	for len(logs) > 0 {
		var start, n int
		s.valBuf, start, n = appendLogChunk(s.valBuf[:0], logs, &s.sizes)
		s.keyBuf = s.appendLogKey(s.keyBuf[:0], logs[n-1].Index)
		b.Put(s.keyBuf, s.valBuf[start:])
		logs = logs[n:]
	}
}

func (s *Store) publish() {
	first, last := s.spans.bounds()
	s.first.Store(first)
	s.last.Store(last)
}

// DeleteRange deletes the entries with indexes in [min, max] with one
// synced Vigil batch around a range deletion, whatever the number of
// entries. A prefix of the log (raft's compaction after a snapshot) reads
// nothing: the batch raises the log's floor over what the chunk that
// straddles max keeps. Elsewhere (a follower's conflicting suffix) one
// seek at each end finds a chunk that straddles it, and the batch writes
// back its entries outside [min, max].
// The new bounds come from what the store knows of its indexes (but for
// the first cut into the log found at Open, which may have holes: that is
// one more seek).
func (s *Store) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	edit, err := s.spans.planRemove(min, max, s.seek)
	if err != nil {
		return fmt.Errorf("raftstore: DeleteRange(%d, %d): finding the log bounds: %w", min, max, err)
	}
	first, last := s.spans.bounds()
	floor := s.floor.Load()
	b := s.batch
	b.Reset()
	switch {
	case len(s.spans.s) == 0 || min > first:
		// Not a prefix: cut for real.
		err = s.trimEdges(b, min, max, floor)
	case max >= last:
		// The whole log: no chunk is left to hide anything in.
		floor = 0
		s.setFloor(b, floor)
	default:
		// A compaction: the chunk that straddles max hides its entries
		// up to max under the floor, without a read. (A floor never
		// goes down here: what lies below it may still be in a chunk.)
		if max >= floor {
			floor = max + 1
			s.setFloor(b, floor)
		}
	}
	if err == nil {
		b.DeleteRange(s.appendLogKey(nil, min), s.appendLogKeyAfter(nil, max))
		err = s.db.Apply(b, vigil.Sync)
		s.gen.Add(1)
	}
	if err != nil {
		return fmt.Errorf("raftstore: DeleteRange(%d, %d): %w", min, max, err)
	}
	s.floor.Store(floor)
	// Readers may see the old first index until the new one is stored;
	// GetLog of it then says raft.ErrLogNotFound, which raft expects from
	// a log being compacted.
	s.spans.apply(edit)
	s.publish()
	return nil
}

// seek returns the smallest stored index >= from (forward) or the largest
// <= from (backward). The caller knows one exists (a span end lies that
// way).
func (s *Store) seek(from uint64, forward bool) (index uint64, err error) {
	err = s.withLogIter(func(it *vigil.Iterator) error {
		index, err = s.seekIn(it, from, forward)
		return err
	})
	return index, err
}

// withLogIter calls fn with a new iterator over the log, and closes it.
func (s *Store) withLogIter(fn func(it *vigil.Iterator) error) error {
	it, err := s.db.NewIter(&vigil.IterOptions{LowerBound: s.logPrefix, UpperBound: s.logEnd})
	if err != nil {
		return err
	}
	err = fn(it)
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *Store) seekIn(it *vigil.Iterator, from uint64, forward bool) (uint64, error) {
	floor := s.floor.Load()
	if from < floor {
		if !forward {
			return 0, corruptf("no log entry up to index %d, below the log's floor %d", from, floor)
		}
		from = floor
	}
	c, ok, err := s.chunkFor(it, from)
	switch {
	case err != nil:
		return 0, err
	case ok && c.covers(from):
		return from, nil
	case forward && ok:
		return max(c.first, floor), nil
	case forward:
		return 0, corruptf("no log entry from index %d on, but the log's last entry lies there", from)
	}
	// The last chunk below from ends at the index in its key.
	kp := keyPool.Get().(*[]byte)
	key := s.appendLogKey((*kp)[:0], from)
	ok = it.SeekLT(key)
	*kp = key
	keyPool.Put(kp)
	if !ok {
		if err := it.Error(); err != nil {
			return 0, err
		}
		return 0, corruptf("no log entry up to index %d, but the log's first entry lies there", from)
	}
	return s.indexOf(it.Key())
}

func (s *Store) stableKey(k []byte) []byte {
	return append(append(make([]byte, 0, len(s.stablePrefix)+len(k)), s.stablePrefix...), k...)
}

// Set stores val under key, synced.
func (s *Store) Set(key, val []byte) error {
	if err := s.db.Put(s.stableKey(key), val, vigil.Sync); err != nil {
		return fmt.Errorf("raftstore: Set(%q): %w", key, err)
	}
	return nil
}

// Get returns a copy of the value stored under key, or ErrKeyNotFound.
func (s *Store) Get(key []byte) ([]byte, error) {
	kp := keyPool.Get().(*[]byte)
	k := append(append((*kp)[:0], s.stablePrefix...), key...)
	v, err := s.db.Get(k)
	*kp = k
	keyPool.Put(kp)
	if err != nil {
		if errors.Is(err, vigil.ErrNotFound) {
			return nil, ErrKeyNotFound
		}
		return nil, fmt.Errorf("raftstore: Get(%q): %w", key, err)
	}
	return v, nil
}

// SetUint64 stores val under key as 8 bytes big-endian, synced.
func (s *Store) SetUint64(key []byte, val uint64) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], val)
	return s.Set(key, b[:])
}

// GetUint64 returns the number SetUint64 stored under key, or
// ErrKeyNotFound.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raftstore: GetUint64(%q): %w", key, corruptf("value of %d bytes, want 8", len(v)))
	}
	return binary.BigEndian.Uint64(v), nil
}
