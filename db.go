// Package vigil is an embedded, ordered key-value store (an LSM tree) whose
// promise is no silent corruption, at full speed: every byte it keeps, in
// memory or on disk, is guarded by a checksum of a type the user picks, and
// with ParanoidMemoryChecks on, corruption in memory is reported at read time
// as ErrCorruption instead of being flushed to disk.
//
// Writes go to a write-ahead log and a lock-free skiplist memtable; full
// memtables are flushed to checksummed SST files in L0; leveled compaction
// keeps L1..L6 in shape. Reads merge the memtables and levels.
//
//	db, err := vigil.Open("/tmp/db", nil)
//	err = db.Put([]byte("k"), []byte("v"), nil)
//	v, err := db.Get([]byte("k"))
//	it, err := db.NewIter(nil)
//	for it.First(); it.Valid(); it.Next() { use(it.Key(), it.Value()) }
//	err = it.Close()
//	err = db.Close()
package vigil

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/cache"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/internal/rangedel"
	"github.com/vigildb/vigil/memtable"
	"github.com/vigildb/vigil/sst"
)

// DB is an open database.
//
// Concurrency: every method is safe for concurrent use by many goroutines.
// Writers serialize only for the short step that assigns sequence numbers
// and appends to the WAL (commitMu); memtable inserts run concurrently;
// readers take no locks at all (they load an immutable readState with one
// atomic reference count).
//
// Invariants:
//   - WAL order equals sequence-number order (both are decided under
//     commitMu).
//   - Writes become visible in sequence-number order: visibleSeq only moves
//     forward, and only past batches fully applied to their memtable, so a
//     reader never sees part of a batch.
//   - An SST is added to the LSM only after it is written, validated and
//     synced, and the MANIFEST edit naming it is synced; a WAL is deleted
//     only after every memtable holding its data has been flushed.
//   - After a background error (failed flush or compaction, corruption found
//     there, WAL write failure) the DB refuses writes with ErrReadOnly and
//     keeps every file that may hold unflushed data.
type DB struct {
	dirname string
	opts    *Options
	fs      vfs.FS
	// cksum is the checksum type for new files and memtables, resolved
	// (never checksum.Default), as files record it.
	cksum checksum.Type
	// cmp is Options.Comparer, resolved: the order of every key.
	cmp *base.Comparer
	// userReads are the table reads' options of Get and the user's
	// iterators (Options.SkipReadChecksums); their Filter counts into
	// Metrics.Filter.
	userReads sst.ReadOptions
	// session is random per Open: with the DB's id and a file number it
	// makes the identity of every table this Open writes (see
	// base.TableIdentity), so that tables of two diverged copies of one
	// DB (one restored from a backup, say) never share one.
	session [16]byte

	fileLock   io.Closer
	dataDir    vfs.File
	log        infoLogger
	events     *eventQueue
	blockCache *cache.Cache
	tableCache *tableCache
	closed     atomic.Bool

	// commitMu serializes the ordering step of writes: sequence numbers,
	// memtable choice (and rotation), WAL append.
	commitMu sync.Mutex
	// nextSeq is the next sequence number to assign (commitMu).
	nextSeq uint64
	// visibleSeq: every sequence number <= it is applied and readable.
	visibleSeq atomic.Uint64
	pub        publisher

	readState atomic.Pointer[readState]
	// l0Files mirrors the current version's L0 file count, for the write
	// path's lock-free slowdown check.
	l0Files atomic.Int64
	// delay paces writes while L0 is at or above the slowdown trigger.
	delay writeDelay

	// mu guards everything below and the compacting flags of files.
	mu sync.Mutex
	// stallCond is signalled when a flush or compaction finishes, waking
	// stalled writers and Flush/Compact waiters.
	stallCond *sync.Cond
	mem       *memTableEntry
	imm       []*memTableEntry // oldest first
	// memCount counts the mutable memtables since Open (see
	// nextMemtableSize).
	memCount int
	// wal is the DB's WALs (see walSet for which lock guards what).
	wal       walSet
	vs        versionSet
	snapshots snapshotList
	bgErr     error
	// bgErrFast mirrors bgErr for the write path's lock-free check.
	bgErrFast atomic.Pointer[error]
	// flushPending signals the flush goroutine.
	flushPending chan struct{}
	compactKick  chan struct{}
	// obsoleteKick wakes obsoleteLoop: tables went obsolete.
	obsoleteKick chan struct{}
	bgWG         sync.WaitGroup
	closing      chan struct{}
	scrubMu      sync.Mutex // one scrubber pass at a time (scrub.go)
	healed       []uint64   // tables healed from a backup since Open; guarded by scrubMu
	// flushing is set while flushOne writes a memtable out (for
	// paceBehindFlush and tests).
	flushing atomic.Bool
	// compactionMu serializes compactions, background and manual.
	compactionMu sync.Mutex
	// picker decides what to compact (d.mu).
	picker compactionPolicy
	// seekAllowance is the bytes of a table per seek it may be charged
	// before a seek compaction (0: none; see seek_compaction.go).
	seekAllowance int64
	// seekDue holds the tables whose seeks reached their allowance, with
	// their levels, for the compaction loop. Guarded by seekMu, not mu:
	// readers add to it.
	seekMu  sync.Mutex
	seekDue []seekCandidate
	// ingestSeq is the first seqnum of an ingestion that has taken its
	// seqnums and not yet installed its MANIFEST edit (0: none): the flush
	// of a memtable holding later seqnums waits for it (see ingest.go).
	ingestSeq uint64

	// obsoleteTables are files no version references, to delete. Guarded by
	// obsoleteMu, not mu: versions are released on readers' goroutines.
	obsoleteMu     sync.Mutex
	obsoleteTables []*manifest.FileMetadata
	// deleteMu makes deletion passes one at a time: a caller's pass
	// (the compaction loop's, before its next compaction) returns only
	// after a pass already under way on obsoleteLoop has removed its
	// files, so a compaction's inputs are gone before the next one writes.
	deleteMu sync.Mutex

	stats dbStats
	// openIters counts iterators not yet closed, so that Close can report
	// leaked ones.
	openIters atomic.Int64
	// testingHooks lets tests intercept internal steps; nil in production.
	testingHooks *testingHooks
}

