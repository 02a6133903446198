package wal

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/bgsys"
	"github.com/vigildb/vigil/internal/manual"
)

// defaultMaxBlocks bounds a writer's blocks, and so how far appends may run
// ahead of the file: 512 blocks (16 MiB), queued for the flusher, being
// written by it, or free. An append that needs a block when all are out
// waits for the flusher, so a stalled disk stalls writers instead of
// growing memory without bound.
const defaultMaxBlocks = 512

// maxRoundBlocks bounds the full blocks the flusher takes in one round
// (1 MiB), so that a long run of full blocks (a large record) comes back
// to the free list a MiB at a time while the appender goes on, instead of
// all at once after it had to allocate a second set.
const maxRoundBlocks = 32

// idleFreeBlocks bounds the blocks a writer keeps for reuse once the
// flusher has caught up: 64 blocks (2 MiB), enough for the appends made
// during one bytes-per-sync fsync at a few hundred MB/s, so that a steady
// stream of writes allocates nothing. While the flusher is behind, every
// block comes back to the free list (at most maxBlocks exist), so that a
// burst, a large batch's record above all, reuses its blocks instead of
// leaving up to twice the record's size as garbage; the surplus is dropped
// when the flusher next finds nothing to do.
const idleFreeBlocks = 64

// idleKeepBlocks and idleTrimAfter: once a writer has appended nothing for
// 100 ms, its free list is cut to 4 blocks. A DB that has stopped writing
// (the reads after a load, a quiet hour) then holds 128 KiB of log buffers
// instead of 2 MiB; the next burst maps what it needs again, some 10 µs a
// block.
const idleKeepBlocks = 4

var idleTrimAfter = 100 * time.Millisecond // a variable for tests

// block is one BlockSize buffer of the log. The appender fills buf[flushed:
// written] and beyond; the flusher hands buf[flushed:written] to the file
// without holding Writer.mu, which is safe because the appender only ever
// writes at or after written, and the flusher alone advances flushed.
//
// buf lives outside the Go heap (package manual, one mapping a block). When
// the flusher trims the free list, or at Close once the flusher has exited,
// it goes to blockPool or is freed, exactly once. Why outside the heap: on
// the heap the blocks were nearly all of a writing DB's Go heap (2.5 of
// 2.7 MB live after a 250k-key fill, 5.4 MB allocated as bursts came and
// went), and the collector's pacing lets a heap grow to twice what is live;
// a trimmed block's pages now go back to the OS at once, or to the pool of
// at most 2 MiB.
type block struct {
	buf     *[BlockSize]byte
	written int // bytes filled; guarded by Writer.mu
	flushed int // bytes handed to the file; guarded by Writer.mu, advanced only by the flusher
}

// newBlock returns a block from blockPool, or a new one.
func newBlock() *block {
	blockPool.mu.Lock()
	if n := len(blockPool.blocks); n > 0 {
		b := blockPool.blocks[n-1]
		blockPool.blocks[n-1] = nil
		blockPool.blocks = blockPool.blocks[:n-1]
		blockPool.mu.Unlock()
		b.written, b.flushed = 0, 0
		return b
	}
	blockPool.mu.Unlock()
	return &block{buf: (*[BlockSize]byte)(manual.Alloc(BlockSize))}
}

// blockPool keeps up to blockPoolMax blocks that writers trimmed off their
// free lists or left at Close, for the next block any writer needs. Why: a
// steady fill mapped and unmapped blocks over and over (some 1,200 of each
// in a 3M-key fillrandom: bursts beyond the free list, the free list of
// every WAL closed at a rotation), and an munmap waits for the other
// processors to drop the mapping from their TLBs; a writer mapping a block
// meanwhile waited, or wrote 50 µs slower. A writer's idle trim
// (idleTrimAfter) empties the pool too, so a DB that stopped writing still
// gives the memory back. The pool's buffers count in manual.Allocated but
// in no writer's Stats.
var blockPool struct {
	mu     sync.Mutex
	blocks []*block
}

const blockPoolMax = idleFreeBlocks

// poolBlocks moves blocks (taken off a writer) into blockPool while it has
// room and returns the ones it did not take, for the caller to release
// without holding Writer.mu.
func poolBlocks(blocks []*block) (rest []*block) {
	blockPool.mu.Lock()
	defer blockPool.mu.Unlock()
	n := min(len(blocks), blockPoolMax-len(blockPool.blocks))
	blockPool.blocks = append(blockPool.blocks, blocks[:n]...)
	return blocks[n:]
}

// drainPool frees every block in blockPool. Writer.mu must not be held.
func drainPool() {
	blockPool.mu.Lock()
	blocks := blockPool.blocks
	blockPool.blocks = nil
	blockPool.mu.Unlock()
	releaseBackground(blocks)
}

// release frees b's buffer; nothing may use b after.
func (b *block) release() {
	if b != nil && b.buf != nil {
		manual.Free(b.buf[:])
		b.buf = nil
	}
}

