package raftstore

import (
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
//	P "l" <index: 8 bytes big-endian>   a log entry (AppendLog's encoding)
//	P "s" <key>                         a stable-store value
//
// Big-endian indexes sort numerically, so the log is one key range in
// index order: FirstIndex and LastIndex are its first and last keys, and a
// DeleteRange of indexes is a Vigil DeleteRange of keys.
const (
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
// DeleteRange one synced range deletion, Set and SetUint64 one synced put.
// GetLog returns raft.ErrLogNotFound for a missing entry, Get and GetUint64
// return ErrKeyNotFound for a missing key; a value that does not decode is
// an error wrapping vigil.ErrCorruption.
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
type Store struct {
	db    *vigil.DB
	owned bool

	logPrefix    []byte // Prefix "l"
	logEnd       []byte // Prefix "m": the exclusive end of the log
	stablePrefix []byte // Prefix "s"

	// mu serializes log writes and guards what follows it.
	mu     sync.Mutex
	batch  *vigil.Batch
	keyBuf []byte
	valBuf []byte
	spans  indexSpans // the stored indexes (index 0 is a valid key)

	// first and last publish spans.bounds() to readers.
	first, last atomic.Uint64
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
		logPrefix:    tagged(logTag),
		logEnd:       tagged(logEndTag),
		stablePrefix: tagged(stableTag),
		batch:        db.NewBatch(),
	}
	it, err := db.NewIter(&vigil.IterOptions{LowerBound: s.logPrefix, UpperBound: s.logEnd})
	if err != nil {
		return nil, fmt.Errorf("raftstore: reading the log bounds: %w", err)
	}
	var first, last uint64
	if it.First() {
		if first, err = s.indexOf(it.Key()); err == nil && it.Last() {
			last, err = s.indexOf(it.Key())
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
	kp := keyPool.Get().(*[]byte)
	key := s.appendLogKey((*kp)[:0], index)
	v, err := s.db.Get(key)
	*kp = key
	keyPool.Put(kp)
	if err != nil {
		if errors.Is(err, vigil.ErrNotFound) {
			return raft.ErrLogNotFound
		}
		return fmt.Errorf("raftstore: GetLog(%d): %w", index, err)
	}
	if err := DecodeLog(v, log); err != nil {
		return fmt.Errorf("raftstore: GetLog(%d): %w", index, err)
	}
	if log.Index != index {
		return fmt.Errorf("raftstore: GetLog(%d): %w", index, corruptf("the entry stored under index %d says index %d", index, log.Index))
	}
	return nil
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

	b := s.batch
	b.Reset()
	for _, l := range logs {
		s.keyBuf = s.appendLogKey(s.keyBuf[:0], l.Index)
		s.valBuf = AppendLog(s.valBuf[:0], l)
		b.Put(s.keyBuf, s.valBuf)
	}
	err = s.db.Apply(b, vigil.Sync)
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

func (s *Store) publish() {
	first, last := s.spans.bounds()
	s.first.Store(first)
	s.last.Store(last)
}

// DeleteRange deletes the entries with indexes in [min, max] with one
// synced Vigil range deletion, whatever the number of entries. Raft calls
// it to drop a prefix after a snapshot and a conflicting suffix on a
// follower. The new bounds come from what the store knows of its indexes,
// without reading the DB (but for the first cut into the log found at
// Open, which may have holes: that is one point read).
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
	start := s.appendLogKey(nil, min)
	end := s.logEnd
	if max < math.MaxUint64 {
		end = s.appendLogKey(nil, max+1)
	}
	if err := s.db.DeleteRange(start, end, vigil.Sync); err != nil {
		return fmt.Errorf("raftstore: DeleteRange(%d, %d): %w", min, max, err)
	}
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
func (s *Store) seek(from uint64, forward bool) (uint64, error) {
	key := s.appendLogKey(nil, from)
	if ok, err := s.db.Has(key); err != nil || ok {
		return from, err
	}
	o := &vigil.IterOptions{LowerBound: key, UpperBound: s.logEnd}
	if !forward {
		o = &vigil.IterOptions{LowerBound: s.logPrefix, UpperBound: s.appendLogKey(nil, from+1)}
	}
	it, err := s.db.NewIter(o)
	if err != nil {
		return 0, err
	}
	var ok bool
	if forward {
		ok = it.First()
	} else {
		ok = it.Last()
	}
	var index uint64
	switch {
	case ok:
		index, err = s.indexOf(it.Key())
	case it.Error() != nil:
		err = it.Error()
	case forward:
		err = corruptf("no log entry from index %d on, but the log's last entry lies there", from)
	default:
		err = corruptf("no log entry up to index %d, but the log's first entry lies there", from)
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return index, err
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