// memTableEntry is a memtable in the DB's list, with the WAL that holds its
// data and the writers still applying batches to it.
//
// Lifetime: the arena lives outside the Go heap (memtable.ManualMemory) and
// is freed when the last reference goes. The DB's list (d.mem, then d.imm)
// holds one reference until the memtable is flushed (or the DB closes), and
// every readState that includes it holds one, so a Get, an iterator or a
// flush that loaded a read state can read it until it releases that state.
// Writers need none: a memtable stays in the list until its flush, which
// waits for them (writers).
type memTableEntry struct {
	// t is what reads and the flush use: mt, or a large batch applied as a
	// whole (flushableBatch), never written to.
	t flushable
	// mt is the memtable writers insert into; nil for a flushable batch.
	mt *memtable.MemTable
	// refs counts the references described above.
	refs atomic.Int32
	// acct is the DB's memtable byte count (stats.memtableBytes).
	acct *memAccount
	// logNum is the WAL holding this memtable's data; 0 without a WAL.
	logNum uint64
	// cmp is the DB's comparer (resolved), the order of t's keys.
	cmp *base.Comparer
	// writers counts batches assigned to this memtable and not yet applied;
	// a flush waits for them.
	writers pendingWriters
	// flushed is closed once the memtable is in an SST (or empty).
	flushed chan struct{}
	// lastSeq is the last seqnum of the batches assigned to this memtable
	// (set under commitMu, so it only grows): a flush records it as the
	// MANIFEST's last seqnum, so that the next WAL's batches continue it.
	lastSeq atomic.Uint64
	// rangeDels counts range tombstones applied, so that Get skips the
	// tombstone scan of memtables without any.
	rangeDels atomic.Int64
	// tombs caches the memtable's range tombstones, copied and fragmented
	// (see rangedel.Cache).
	tombs rangedel.Cache
	// forceFlush says that it and every memtable before it flush now,
	// whatever flushDueLocked's threshold says: someone waits for it
	// (waitFlushedLocked: Flush, Compact, a checkpoint, an ingestion,
	// Close without a WAL), it is a large batch, a large batch needs its
	// place, or flushDueLocked found the immutable memtables due.
	// Guarded by DB.mu.
	forceFlush bool
	// poisoned is set when a batch failed halfway into this memtable
	// (which takes corruption in the memtable): every later read of it
	// fails, so that the partial batch is never visible.
	poisoned atomic.Pointer[error]
}