// Writer appends logical records to a record log.
//
// Concurrency. All methods are safe for concurrent use. WriteRecord is the
// hot path of every DB write: it copies the record into the current
// in-memory block, computes the fragment checksums over the copy (so what is
// checksummed is exactly what reaches the file, even if the caller reuses p
// at once), and returns; it never makes a system call. The order of records
// is the order of WriteRecord calls, so the DB calls it under its commit
// mutex, which makes WAL order equal sequence-number order.
//
// A background flusher goroutine owns the file: it hands full blocks to the
// file, and, whenever it has nothing else to do, whatever the current
// partial block holds, so unsynced data reaches the OS promptly without
// writers paying for it. It works in rounds of at most maxRoundBlocks full
// blocks. When it finds that someone waits in SyncTo, it takes the highest
// offset asked for so far as its goal, writes on until a round reaches it
// (at once, unless a large record is queued), and then calls Sync once;
// every waiter whose end offset is covered is released by that one fsync.
// While an fsync is in progress new waiters queue up and share the next
// one: this is the group commit, and the number of fsyncs under load is the
// number of fsync rounds, not the number of callers. The next one also
// waits, briefly (gather), for the writers the last one released, so that
// the synced writers do not settle into two halves taking turns.
//
// With a zero reserve (SetReserve) the flusher also keeps zeros written
// and synced past the log, and a sync whose bytes all land in them is a
// SyncData, not a Sync: the file's size and blocks are already on disk.
//
// Invariants (under mu): synced <= flushed <= size; the blocks in full
// precede cur in the file and are handed to the file in order; a block
// returns to the free list only once all of it has been written.
//
// Failure is sticky: the first write or sync error fails the writer, and
// every later call returns that error (wrapped with the file name). A failed
// fsync in particular cannot be retried safely (the kernel may have dropped
// the dirty pages), so the only way forward is a new log.
type Writer struct {
	f      vfs.File
	name   string
	logNum uint64
	ctype  checksum.Type

	// size mirrors curOff+cur.written for lock-free Size calls.
	size atomic.Int64

	mu sync.Mutex
	// workCond wakes the flusher (it waits on it only while flusherIdle).
	workCond sync.Cond
	// doneCond wakes callers waiting for the flusher's progress (Flush,
	// SyncTo, Close, and WriteRecord when too many blocks are queued).
	doneCond sync.Cond

	cur    *block   // block being filled
	curOff int64    // file offset of cur
	full   []*block // full blocks not yet (completely) handed to the file, in order
	free   []*block // recycled blocks
	blocks int      // blocks allocated and not dropped: cur, full, free and the flusher's round
	// idleTrim frees the free list down to idleKeepBlocks once the writer
	// has appended nothing for idleTrimAfter (trimRecords: the record
	// count when it was armed).
	idleTrim    *time.Timer
	trimRecords int64
	maxBlocks   int // bound on blocks (>= 2): an append that needs another waits

	flushedOff int64 // file offset up to which bytes were handed to the file
	syncedOff  int64 // file offset up to which bytes are durable
	syncWant   int64 // highest offset a SyncTo (or Close) asked to make durable
	// syncGoal is the flusher's current sync target: syncWant as it was
	// when the flusher last found waiters and none was in progress. Fixing
	// it keeps a stream of new waiters from moving the goal ahead of a
	// flusher that is behind, which would starve the first ones.
	syncGoal int64
	err      error // sticky failure
	closed   bool  // Close was called: no more records
	closing  bool  // the flusher may exit once it has no work
	held     bool  // Hold: the flusher hands nothing to the file until Release
	// background: every sync of this log is a background call (see
	// SetBackground and package bgsys).
	background bool
	// bytesPerSync: the flusher syncs on its own once this many bytes were
	// handed to the file since the last sync (0: only when asked).
	bytesPerSync int64
	// reserveMax, reserveNext: the zero reserve (see SetReserve); 0: none.
	// reserveNext is the size of the next extension, doubling up to
	// reserveMax.
	reserveMax, reserveNext int64
	// durableEnd is the file offset up to which the file's size and blocks
	// are on disk: covered by a full Sync, log bytes and reserved zeros
	// alike. A sync whose bytes all lie below it needs only SyncData.
	// Owned by the flusher.
	durableEnd int64
	idle       bool // the flusher waits on workCond
	// direct: a SyncToAfter caller is making a round itself (syncDirect);
	// the flusher waits until it is done. directRound is that round's
	// state, reused.
	direct      bool
	directRound flushRound
	waiters     int // goroutines blocked in SyncTo (for tests and metrics)
	// blockWaiters counts appends waiting for a free block (rotate): the
	// free list is not trimmed under them.
	blockWaiters int
	// arrivals counts the goroutines that began to wait in SyncTo.
	arrivals int64
	// syncTarget is the target of the synced round in progress (from the
	// round's start to its sync's end) when gather counts what it
	// releases, 0 otherwise: a waiter arriving meanwhile with an end at or
	// below it is released by it too, and counts itself in lateCovered.
	syncTarget  int64
	lateCovered int
	// gatherWant, gatherBase, gatherFor: after a sync that released
	// gatherWant waiters, the next synced round first waits (at most
	// gatherFor) until gatherWant goroutines arrived in SyncTo after
	// arrivals was gatherBase (see gather). gatherWant 0: no gathering.
	gatherWant int
	gatherBase int64
	gatherFor  time.Duration
	stats      WriterStats

	done      chan struct{} // closed when the flusher exits
	closeOnce sync.Once
	closeErr  error
}

// WriterStats counts a Writer's work. Syncs/Records under concurrent
// SyncTo callers shows how well group commit batches.
type WriterStats struct {
	Records   int64 // logical records appended
	Fragments int64 // fragments written (>= Records)
	Bytes     int64 // payload bytes appended
	Writes    int64 // File.Write calls made by the flusher
	Syncs     int64 // File.Sync and File.SyncData calls made by the flusher
	// DataSyncs is the part of Syncs that were SyncData calls: syncs of
	// bytes that landed in the zero reserve (see SetReserve).
	DataSyncs int64
	// Reserved counts the zero bytes written past the log for the reserve
	// (ReserveAhead's included).
	Reserved int64
	// WaitedSyncs is the part of Syncs that a caller waited for (SyncTo,
	// Sync), Close's final one not included: the synced writes, as group
	// commit batched them.
	WaitedSyncs int64
	// DirectSyncs is the part of WaitedSyncs that their caller made
	// itself, the flusher being idle (see SyncToAfter).
	DirectSyncs int64
	// Gathers counts synced rounds that waited for the writers the
	// previous sync released (see Writer), GatherWait the time they waited,
	// GatherQuiets the waits that ended because none of them arrived for
	// a while (see gatherQuiet).
	Gathers      int64
	GatherWait   time.Duration
	GatherQuiets int64
	// IdleTrims counts the times an idle writer's free list was cut to
	// idleKeepBlocks (see idleTrimAfter).
	IdleTrims int64
	// BufferBytes is the memory of the writer's blocks now (outside the
	// Go heap): the current one, those queued for the file and the free
	// ones. A gauge, unlike the counters above; 0 after Close.
	BufferBytes int64
}