// pendingWriters counts the batches assigned to a memtable (under
// commitMu) and not yet applied to it (without it). A flush waits for them;
// a large batch, which replaces an empty mutable memtable, asks whether
// there are any (a WaitGroup alone cannot say).
type pendingWriters struct {
	wg sync.WaitGroup
	n  atomic.Int32
}

func (p *pendingWriters) add()  { p.n.Add(1); p.wg.Add(1) }
func (p *pendingWriters) done() { p.n.Add(-1); p.wg.Done() }
func (p *pendingWriters) wait() { p.wg.Wait() }

// none reports whether no batch is on its way into the memtable. Under
// commitMu, where batches are assigned, a true answer stays true.
func (p *pendingWriters) none() bool { return p.n.Load() == 0 }

// tombstones returns the memtable's range tombstones and, from the cache,
// their index; without a current cache, the tombstones visible at snap read
// from the skiplist and a nil index. The result must not be modified.
func (e *memTableEntry) tombstones(snap uint64) ([]rangedel.Tombstone, *rangedel.Index, error) {
	all, idx, ok, err := e.tombs.Get(e.cmp, e.rangeDels.Load(), e.t)
	if err != nil || ok {
		return all, idx, err
	}
	ts, err := e.t.RangeDels(snap)
	return ts, nil, err
}

// newMemTableEntry wraps mt with the list's reference. acct is the DB's
// count of memtable bytes, which the last unref gives back.
func newMemTableEntry(cmp *base.Comparer, mt *memtable.MemTable, logNum uint64, acct *memAccount) *memTableEntry {
	e := &memTableEntry{t: mt, mt: mt, cmp: cmp, logNum: logNum, flushed: make(chan struct{}), acct: acct}
	e.refs.Store(1)
	return e
}

// newBatchEntry wraps a flushable batch with the list's reference; its
// memory is counted in acct like a memtable's.
func newBatchEntry(cmp *base.Comparer, fb *flushableBatch, logNum uint64, acct *memAccount) *memTableEntry {
	e := &memTableEntry{t: fb, cmp: cmp, logNum: logNum, flushed: make(chan struct{}), acct: acct, forceFlush: true}
	e.refs.Store(1)
	e.rangeDels.Store(int64(len(fb.tombs)))
	e.lastSeq.Store(fb.seq + fb.count - 1)
	acct.add(int64(fb.Capacity()))
	return e
}

func (e *memTableEntry) ref() { e.refs.Add(1) }

// idleAndEmpty reports whether the mutable memtable holds nothing and
// never will unless written again: no batch on its way in, no entry, not
// poisoned by a failed one. commitMu is held. The writers are asked first:
// once none is left (and under commitMu none can be assigned), every one
// that was has finished its inserts and any poisoning, so the two checks
// after it see them; asked the other way round, a batch could land between
// an Empty that saw nothing and a none that sees it gone.
func (e *memTableEntry) idleAndEmpty() bool {
	return e.writers.none() && e.mt.Empty() && e.poisoned.Load() == nil
}

// unref drops a reference; the last one frees the arena.
func (e *memTableEntry) unref() {
	switch n := e.refs.Add(-1); {
	case n == 0:
		releaseMemTable(e.t, e.acct)
	case n < 0:
		panic(fmt.Sprintf("vigil: memtable (WAL %06d) released more often than referenced", e.logNum))
	}
}

func (e *memTableEntry) poison(err error) {
	e.poisoned.CompareAndSwap(nil, &err)
}

// readable returns an error if the memtable is poisoned.
func (e *memTableEntry) readable() error {
	if p := e.poisoned.Load(); p != nil {
		return base.CorruptionErrorf("memtable (WAL %06d) holds a partly applied batch and cannot be read until the DB is reopened: %w", e.logNum, *p)
	}
	return nil
}

// readState is what a reader needs: the memtables and the version, captured
// together. Immutable; reference counted so that files stay until the last
// reader of a version is done.
type readState struct {
	refs atomic.Int32
	mem  *memTableEntry
	// imms are the immutable memtables, newest first.
	imms []*memTableEntry
	v    *manifest.Version
}