// NewWriter starts a record log on f, which must be empty and positioned at
// offset 0 (a newly created file). The file header naming logNum and the
// checksum type t (checksum.Default is XXH3, and recorded as such) is the
// first thing appended; like every record it reaches the file through the
// flusher, and is durable after the first Sync or Close.
// The Writer takes ownership of f: Close closes it.
func NewWriter(f vfs.File, name string, logNum uint64, t checksum.Type) (*Writer, error) {
	return newWriter(f, name, logNum, t, -1)
}

// NewRecycledWriter starts a record log on f, an older log's file of size
// bytes (durable, and no longer needed) positioned at offset 0, writing
// over its blocks: the header it writes says so, and readers take the
// older log's fragments after the new log's end for the end of the log
// (see Recycling in the package documentation). Syncs that stay within
// size cost a SyncData, as in a zero reserve. The checksum type must not
// be None: nothing could tell the new log's end from the older fragments.
// The header must already be in place (WriteRecycledHeader), so that a
// crash never leaves a file named for this log under an older one's
// header. Otherwise as NewWriter.
func NewRecycledWriter(f vfs.File, name string, logNum uint64, t checksum.Type, size int64) (*Writer, error) {
	if t.Resolve() == checksum.None {
		return nil, base.InvalidArgumentErrorf("wal: %s: a recycled log needs checksums", name)
	}
	return newWriter(f, name, logNum, t, max(size, 0))
}

// WriteRecycledHeader writes, at offset 0 of f (an older log's file, open
// for writing), the header of log logNum recycling it, and syncs it. The
// DB does this before it renames the file to its new name.
func WriteRecycledHeader(f vfs.File, logNum uint64, t checksum.Type) error {
	var h [FileHeaderSize]byte
	encodeFileHeader(h[:], logNum, t.Resolve(), true)
	if _, err := f.WriteAt(h[:], 0); err != nil {
		return err
	}
	return f.Sync()
}

// newWriter is NewWriter, or NewRecycledWriter when recycled >= 0 (the
// size of the file it recycles).
func newWriter(f vfs.File, name string, logNum uint64, t checksum.Type, recycled int64) (*Writer, error) {
	if f == nil {
		return nil, base.InvalidArgumentErrorf("wal: %s: nil file", name)
	}
	if err := t.Check(); err != nil {
		return nil, base.InvalidArgumentErrorf("wal: %s: %w", name, err)
	}
	t = t.Resolve()
	w := &Writer{
		f:         f,
		name:      name,
		logNum:    logNum,
		ctype:     t,
		maxBlocks: defaultMaxBlocks,
		done:      make(chan struct{}),
	}
	w.workCond.L = &w.mu
	w.doneCond.L = &w.mu
	w.cur = newBlock()
	w.blocks = 1
	encodeFileHeader(w.cur.buf[:], logNum, t, recycled >= 0)
	w.durableEnd = max(recycled, 0)
	w.cur.written = FileHeaderSize
	w.size.Store(FileHeaderSize)
	go w.flushLoop()
	return w, nil
}

// Name returns the file name given to NewWriter (used in errors).
func (w *Writer) Name() string { return w.name }

// LogNumber returns the log number written in the file header.
func (w *Writer) LogNumber() uint64 { return w.logNum }

// ChecksumType returns the checksum type written in the file header.
func (w *Writer) ChecksumType() checksum.Type { return w.ctype }

// Size returns the logical size of the log: the file offset just past the
// last record appended (the file header included). It is what the file's
// size will be once everything is flushed.
func (w *Writer) Size() int64 { return w.size.Load() }

// Stats returns a snapshot of the writer's counters.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.stats
	st.BufferBytes = int64(w.blocks) * BlockSize
	return st
}

// WriteRecord appends one logical record to the in-memory buffer and returns
// the logical end offset of the record, to pass to SyncTo. It never makes a
// system call itself: full blocks, and the pending partial block when the
// flusher is idle, are handed to the file by the background flusher. It
// blocks only if the flusher is 16 MiB behind. p may be reused by
// the caller as soon as WriteRecord returns. Callers serialize WriteRecord
// to define the order of records.
func (w *Writer) WriteRecord(p []byte) (end int64, err error) {
	return w.writeRecord(p, true)
}

// WriteRecordToSync is WriteRecord for a caller that waits for the record
// to be durable right after (SyncTo or SyncToAfter with the end it
// returns): it leaves an idle flusher asleep, so that the sync can hand
// the record to the file itself (see SyncToAfter). Should the caller not
// sync, the record reaches the file with the next one the flusher takes,
// or at Close.
func (w *Writer) WriteRecordToSync(p []byte) (end int64, err error) {
	return w.writeRecord(p, false)
}

// writeRecord is WriteRecord; wake says whether to wake an idle flusher
// for the record's bytes.
func (w *Writer) writeRecord(p []byte, wake bool) (end int64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, w.closedError()
	}
	w.stats.Records++
	w.stats.Bytes += int64(len(p))
	for first := true; first || len(p) > 0; first = false {
		b := w.cur
		left := BlockSize - b.written
		if left < FragmentHeaderSize {
			// Too little room for a header: pad with zeros (the buffer is
			// recycled, so the padding must be written explicitly).
			clear(b.buf[b.written:])
			b.written = BlockSize
			if err := w.rotate(wake); err != nil {
				return 0, err
			}
			b = w.cur
			left = BlockSize - b.written
		}
		n := min(len(p), left-FragmentHeaderSize)
		typ := fragMiddle
		switch {
		case first && n == len(p):
			typ = fragFull
		case first:
			typ = fragFirst
		case n == len(p):
			typ = fragLast
		}
		frag := b.buf[b.written : b.written+FragmentHeaderSize+n]
		copy(frag[FragmentHeaderSize:], p[:n])
		frag[6] = typ
		binary.LittleEndian.PutUint16(frag[4:6], uint16(n))
		binary.LittleEndian.PutUint32(frag[0:4],
			fragmentChecksum(w.ctype, w.logNum, w.curOff+int64(b.written), frag[checksumSize:]))
		b.written += len(frag)
		w.stats.Fragments++
		p = p[n:]
		if b.written == BlockSize {
			if err := w.rotate(wake); err != nil {
				return 0, err
			}
		}
	}
	end = w.curOff + int64(w.cur.written)
	w.size.Store(end)
	if wake && w.idle {
		w.workCond.Signal()
	}
	return end, nil
}

// rotate queues the full current block for the flusher and starts a new
// one: a free block, or a new one if fewer than maxBlocks exist, or else
// the first block the flusher frees. (While it waits, the full block is
// still cur, and the flusher writes it as such: queued, it is then only
// recycled.) It wakes an idle flusher for the full block if wake is set
// (and always when it must wait for a block). It returns the sticky error
// if the writer failed meanwhile.
func (w *Writer) rotate(wake bool) error {
	for len(w.free) == 0 && w.blocks >= w.maxBlocks && w.err == nil {
		if w.idle {
			w.workCond.Signal()
		}
		w.blockWaiters++
		w.doneCond.Wait()
		w.blockWaiters--
	}
	if w.err != nil {
		return w.err
	}
	w.full = append(w.full, w.cur)
	w.curOff += BlockSize
	if n := len(w.free); n > 0 {
		w.cur = w.free[n-1]
		w.free[n-1] = nil
		w.free = w.free[:n-1]
	} else {
		w.cur = newBlock()
		w.blocks++
	}
	if wake && w.idle {
		w.workCond.Signal()
	}
	return nil
}

// trimIdle is idleTrim's function: if nothing was appended since it was
// armed and the flusher still waits, it frees the free list's blocks
// beyond idleKeepBlocks. (The flusher re-arms it each time it goes idle.)
func (w *Writer) trimIdle() {
	w.mu.Lock()
	if w.closed || !w.idle || w.blockWaiters > 0 || w.stats.Records != w.trimRecords {
		w.mu.Unlock()
		return
	}
	surplus := w.trimFree(idleKeepBlocks)
	if len(surplus) > 0 {
		w.stats.IdleTrims++
	}
	w.mu.Unlock()
	releaseBackground(surplus)
	drainPool()
}

// trimFree takes the free list's blocks beyond the first keep off it (and
// out of the count of blocks) and returns them, for the caller to pool
// (poolBlocks) and to release the rest once it has let go of mu. Releasing
// a block (manual.Free: an munmap, or on Linux an madvise DONTNEED that
// keeps the range for reuse) waits for the other processors to drop its
// pages from their TLBs: a trace of a 10M-key fillrandom caught the
// flusher trimming its free list under mu for 22 ms, in munmaps of up to
// 1.8 ms each, while the writer waited for mu. mu is held.
func (w *Writer) trimFree(keep int) []*block {
	n := len(w.free) - keep
	if n <= 0 {
		return nil
	}
	surplus := slices.Clone(w.free[keep:])
	clear(w.free[keep:])
	w.free = w.free[:keep]
	w.blocks -= n
	return surplus
}

// releaseBlocks releases blocks taken off the writer (trimFree). mu must
// not be held.
func releaseBlocks(blocks []*block) {
	for _, b := range blocks {
		releaseBlock(b)
	}
}

// releaseBlock is (*block).release, a variable for tests.
var releaseBlock = (*block).release

// releaseBackground is releaseBlocks for the flusher, the idle trim and
// Close: background work, which yields before each block (bgsys.Yield).
// Each release waits for every processor to drop the block's pages from
// its TLB (see trimFree), and a goroutine it woke, an append above all,
// must not stay queued behind the next one. Not through bgsys.Do: its one
// slot (on 2 cores) is the memtable fault-ahead worker's.
func releaseBackground(blocks []*block) {
	for _, b := range blocks {
		bgsys.Yield()
		releaseBlock(b)
	}
}

// hasWork reports whether the flusher has bytes to write or a sync to do.
func (w *Writer) hasWork() bool {
	return len(w.full) > 0 || w.cur.written > w.cur.flushed || w.syncWant > w.syncedOff
}

// flushLoop is the flusher goroutine. Each round it takes, under mu, up to
// maxRoundBlocks queued full blocks, the unflushed part of the current
// block if no full block is left behind, and whether to sync; it writes
// without mu, so appenders keep going, frees the blocks and publishes the
// flushed offset, then syncs (still without mu) and publishes the synced
// one, waking the waiters at each step. Closing, it exits once it has
// nothing left to do and no append waits for a block (such an append still
// has bytes to hand over).
func (w *Writer) flushLoop() {
	defer close(w.done)
	w.mu.Lock()
	defer w.mu.Unlock()
	var r flushRound
	for {
		if !w.awaitWork() {
			// Failed, or closing with nothing left to do.
			w.doneCond.Broadcast()
			return
		}
		w.planRound(&r)
		if err := w.runRound(&r, nil); err != nil {
			w.err = err
			continue
		}
		w.doneCond.Broadcast()
	}
}

// runRound makes round r, planned (planRound): it hands the round's bytes
// to the file without mu, runs work (if not nil) after the writes, then
// recycles the blocks and makes the round's sync (syncRound). The flusher
// and a caller making its own round (syncDirect) both run rounds this way.
// On a failed write the round's blocks go back to the front of the queue,
// for Close to free with the rest. mu is held (and released during the
// I/O and work).
func (w *Writer) runRound(r *flushRound, work func()) error {
	w.mu.Unlock()
	if !r.waited {
		// Let the appenders the round's Unlock woke run before the
		// writes (see bgsys.Yield). Not when a writer waits for this
		// round's sync: the round is then the foreground's critical
		// path: with the yield, kvbench fillrandom --sync on 8 threads
		// ran 12.8-16.8k writes/s, without it 19.3-21.4k (3 alternating
		// pairs).
		bgsys.Yield()
	}
	writes, err := w.writeOut(r.batch, r.cur, r.curFrom, r.curTo)
	if work != nil {
		work()
	}
	w.mu.Lock()
	w.stats.Writes += writes
	if err != nil {
		w.full = append(r.batch, w.full...)
		r.batch = nil
	} else {
		// The bytes are the file's now: the blocks go back to the free
		// list before the fsync, so that appends during a long fsync
		// (every bytes-per-sync MiB) reuse them instead of allocating.
		w.recycle(r.batch, r.cur, r.curTo, r.target)
		if r.doSync {
			err = w.syncRound(r)
		}
	}
	if r.released > 0 {
		w.syncTarget, w.lateCovered = 0, 0
	}
	return err
}