// tryRef takes a reference unless the state was already released.
func (s *readState) tryRef() bool { return tryRef(&s.refs) }

// tryRef raises a reference count unless it already reached zero (the
// object is being freed, and must never be revived).
func tryRef(refs *atomic.Int32) bool {
	for {
		n := refs.Load()
		if n <= 0 {
			return false
		}
		if refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (s *readState) unref() {
	if s.refs.Add(-1) == 0 {
		s.mem.unref()
		for _, e := range s.imms {
			e.unref()
		}
		s.v.Unref()
	}
}

// loadReadState returns the current read state with a reference; callers
// unref it when done. It returns nil once Close has released the state: a
// reader that passed its closed check just before Close must still get
// ErrClosed, not a nil dereference.
func (d *DB) loadReadState() *readState {
	for {
		s := d.readState.Load()
		if s == nil {
			return nil
		}
		if s.tryRef() {
			return s
		}
	}
}

// updateReadStateLocked publishes a new read state from d.mem, d.imm and the
// current version. d.mu is held.
func (d *DB) updateReadStateLocked() {
	s := &readState{mem: d.mem, v: d.vs.current}
	s.refs.Store(1)
	s.v.Ref()
	s.mem.ref()
	s.imms = make([]*memTableEntry, len(d.imm))
	for i, e := range d.imm {
		e.ref()
		s.imms[len(d.imm)-1-i] = e
	}
	if old := d.readState.Swap(s); old != nil {
		old.unref()
	}
	d.l0Files.Store(int64(len(s.v.Levels[0])))
}

// writable returns nil if the DB accepts writes.
func (d *DB) writable() error {
	if d.closed.Load() {
		return ErrClosed
	}
	if d.opts.ReadOnly {
		return fmt.Errorf("%w: opened with ReadOnly", ErrReadOnly)
	}
	if p := d.bgErrFast.Load(); p != nil {
		return fmt.Errorf("%w: writes stopped by a background error: %w", ErrReadOnly, *p)
	}
	return nil
}

// setBackgroundError records the first background error; from then on the
// DB refuses writes. d.mu is held.
func (d *DB) setBackgroundErrorLocked(err error, what string) {
	if d.bgErr == nil {
		d.bgErr = fmt.Errorf("%s: %w", what, err)
		e := d.bgErr
		d.bgErrFast.Store(&e)
		d.log.Errorf("background error, DB is now read-only: %v", d.bgErr)
		d.emitBackgroundError(d.bgErr)
	}
	d.stallCond.Broadcast()
}

// BackgroundError returns the error that stopped writes, or nil.
func (d *DB) BackgroundError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.bgErr
}

// readLatest, as a read's seqnum, means the visible seqnum, loaded after
// the read state. In that order a read never misses a version: a flush or
// compaction leaves out a version only when a newer one covers it and
// every batch of its input is visible, so a state published after it is
// read with a seqnum at least as new as the version that covers it. The
// other order could pair a seqnum loaded long ago with a state that no
// longer holds the version that seqnum sees. Above every real seqnum.
const readLatest = ^uint64(0)

// Get returns a copy of the newest value of key, or ErrNotFound.
func (d *DB) Get(key []byte) ([]byte, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	return d.get(nil, key, readLatest, false)
}

// Has reports whether key has a live value, without copying it.
func (d *DB) Has(key []byte) (bool, error) {
	if d.closed.Load() {
		return false, ErrClosed
	}
	_, err := d.get(nil, key, readLatest, true)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// GetAppend is Get appending the value to dst: with a reused buffer, a read
// allocates nothing (db_bench's readrandom reuses its value string the same
// way). It returns the extended buffer, or dst unchanged and ErrNotFound.
func (d *DB) GetAppend(dst, key []byte) ([]byte, error) {
	if d.closed.Load() {
		return dst, ErrClosed
	}
	v, err := d.get(dst, key, readLatest, false)
	if err != nil {
		return dst, err
	}
	return v, nil
}

// get looks key up at snapshot seq (see findVersion) and returns its
// value as Get does.
func (d *DB) get(dst, key []byte, snap uint64, noCopy bool) ([]byte, error) {
	rs := d.loadReadState()
	if rs == nil {
		return dst, ErrClosed
	}
	defer rs.unref()
	if snap == readLatest {
		snap = d.visibleSeq.Load() // after the state: see readLatest
	}
	v, err := d.findVersion(rs, key, snap)
	if err != nil || !v.found {
		if err == nil {
			err = ErrNotFound
		}
		return nil, err
	}
	if v.kind == base.KindMerge && v.seq >= v.cover {
		return d.getMerged(dst, rs, key, v, noCopy)
	}
	// value aliases a memtable or a cached block until ref is released.
	res, err := getResult(dst, v.value, v.seq, v.kind, v.cover, noCopy)
	v.ref.Release()
	return res, err
}

// version is what findVersion found of a key: its newest visible point
// version if found (value aliasing a memtable, or a cached block held by
// ref, which the caller releases), and cover, the largest seqnum of a
// visible range tombstone over the key in the sources searched (those as
// new as the version, or all of them when nothing was found before a
// tombstone ended the search).
type version struct {
	value []byte
	seq   uint64
	kind  base.Kind
	found bool
	cover uint64
	ref   cache.Handle
}

// findVersion searches rs for key at snapshot snap: memtables newest
// first, then L0 files newest first, then one file per level L1..L6,
// stopping at the first version found. A range tombstone seen in a source
// hides older versions in that source and every older source, so the
// search also stops after a source in which one covers the key.
func (d *DB) findVersion(rs *readState, key []byte, snap uint64) (version, error) {
	// cover is the largest seq of a visible range tombstone covering key
	// seen so far; a version below it is deleted.
	var cover uint64
	for i := -1; i < len(rs.imms); i++ {
		e := rs.mem
		if i >= 0 {
			e = rs.imms[i]
		}
		if err := e.readable(); err != nil {
			return version{}, err
		}
		if e.rangeDels.Load() > 0 {
			ts, idx, err := e.tombstones(snap)
			if err != nil {
				return version{}, d.memCorruption(err)
			}
			cover = idx.Raise(d.cmp, ts, key, snap, cover)
		}
		value, seq, kind, found, err := e.t.Get(key, snap)
		if err != nil {
			return version{}, d.memCorruption(err)
		}
		if found || cover > 0 {
			return version{value: value, seq: seq, kind: kind, found: found, cover: cover}, nil
		}
	}
	// Arrays for up to ten L0 tables and the six levels below; a Get
	// with more candidates allocates.
	var filesBuf [16]*manifest.FileMetadata
	var hsBuf [16]*tableEntry
	files := d.tablesFor(filesBuf[:0], rs.v, key, snap)
	hs := d.touchTables(hsBuf[:0], files, key)
	// Every reference left in hs is released, on every return and if a
	// comparer panics: findInTables clears those it has released.
	defer releaseTables(hs)
	return d.findInTables(files, hs, key, snap, cover)
}

// releaseTables releases the references hs holds (nil: none).
func releaseTables(hs []*tableEntry) {
	for _, h := range hs {
		if h != nil {
			h.release()
		}
	}
}

// tablesFor appends to dst the tables of v that may hold key at snap, in
// the order a Get reads them: L0's overlapping ones newest first, then
// the one of each level below that spans key.
func (d *DB) tablesFor(dst []*manifest.FileMetadata, v *manifest.Version, key []byte, snap uint64) []*manifest.FileMetadata {
	for level := 0; level < manifest.NumLevels; level++ {
		files := v.Levels[level]
		if len(files) == 0 {
			continue
		}
		if level > 0 {
			// One file per sorted level can hold the key.
			i := manifest.FindFile(d.cmp, files, key)
			if i == len(files) {
				continue
			}
			files = files[i : i+1]
		}
		for _, f := range files {
			if f.SmallestSeq <= snap && f.ContainsUserKey(d.cmp, key) {
				dst = append(dst, f)
			}
		}
	}
	return dst
}

// touchTables appends to dst a reference to each of files' tables that is
// open (tableCache.peek; nil for one that is not, which findInTables opens
// in its turn, so a Get opens no table it would not read; a peeked table
// counts as a hit only when it is read), then loads the
// line of each one's filter that the Get's probe will read
// (sst.Reader.TouchFilter).
//
// Why: on a DB larger than the CPU cache every filter probe of a Get is a
// cache miss, one per level, and each waited for the one before: in
// readrandom on a 10M-key DB, 5 levels' probes were 11 % of the time
// (0.99 s of 8.6 in a profile). Loads that depend on nothing overlap in the
// CPU, so the touches cost about one miss for them all, and the probes in
// order then hit. The references are taken first, in a loop of their own:
// an atomic add waits for the loads before it, and would keep the touches
// one after another.
func (d *DB) touchTables(dst []*tableEntry, files []*manifest.FileMetadata, key []byte) []*tableEntry {
	for _, f := range files {
		dst = append(dst, d.tableCache.peek(f))
	}
	var sink byte
	for _, h := range dst {
		if h != nil {
			sink += h.reader.TouchFilter(key)
		}
	}
	runtime.KeepAlive(sink) // the loads must happen
	return dst
}

// findInTables is findVersion below the memtables: it reads files in
// order until one holds a version of key or a range tombstone covering
// it. hs[i] is files[i]'s table if touchTables referenced it; a table it
// did not is opened in its turn (tableCache.get) and its reference kept
// in hs[i] while it is read. A reference is cleared from hs once
// released; the caller releases the rest.
func (d *DB) findInTables(files []*manifest.FileMetadata, hs []*tableEntry, key []byte, snap, cover uint64) (version, error) {
	for i, f := range files {
		if hs[i] == nil {
			h, err := d.tableCache.get(f)
			if err != nil {
				return version{}, err
			}
			hs[i] = h
		} else {
			hs[i].noteHit()
		}
		value, seq, kind, found, c, ref, err := d.getFromTable(hs[i], f, key, snap, cover)
		hs[i].release()
		hs[i] = nil
		if err != nil {
			return version{}, err
		}
		cover = c
		if found || cover > 0 {
			return version{value: value, seq: seq, kind: kind, found: found, cover: cover, ref: ref}, nil
		}
		ref.Release()
	}
	return version{}, nil
}

// getMerged answers a Get whose newest visible version v is a merge
// operand: it walks down the key's older versions (findVersion again,
// below each one found: the sources hold a key's versions newest first,
// so the next older one is the newest below), combining operands newest
// first, until a Set, a deletion or a range deletion ends the chain, or
// nothing is left; then it merges the result into that base (nil for
// none). v.ref is released.
func (d *DB) getMerged(dst []byte, rs *readState, key []byte, v version, noCopy bool) ([]byte, error) {
	m := d.opts.Merger
	if m == nil {
		v.ref.Release()
		return nil, errNoMerger(key)
	}
	acc := slices.Clone(base.NonNil(v.value))
	v.ref.Release()
	for {
		var next version
		if v.seq > 0 {
			var err error
			if next, err = d.findVersion(rs, key, v.seq-1); err != nil {
				return nil, err
			}
		}
		// below is nil only when nothing lies below: an empty value is
		// a value.
		var below []byte
		live := next.found && next.seq >= next.cover && next.kind != base.KindDelete
		if live {
			below = base.NonNil(next.value)
		}
		var err error
		acc, err = m.Merge(key, base.Clip(below), base.Clip(acc))
		next.ref.Release()
		if err != nil {
			return nil, mergeFailed(key, err)
		}
		if live && next.kind == base.KindMerge {
			v = next // an operand: the chain goes on below it
			continue
		}
		if noCopy {
			return nil, nil
		}
		if dst == nil {
			dst = make([]byte, 0, len(acc))
		}
		return append(dst, acc...), nil
	}
}

// errNoMerger is a read's error for a merge operand in a DB opened without
// Options.Merger.
func errNoMerger(key []byte) error {
	return base.InvalidArgumentErrorf("key %s has merge operands, but the DB was opened without Options.Merger", base.HexKey(key))
}

// mergeFailed wraps the Merger's error for the key it failed on.
func mergeFailed(key []byte, err error) error {
	return fmt.Errorf("vigil: merging the operands of key %s: %w", base.HexKey(key), err)
}

// getResult turns the version Get found into its answer: the value appended
// to dst (a fresh copy when dst is nil) for a live Set, ErrNotFound for a
// deletion or a version under a range tombstone.
func getResult(dst, value []byte, seq uint64, kind base.Kind, cover uint64, noCopy bool) ([]byte, error) {
	if seq < cover || kind != base.KindSet {
		return nil, ErrNotFound
	}
	if noCopy {
		return nil, nil
	}
	if dst == nil {
		return append(make([]byte, 0, len(value)), value...), nil
	}
	return append(dst, value...), nil
}

// memCorruption wraps a memtable read error for the caller.
func (d *DB) memCorruption(err error) error {
	d.stats.memCorruptions.Add(1)
	if !errors.Is(err, ErrCorruption) {
		err = base.MarkCorruption(err)
	}
	err = fmt.Errorf("memtable: %w", err)
	d.emitCorruption(err)
	return err
}

// getFromTable looks key up in one SST (h, f's open table, referenced by
// the caller), first raising cover with the table's range tombstones. A
// found value aliases a cached block: the caller releases ref (exactly
// once, found or not) when done with it.
func (d *DB) getFromTable(h *tableEntry, f *manifest.FileMetadata, key []byte, snap, cover uint64) (value []byte, seq uint64, kind base.Kind, found bool, newCover uint64, ref cache.Handle, err error) {
	if f.NumRangeDels > 0 {
		cover = h.tombs.Raise(d.cmp, h.reader.RangeDels(), key, snap, cover)
	}
	value, seq, kind, found, ref, err = h.reader.GetRefWithOptions(key, snap, d.userReads)
	if err != nil {
		ref.Release()
		err = fmt.Errorf("table %06d: %w", f.FileNum, err)
		d.emitCorruption(err)
		return nil, 0, 0, false, cover, cache.Handle{}, err
	}
	return value, seq, kind, found, cover, ref, nil
}

// Close syncs the WAL and releases every resource. Unflushed writes stay in
// the WAL and are replayed at the next Open; with DisableWAL they are
// flushed first, so a clean Close loses nothing. Close is idempotent: later
// calls return ErrClosed.
func (d *DB) Close() error {
	if d.closed.Swap(true) {
		return ErrClosed
	}
	var errs []error
	if n := d.openIters.Load(); n > 0 {
		// Pebble reports "leaked iterators" the same way. The iterators
		// stop with ErrClosed from now on; closing them is still needed
		// to release what they hold.
		errs = append(errs, fmt.Errorf("vigil: Close with %d open iterator(s) (leaked iterators): they now return ErrClosed", n))
	}
	// Wake writers stalled without commitMu, so that they see closed.
	d.mu.Lock()
	d.stallCond.Broadcast()
	d.mu.Unlock()
	// Wait for in-flight writes, and keep new ones out (closed is set):
	// taking the lock is the wait.
	d.commitMu.Lock()
	//lint:ignore SA2001 the lock is taken only to wait for writers inside it
	d.commitMu.Unlock()
	// Writers apply their batches after releasing commitMu: wait for those
	// still inserting, or the memtables freed below would be written after
	// their memory is gone. No writer is assigned a memtable any more
	// (closed is set, and checked under commitMu).
	d.mu.Lock()
	pending := append([]*memTableEntry{d.mem}, d.imm...)
	d.mu.Unlock()
	for _, e := range pending {
		if e != nil {
			e.writers.wait()
		}
	}

	if d.opts.DisableWAL && !d.opts.ReadOnly {
		// Without a WAL the memtables are the only copy of recent writes:
		// flush them, and if that is impossible say so rather than drop
		// acknowledged writes silently.
		d.mu.Lock()
		bgErr := d.bgErr
		unflushed := d.mem.mt.Count()
		for _, e := range d.imm {
			unflushed += e.t.Count()
		}
		d.mu.Unlock()
		if bgErr == nil {
			if err := d.flushAndWait(true); err != nil {
				errs = append(errs, fmt.Errorf("flush at close (WAL disabled): %w", err))
			}
		} else if unflushed > 0 {
			errs = append(errs, fmt.Errorf("%w: WAL disabled and a background error stopped flushes: %d unflushed writes are lost: %w",
				ErrReadOnly, unflushed, bgErr))
		}
	}

	d.mu.Lock()
	close(d.closing)
	d.stallCond.Broadcast()
	d.mu.Unlock()
	d.bgWG.Wait()
	// Wait for a manual Compact running on a caller's goroutine.
	d.compactionMu.Lock()
	defer d.compactionMu.Unlock()

	d.mu.Lock()
	if d.wal.spare != nil {
		d.discardWALLocked(d.wal.spare, d.wal.spareNum)
		d.wal.spare = nil
	}
	if d.wal.live != nil {
		// The clean-close record: after it, damage to the last batch cannot
		// pass for a torn tail (see walmeta.go). It is written after a
		// background error too (a failed flush or compaction leaves the WAL
		// whole); only a WAL writer that failed refuses it, and its Close
		// below reports that failure.
		_, _ = d.wal.live.WriteRecord(encodeWALClose(d.nextSeq - 1))
		if err := d.wal.live.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing WAL: %w", err))
		}
		d.wal.closedSyncs.Add(d.wal.live.Stats().Syncs)
		d.wal.live = nil
	}
	if !d.opts.ReadOnly && d.bgErr == nil && d.vs.manifest != nil {
		// The MANIFEST's clean-close record (an edit that changes nothing):
		// after it, damage to the last real edit (with DisableWAL, the
		// flush this Close made) cannot pass for a torn tail. The WAL's
		// close record does the same for the WAL.
		if err := d.vs.logAndApply(&manifest.VersionEdit{}); err != nil {
			errs = append(errs, fmt.Errorf("writing the MANIFEST's clean-close record: %w", err))
		}
	}
	if err := d.vs.close(); err != nil {
		errs = append(errs, err)
	}
	d.releaseMemtables()
	d.mu.Unlock()
	d.deleteObsoleteFiles()

	return errors.Join(append(errs, d.closeHandles()...)...)
}

// closeHandles is the last step of Close: the table cache, the LOG, the
// event queue (delivering what is queued), the directory handle and the
// LOCK (released last, so that another process cannot open the DB while
// this one still holds any of its files).
func (d *DB) closeHandles() []error {
	var errs []error
	if err := d.tableCache.close(); err != nil {
		errs = append(errs, err)
	}
	d.log.Infof("closed")
	if err := d.log.Close(); err != nil {
		errs = append(errs, err)
	}
	d.events.close()
	if d.dataDir != nil {
		if err := d.dataDir.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if d.fileLock != nil {
		if err := d.fileLock.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// dbStats are counters kept outside of d.mu.
type dbStats struct {
	memCorruptions atomic.Int64
	// batchCorruptions counts batches Apply refused (batchRefused).
	batchCorruptions atomic.Int64
	writeStalls      atomic.Int64
	stalledWriters   atomic.Int64
	// memtableBytes is the arena capacity of the memtables not yet freed:
	// the memory they hold outside the Go heap.
	memtableBytes     memAccount
	slowdowns         atomic.Int64
	slowdownNanos     atomic.Int64
	stallNanos        atomic.Int64
	flushes           atomic.Int64
	flushBytes        atomic.Int64
	flushElided       atomic.Uint64
	walRecycled       atomic.Int64
	scrubPasses       atomic.Int64
	scrubFiles        atomic.Int64
	scrubBytes        atomic.Int64
	scrubCorruptions  atomic.Int64
	scrubHealed       atomic.Int64
	scrubLastPass     atomic.Int64 // UnixNano of the end of the last pass, 0: none
	flushNanos        atomic.Int64
	compactions       atomic.Int64
	seekCompactions   atomic.Int64
	compactReadBytes  atomic.Int64
	compactWriteBytes atomic.Int64
	compactNanos      atomic.Int64
	lastStallReason   atomic.Pointer[string]
	stallReasons      sync.Map // reason → *atomic.Int64
	// recovery is what Open's WAL replay did; set before Open returns.
	recovery recoveryStats
}

func (s *dbStats) recordStall(reason string, d time.Duration) {
	s.writeStalls.Add(1)
	s.stallNanos.Add(int64(d))
	s.lastStallReason.Store(&reason)
	c, _ := s.stallReasons.LoadOrStore(reason, new(atomic.Int64))
	c.(*atomic.Int64).Add(1)
}

// releaseMemtables drops the read state's and the memtable list's
// references (Close, and a failed Open): memtables still read by leaked
// iterators stay until those close.
func (d *DB) releaseMemtables() {
	if rs := d.readState.Swap(nil); rs != nil {
		rs.unref()
	}
	if d.mem != nil {
		d.mem.unref()
	}
	for _, e := range d.imm {
		e.unref()
	}
	d.mem, d.imm = nil, nil
}