// flushRound is one round of the flusher: the blocks it writes out, up to
// where, and whether and how it syncs after.
type flushRound struct {
	batch []*block // the full blocks taken (reused round to round)
	cur   *block   // the current block, written from curFrom to curTo
	// (curFrom == curTo: none of it, full blocks are left behind)
	curFrom, curTo int
	target         int64 // the log's offset once the round is written
	waited         bool  // a caller waits for a sync this round reaches
	doSync         bool  // the round ends with an fsync
	extend         int64 // the reserve that sync may grow by
	released       int   // the waiters a foreground sync releases (for gather)
}

// awaitWork waits, idle, until there is something to write (trimming the
// free list meanwhile), then, before a synced round, gathers the writers
// the last sync released. It returns false when the flusher must stop: the
// log failed, or it is closing with nothing left. w.mu is held.
func (w *Writer) awaitWork() bool {
	for w.err == nil && (w.held || w.direct || (!w.hasWork() && (!w.closing || w.blockWaiters > 0))) {
		if w.blockWaiters == 0 {
			if rest := poolBlocks(w.trimFree(idleFreeBlocks)); len(rest) > 0 {
				w.mu.Unlock()
				releaseBackground(rest)
				w.mu.Lock()
				continue // appends may have come meanwhile
			}
		}
		if len(w.free) > idleKeepBlocks && !w.closing {
			w.trimRecords = w.stats.Records
			if w.idleTrim == nil {
				w.idleTrim = time.AfterFunc(idleTrimAfter, w.trimIdle)
			} else {
				w.idleTrim.Reset(idleTrimAfter)
			}
		}
		w.idle = true
		w.workCond.Wait()
	}
	w.idle = false
	if w.err != nil || !w.hasWork() {
		return false
	}
	if w.gatherWant > 0 && w.syncWant > w.syncedOff {
		if !w.closing {
			w.gather()
		}
		w.gatherWant = 0
	}
	return true
}

// planRound takes the round's blocks off the queue and decides its sync.
// w.mu is held.
func (w *Writer) planRound(r *flushRound) {
	// The round: the first maxRoundBlocks full blocks, and the current
	// block's new bytes if no full block is left behind.
	n := min(len(w.full), maxRoundBlocks)
	r.batch = append(r.batch[:0], w.full[:n]...)
	target := w.flushedOff
	for _, b := range r.batch {
		target += int64(BlockSize - b.flushed)
	}
	left := copy(w.full, w.full[n:])
	clear(w.full[left:])
	w.full = w.full[:left]
	r.cur = w.cur
	r.curFrom, r.curTo = r.cur.flushed, r.cur.flushed
	if left == 0 {
		r.curTo = r.cur.written
		target = w.curOff + int64(r.curTo)
		if w.closing && target > w.syncWant {
			// Close's final fsync covers whatever is appended while
			// it waits (a WriteRecord racing Close).
			w.syncWant = target
		}
	}
	r.target = target
	// A sync someone waits for is made once a round reaches the goal
	// (see syncGoal), not after each MiB of a long queue. While the
	// flusher is behind (a large record), bytes-per-sync waits for 4
	// times its bytes: one fsync per 1 MiB round made a 67 MB record
	// take 10-20 % longer, and deferring it to the 16 MiB block bound
	// made the fsyncs so long that the appends behind them needed
	// new blocks.
	if w.syncGoal <= w.syncedOff {
		w.syncGoal = w.syncWant
	}
	r.waited = w.syncGoal > w.syncedOff && (left == 0 || target >= w.syncGoal)
	dirty := target - w.syncedOff
	r.doSync = r.waited || (w.bytesPerSync > 0 && dirty >= w.bytesPerSync &&
		(left == 0 || dirty >= 4*w.bytesPerSync))
	// A sync some caller waits for may grow the reserve; one the
	// flusher makes on its own (bytes-per-sync, Close) never does, so
	// writers that never sync never pay for zeros.
	r.extend = 0
	if r.waited && !w.closing {
		r.extend = w.reserveNext
	}
	// When a synced round takes all that was appended (left == 0),
	// every waiter present has an end at or below target: they are
	// the ones its sync releases, with the later arrivals whose ends
	// are covered too, which count themselves (see SyncTo). gather
	// uses the count.
	r.released = 0
	if r.waited && left == 0 && !w.closing && !w.background {
		r.released = w.waiters
		w.syncTarget, w.lateCovered = target, 0
	}
}

// syncRound makes the round's fsync (without w.mu, which it releases and
// takes again) and records it: the synced offset, the reserve's growth,
// and, after a foreground sync that released waiters, what the next round
// gathers. w.mu is held.
func (w *Writer) syncRound(r *flushRound) error {
	if w.blockWaiters > 0 {
		// Only appends waiting for a block gain from waking now; waking
		// the SyncTo waiters too would cost group commit a round of
		// futile wakeups.
		w.doneCond.Broadcast()
	}
	// A writer waits for this fsync (a synced write): it is the
	// foreground, and goes at once. Otherwise (bytes-per-sync, the final
	// sync of a log being closed, as the DB's old WAL is in the
	// background after a rotation, or a background log's sync) it is a
	// background fsync, which must not hold the last free processor
	// (package bgsys): a trace showed the old WAL's closing fsync and the
	// new one's bytes-per-sync fsync holding both processors for 13 ms,
	// the writer runnable.
	foreground := r.waited && !w.closing && !w.background
	w.mu.Unlock()
	start := time.Now()
	dataSync, reserved, err := w.syncOut(r.target, r.extend, !foreground)
	took := time.Since(start)
	w.mu.Lock()
	w.stats.Syncs++
	if dataSync {
		w.stats.DataSyncs++
	}
	if foreground {
		w.stats.WaitedSyncs++
		if w.direct {
			w.stats.DirectSyncs++
		}
	}
	w.stats.Reserved += reserved
	if reserved > 0 {
		w.reserveNext = min(2*w.reserveNext, w.reserveMax)
	}
	if err == nil {
		w.syncedOff = r.target
		if foreground && r.released > 0 {
			w.gatherWant = r.released + w.lateCovered
			w.gatherBase = w.arrivals
			w.gatherFor = min(took/gatherFraction, maxGather)
		}
	}
	return err
}

// gatherFraction, maxGather and gatherQuiet bound how long a synced round
// waits for the writers the previous sync released: a quarter of that
// sync's duration, never more than a millisecond, and no longer than
// gatherQuiet without one of them arriving. A writer coming straight back
// costs a few microseconds of CPU (the memtable insert, the next record);
// one that does other work first (a server handling its next request)
// comes back later, and waiting for it costs the others that time: with
// 8 writers sleeping 100 µs between synced writes (wal package, on disk),
// waiting out the window made each write 1.6-1.9 times slower. The quiet
// gap ends such a wait within a few tens of microseconds.
// (maxGather and gatherQuiet are variables for tests.)
const gatherFraction = 4

var (
	maxGather   = time.Millisecond
	gatherQuiet = 20 * time.Microsecond
)

// gather waits, mu held (and released while it yields), until the
// gatherWant waiters the last sync released could have come back to SyncTo
// (that many arrived since), or gatherFor has passed. It is called before a
// synced round when the previous sync released waiters. Without it, group
// commit splits the synced writers into two halves that take turns: the
// writers one fsync releases append their next records while the next
// fsync, already started for the other half, is in progress, so each fsync
// covers half of them. Measured with BenchmarkGroupCommit on disk (16
// writers): 8 records per fsync without gathering. The wait is bounded by
// a fraction of the last fsync's time, so a writer that does not come back
// (it stopped writing, or its next write is not synced) costs the others
// at most that once, and a writer that is busy elsewhere at most
// gatherQuiet. It yields rather than blocks: the returning writers
// need the processor more than the flusher does, and a timer's wakeup on a
// busy machine is far coarser than the window.
func (w *Writer) gather() {
	if w.arrivals-w.gatherBase >= int64(w.gatherWant) {
		return
	}
	start := time.Now()
	last, seen := start, w.arrivals
	for w.err == nil && !w.closing && w.arrivals-w.gatherBase < int64(w.gatherWant) {
		w.mu.Unlock()
		runtime.Gosched()
		w.mu.Lock()
		now := time.Now()
		if w.arrivals != seen {
			last, seen = now, w.arrivals
		}
		if now.Sub(start) >= w.gatherFor {
			break
		}
		if now.Sub(last) >= gatherQuiet {
			w.stats.GatherQuiets++
			break
		}
	}
	w.stats.Gathers++
	w.stats.GatherWait += time.Since(start)
}

// recycle returns the blocks of a round whose bytes were all handed to the
// file to the free list and publishes the new flushed offset. mu is held.
func (w *Writer) recycle(batch []*block, cur *block, curTo int, target int64) {
	for i, b := range batch {
		b.written, b.flushed = 0, 0
		w.free = append(w.free, b)
		batch[i] = nil
	}
	cur.flushed = curTo
	w.flushedOff = target
}

// syncOut makes the file durable up to target, everything before it having
// been handed to the file. If the file's size and blocks are already
// durable past target (the bytes landed in the zero reserve), only the data
// needs to reach the disk: SyncData, which on a journaling file system
// skips the journal commit a size change costs. Otherwise it is a full Sync,
// and when extend is not 0 the writer first writes that many zeros
// past target (the next reserve), so that the syncs after this one
// land in durable space. It reports whether it used SyncData and how many
// zeros it wrote. A background sync (bg: no writer waits for it) goes
// through bgsys, which neither holds a processor nor lets more than the
// allowed number of such calls run. It runs without mu; durableEnd is the
// flusher's own.
func (w *Writer) syncOut(target, extend int64, bg bool) (dataSync bool, reserved int64, err error) {
	if target <= w.durableEnd {
		if err := w.syncFile(true, bg); err != nil {
			return true, 0, fmt.Errorf("wal: %s: sync: %w", w.name, err)
		}
		return true, 0, nil
	}
	end := target
	if n := extend; n > 0 {
		for off := target; off < target+n; {
			k := min(int64(len(zeroBlock)), target+n-off)
			if _, err := w.f.WriteAt(zeroBlock[:k], off); err != nil {
				return false, off - target, fmt.Errorf("wal: %s: writing the zero reserve: %w", w.name, err)
			}
			off += k
		}
		end, reserved = target+n, n
	}
	if err := w.syncFile(false, bg); err != nil {
		return false, reserved, fmt.Errorf("wal: %s: sync: %w", w.name, err)
	}
	w.durableEnd = max(w.durableEnd, end)
	return false, reserved, nil
}

// syncFile is f.SyncData (data) or f.Sync, through bgsys if bg.
func (w *Writer) syncFile(data, bg bool) error {
	switch {
	case bg && data:
		return bgsys.SyncData(w.f)
	case bg:
		return bgsys.Sync(w.f)
	case data:
		return w.f.SyncData()
	}
	return w.f.Sync()
}

// zeroBlock is the source of the reserve's zeros. It is only ever read
// (File.WriteAt, unlike some File.Write implementations, leaves its
// argument alone).
var zeroBlock [BlockSize]byte

// writeOut hands the unwritten parts of the full blocks, then cur[from:to],
// to the file. It runs without mu.
func (w *Writer) writeOut(batch []*block, cur *block, from, to int) (writes int64, err error) {
	for _, b := range batch {
		if b.flushed == BlockSize {
			continue
		}
		writes++
		if _, err := w.f.Write(b.buf[b.flushed:BlockSize]); err != nil {
			return writes, fmt.Errorf("wal: %s: write: %w", w.name, err)
		}
	}
	if to > from {
		writes++
		if _, err := w.f.Write(cur.buf[from:to]); err != nil {
			return writes, fmt.Errorf("wal: %s: write: %w", w.name, err)
		}
	}
	return writes, nil
}

// SetBytesPerSync makes the flusher sync the file on its own whenever n
// bytes were handed to it since the last sync (4n while it is behind, as
// under a large record; 0, the default: only when SyncTo, Sync or Close
// ask). It bounds the dirty data a later fsync must
// write, so that the final sync at Close (the DB's WAL rotation) is short,
// and the data a machine crash can lose, at the price of fsyncs on the
// flusher (never on writers). RocksDB's wal_bytes_per_sync.
func (w *Writer) SetBytesPerSync(n int64) {
	w.mu.Lock()
	w.bytesPerSync = max(n, 0)
	w.mu.Unlock()
}

// minReserve is the first extension of the zero reserve.
const minReserve = 64 << 10

// SetReserve makes the writer keep up to n bytes past the end of the log
// written with zeros and made durable (0, the default: none). The point is
// the cost of a synced append: appending grows the file, and making a new
// size durable costs a journal commit on top of the data (fsync), where
// bytes written over durable zeros need only fdatasync, which this machine
// kind completes in about two thirds of the time. The reserve is grown
// only by syncs that a caller waits for (SyncTo, Sync), and only when the
// log has outgrown it, in a sync that had to be a full one anyway: first
// minReserve bytes, doubling each time up to n. Writers that never sync
// never write zeros.
//
// A reader sees the reserve as the end of the log: zeros from a record
// boundary to end of file are unwritten space (ReaderStats.UnwrittenBytes),
// in every recovery mode. Writes must go through a file that implements
// WriteAt (every vfs.FS's Create does).
//
// A log without checksums (checksum.None) keeps no reserve, whatever n: a
// process killed inside a write(2) leaves the first pages of an append,
// and in front of zeros only a fragment's checksum tells that from a whole
// record whose payload ends in zeros (vigil stress --crash=kill read such
// records back as batches with zeroed values). Without the reserve the
// file ends where the write stopped, and the fragment's length running
// past end of file marks the torn tail.
func (w *Writer) SetReserve(n int64) {
	if w.ctype == checksum.None {
		n = 0
	}
	w.mu.Lock()
	w.reserveMax = max(n, 0)
	w.reserveNext = min(int64(minReserve), w.reserveMax)
	w.mu.Unlock()
}

// ReserveAhead writes n bytes of zeros past what the log holds and makes
// them durable (a full Sync, through bgsys: it is background work), so that
// the synced appends that land in them later cost a SyncData only and none
// of them pays for growing the reserve (see SetReserve) until the log
// outgrows them. The DB calls it on a WAL it prepares ahead of a rotation,
// when the WAL before took synced writes throughout: a WAL taking 64 MiB of
// synced appends otherwise writes a MiB of zeros and a full fsync in front
// of every 64th append of 16 KiB. It does nothing for a writer that keeps no
// reserve (SetReserve, never called or with 0, or a log without checksums).
// It must be called before the first WriteRecord after the writer's header
// was synced, with no other call running; a failure fails the writer.
func (w *Writer) ReserveAhead(n int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.err != nil:
		return w.err
	case w.reserveMax == 0 || n <= 0:
		return nil
	case w.stats.Records > 0 || w.flushedOff != w.syncedOff || w.syncedOff != w.size.Load():
		return base.InvalidArgumentErrorf("wal: %s: ReserveAhead after records were appended", w.name)
	}
	end := max(w.syncedOff, w.durableEnd) // a recycled file's blocks are there already
	n -= end - w.syncedOff
	if n <= 0 {
		return nil
	}
	for off := end; off < end+n; {
		k := min(int64(len(zeroBlock)), end+n-off)
		if _, err := w.f.WriteAt(zeroBlock[:k], off); err != nil {
			w.err = fmt.Errorf("wal: %s: writing the zero reserve: %w", w.name, err)
			return w.err
		}
		off += k
	}
	if err := bgsys.Sync(w.f); err != nil {
		w.err = fmt.Errorf("wal: %s: sync: %w", w.name, err)
		return w.err
	}
	w.stats.Syncs++
	w.stats.Reserved += n
	w.durableEnd = max(w.durableEnd, end+n)
	return nil
}

// Hold stops the flusher from handing anything more to the file until
// Release: records still append in memory (WriteRecord blocks once the
// block bound is reached), and Flush, SyncTo and Close wait. The DB holds
// a new WAL this way until the WAL before it is synced and closed, so that
// nothing of the new log can reach the disk while the old one might still
// lose its tail in a crash: recovery can then tell a real torn tail from
// damage (see the DB's WAL preamble).
func (w *Writer) Hold() {
	w.mu.Lock()
	w.held = true
	w.mu.Unlock()
}

// Release lets a held writer's flusher go on. A non-nil err fails the
// writer with it instead (sticky, as any write error): its records must
// never reach the disk.
func (w *Writer) Release(err error) {
	w.mu.Lock()
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("wal: %s: not written, the log before it failed: %w", w.name, err)
	}
	w.held = false
	w.workCond.Signal()
	w.doneCond.Broadcast()
	w.mu.Unlock()
}

// SetBackground marks every sync of this log as a background call, made
// through bgsys (bgsys.Sync) even when a caller waits for it: for a log that only
// background work syncs, such as the MANIFEST (flushes and compactions
// sync it), whose fsync waits for the same journal commit as the tables'
// and can take as long. Call it before the log is shared.
func (w *Writer) SetBackground() {
	w.mu.Lock()
	w.background = true
	w.mu.Unlock()
}

// Flush blocks until everything appended so far has been handed to the file
// (no fsync: a crash of the machine may still lose it, a crash of the
// process does not).
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	target := w.curOff + int64(w.cur.written)
	for w.err == nil && w.flushedOff < target {
		if w.idle {
			w.workCond.Signal()
		}
		w.doneCond.Wait()
	}
	return w.err
}

// Sync blocks until everything appended so far is written and fsynced.
func (w *Writer) Sync() error { return w.SyncTo(w.Size()) }

// SyncTo blocks until every byte up to end (an offset returned by
// WriteRecord) is written and fsynced. Many goroutines may wait at once;
// they share fsyncs (group commit, see Writer). An end beyond Size is a
// caller error, reported as base.ErrInvalidArgument without failing the
// writer. After Close, whose final fsync covered everything, it returns nil
// unless the writer had failed.
func (w *Writer) SyncTo(end int64) error { return w.SyncToAfter(end, nil) }

// SyncToAfter is SyncTo that runs work (if not nil) before it returns,
// without the writer's lock, alongside the sync: the DB inserts a synced
// batch into the memtable this way. When the flusher makes the round, the
// sync is asked for first and work runs while it is under way, so its CPU
// time overlaps the device's. When the flusher is idle and no one else
// waits (a lone synced writer, the rule for a raft log), the caller makes
// the round itself (see syncDirect), and work runs once the bytes are
// handed to the file, before the fsync. work runs exactly once, whatever
// the outcome; if the writer has failed or end was already synced, it runs
// right away.
func (w *Writer) SyncToAfter(end int64, work func()) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil || w.syncedOff >= end {
		if work != nil {
			w.mu.Unlock()
			work()
			w.mu.Lock()
		}
		return w.err
	}
	if size := w.curOff + int64(w.cur.written); end > size {
		if work != nil {
			w.mu.Unlock()
			work()
			w.mu.Lock()
		}
		return base.InvalidArgumentErrorf("wal: %s: SyncTo(%d) beyond the end of the log (%d)", w.name, end, size)
	}
	if w.mayRoundDirectly() {
		return w.syncDirect(end, work)
	}
	if end > w.syncWant {
		w.syncWant = end
	}
	if w.idle {
		w.workCond.Signal()
	}
	w.waiters++
	w.arrivals++
	if end <= w.syncTarget {
		w.lateCovered++
	}
	if work != nil {
		w.mu.Unlock()
		work()
		w.mu.Lock()
	}
	for w.err == nil && w.syncedOff < end {
		w.doneCond.Wait()
	}
	w.waiters--
	return w.err
}

// mayRoundDirectly reports whether a SyncToAfter caller may make the round
// that syncs its record itself (syncDirect): the flusher is idle, no other
// caller waits for a sync, at most one round's blocks are queued, and
// nothing asks for the flusher's own way: Hold, Close, a background log,
// or a gather for several writers (group commit lets the writers the last
// sync released come back to share the next one; a lone writer's gather
// would only wait for itself). mu is held.
func (w *Writer) mayRoundDirectly() bool {
	return directRounds && w.idle && !w.direct && !w.held && !w.closing && !w.background &&
		w.waiters == 0 && w.gatherWant <= 1 && w.syncGoal <= w.syncedOff &&
		len(w.full) <= maxRoundBlocks
}

// syncDirect makes, on the caller's goroutine, the round the flusher would
// make for a lone synced write: it hands what was appended to the file,
// runs work, and syncs (growing the reserve as the flusher would).
//
// Why: it spares the write two wakeups, the flusher's before the round and
// the caller's after the sync. Each took 14-16 µs on this project's 2-vCPU
// machines (an idle vCPU woken), where a raft leader's synced append of 64
// entries takes about 200 µs. work, the DB's memtable insert, then runs
// before the sync instead of during it, some microseconds; handing it to a
// goroutine of its own to keep the overlap was slower in all of 4
// alternating pairs, as starting that goroutine wakes the other vCPU.
//
// The flusher stays asleep meanwhile (direct); callers that come meanwhile
// wait for its next round, which it makes once this one is done. mu is
// held (and released during the I/O and work); mayRoundDirectly was true.
func (w *Writer) syncDirect(end int64, work func()) error {
	w.direct = true
	w.gatherWant = 0
	w.syncWant = max(w.syncWant, end)
	// All that is queued (mayRoundDirectly), so r.target >= end, and a
	// sync some caller waits for (r.waited, r.doSync).
	w.planRound(&w.directRound)
	err := w.runRound(&w.directRound, work)
	w.direct = false
	if err != nil && w.err == nil {
		w.err = err
	}
	var surplus []*block
	if w.blockWaiters == 0 {
		surplus = poolBlocks(w.trimFree(idleFreeBlocks))
	}
	w.doneCond.Broadcast()
	if w.idle && (w.err != nil || w.closing || w.hasWork()) {
		w.workCond.Signal()
	}
	err = w.err
	if len(surplus) > 0 {
		// The caller's own time, not that of the writers waiting for mu.
		w.mu.Unlock()
		releaseBlocks(surplus)
		w.mu.Lock()
	}
	return err
}

// directRounds lets SyncToAfter's callers make their rounds themselves (a
// variable for tests, which need the flusher's rounds).
var directRounds = true

// Close flushes and fsyncs everything appended, stops the flusher and closes
// the file. It is idempotent: later calls return the first call's result.
// Records appended after Close are refused with base.ErrClosed. If the writer
// had failed, Close still stops the flusher and closes the file, and returns
// the sticky error.
func (w *Writer) Close() error {
	w.closeOnce.Do(func() {
		w.mu.Lock()
		w.closed = true
		if size := w.curOff + int64(w.cur.written); size > w.syncWant {
			w.syncWant = size
		}
		w.closing = true
		w.workCond.Signal()
		w.mu.Unlock()

		<-w.done

		w.mu.Lock()
		err := w.err
		if w.idleTrim != nil {
			w.idleTrim.Stop()
		}
		// The flusher has exited and WriteRecord refuses a closed writer:
		// no block is read again. cur stays, without its buffer (its
		// written count still gives Size and SyncTo their offsets).
		rest := poolBlocks(append(w.trimFree(0), w.full...))
		w.full = nil
		w.cur.release()
		w.blocks = 0
		w.mu.Unlock()
		// The DB closes the WAL before the last one in the background,
		// after a rotation: releasing what the pool did not take (64
		// blocks took 5-8 ms when each was an munmap) is background work.
		releaseBackground(rest)
		if cerr := w.f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("wal: %s: close: %w", w.name, cerr)
		}
		w.closeErr = err
	})
	return w.closeErr
}

func (w *Writer) closedError() error {
	return fmt.Errorf("wal: %s: writer is closed: %w", w.name, base.ErrClosed)
}
