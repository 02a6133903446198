package vigil

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/cache"
	"github.com/vigildb/vigil/memtable"
	"github.com/vigildb/vigil/wal"
)

// The write path (commit pipeline).
//
// Two invariants, and the steps that keep them:
//
//  1. WAL order = sequence-number order. Under commitMu a writer takes the
//     batch's sequence numbers, picks (or rotates) the memtable, and appends
//     the batch to the WAL's in-memory buffer. No system call happens here:
//     the WAL's background flusher hands full blocks to the file.
//  2. Visibility in sequence-number order. After commitMu is released the
//     writer inserts its batch into the memtable concurrently with other
//     writers (the skiplist is lock-free), then publishes: visibleSeq
//     advances over every finished batch at the head of the queue, and the
//     writer waits until it has advanced past its own batch. So a reader
//     never sees a batch whose predecessors are incomplete.
//
// Synced writes then wait for the WAL to be fsynced up to their record;
// concurrent synced writers share one fsync (group commit, in package wal).
// Data may be readable before its fsync completes, as in Pebble; a crash
// loses only writes that were never acknowledged as synced.
//
//	Apply ─┬─ commitMu ─ seq = nextSeq; makeRoom; WAL.WriteRecord; enqueue ─┐
//	       │                                                               │
//	       └─ memtable.Add × count (concurrent) ─ publish ─ WAL.SyncTo ────┘

// Put sets key to value.
func (d *DB) Put(key, value []byte, o *WriteOptions) error {
	b := d.pooledBatch()
	b.Put(key, value)
	return d.applyPooled(b, o)
}

// Delete removes key. Deleting a missing key is not an error.
func (d *DB) Delete(key []byte, o *WriteOptions) error {
	b := d.pooledBatch()
	b.Delete(key)
	return d.applyPooled(b, o)
}

// DeleteRange removes every key in [start, end). An empty range (start ==
// end) is a no-op; an inverted one (start > end) is ErrInvalidArgument.
func (d *DB) DeleteRange(start, end []byte, o *WriteOptions) error {
	b := d.pooledBatch()
	b.DeleteRange(start, end)
	return d.applyPooled(b, o)
}

// Merge writes a merge operand for key (see Merger): a read of key then
// combines it with the value below. The DB needs Options.Merger.
func (d *DB) Merge(key, operand []byte, o *WriteOptions) error {
	b := d.pooledBatch()
	b.Merge(key, operand)
	return d.applyPooled(b, o)
}

// pooledBatch is the batch of a single write (Put, Delete, DeleteRange,
// Merge), from batchPool, protected as the DB's batches are.
func (d *DB) pooledBatch() *Batch {
	b := batchPool.Get().(*Batch)
	b.cmp = d.cmp
	b.setProtection(d.cksum, d.opts.BatchProtectionBytesPerKey)
	return b
}

// applyPooled applies a pooledBatch and returns it to the pool.
func (d *DB) applyPooled(b *Batch, o *WriteOptions) error {
	err := d.Apply(b, o)
	b.Reset()
	batchPool.Put(b)
	return err
}

var batchPool = sync.Pool{New: func() any { return new(Batch) }}

// maxBatchMemSize is the largest batch Apply accepts, in memtable bytes
// (Batch.memSize): a batch is applied to one memtable, whose arena takes
// 32-bit offsets, and memtableSizeFor adds an eighth plus 64 KiB of slack.
// A larger batch is refused before anything reaches the WAL; accepting it
// would make the rotation to a memtable that cannot exist fail after the
// WAL switched, turning the DB read-only.
const maxBatchMemSize = (memtable.MaxSize - 64<<10) / 9 * 8

// Apply commits the batch atomically: after a crash it is all there or not
// at all, and readers see all of it or none. With o.Sync the batch is
// visible to readers only once its WAL record is durable, so no reader can
// see a synced write that a crash or a failed fsync then loses. The batch
// may be reused once Apply returns.
//
// A protected batch (Options.BatchProtectionBytesPerKey, see Batch) is
// checked twice:
//
//   - Before the WAL write (under commitMu, just before the record is
//     copied into the WAL; for a batch large enough to be queued whole, see
//     flushable_batch.go, when it is sorted, before it waits for its turn).
//     An entry that changed since it was added, or a malformed buffer, makes
//     Apply return an error wrapping ErrCorruption that names the entry and
//     both checksums, having written nothing: no WAL record, no memtable
//     entry, no seqnum taken. The DB stays writable (the damage is in the
//     caller's batch); the refusal is counted in Metrics.BatchCorruptions,
//     logged and told to EventListener.CorruptionFound.
//   - As each entry is copied into the memtable (memtable.AddChecked), from
//     the copy. A mismatch there means the bytes changed after the first
//     check, when the WAL record is already written (and may be synced).
//     Then, as for any corruption found while inserting: the memtable,
//     which may hold part of the batch, is poisoned (its reads fail with
//     ErrCorruption until the DB is reopened), the DB goes read-only with a
//     background error (later writes fail with ErrReadOnly), and Apply
//     returns the error, wrapping ErrCorruption; it counts in
//     Metrics.MemTable.Corruptions. The WAL holds the batch as it was
//     written, which the first check had just passed: reopening the DB
//     replays it whole, so Apply's error does not mean the batch is lost.
func (d *DB) Apply(b *Batch, o *WriteOptions) error { return d.apply(b, o, nil) }

// apply is Apply; check, if not nil, is a transaction's validation (see
// checkAtCommit): it runs under commitMu, before the batch takes its
// seqnums, and an error from it refuses the batch, nothing written.
func (d *DB) apply(b *Batch, o *WriteOptions, check func() error) error {
	if skip, err := d.applyArgs(b, o); skip || err != nil {
		return err
	}
	syncWAL := o != nil && o.Sync
	if n := int(d.l0Files.Load()); n >= d.opts.L0SlowdownWritesTrigger && n < d.opts.L0StopWritesTrigger {
		d.slowDown(len(b.data), n)
	}
	if b.protBytes != 0 || d.opts.BatchProtectionBytesPerKey != 0 {
		if err := d.protectBatch(b); err != nil {
			return d.batchRefused(err)
		}
	}
	if b.memSize > d.opts.WriteBufferSize/flushableBatchFraction {
		return d.applyFlushable(b, syncWAL, check)
	}

	mem, err := d.enterApply(b.memSize)
	if err != nil {
		return err
	}
	if err := d.lastRefusal(mem, b, check); err != nil {
		return err
	}
	n := uint64(b.count)
	seq := d.sequence(n)
	b.setSeqNum(seq)
	mem.lastSeq.Store(seq + n - 1)
	slot, err := d.logCommit(seq, n, b.data, syncWAL)
	if err != nil {
		d.commitMu.Unlock()
		return d.walFailed(err)
	}
	mem.writers.add()
	d.commitMu.Unlock()
	if h := d.testingHooks; h != nil && h.beforeApply != nil {
		h.beforeApply()
	}

	var applyErr error
	insert := func() {
		if applyErr = d.applyToMemtable(mem, b); applyErr != nil {
			// Part of the batch may be in the memtable. Poison it before
			// the batch's seqnums become visible, so no reader sees half a
			// batch; the WAL holds the whole batch for the next Open.
			mem.poison(applyErr)
		}
		mem.writers.done()
	}
	if syncWAL && slot.walW != nil {
		// The fsync runs while the batch goes into the memtable; the batch
		// becomes visible only after both, as finishCommit makes it.
		if err := slot.walW.SyncToAfter(slot.walEnd, insert); err != nil && applyErr == nil {
			d.pub.fail(slot.ticket)
			return d.walFailed(err)
		}
		syncWAL = false
	} else {
		insert()
	}
	if err := d.finishCommit(slot, syncWAL && applyErr == nil); err != nil {
		return err
	}
	if applyErr != nil {
		if errors.Is(applyErr, ErrCorruption) {
			d.stats.memCorruptions.Add(1)
		}
		d.mu.Lock()
		d.setBackgroundErrorLocked(applyErr, "memtable insert")
		d.mu.Unlock()
		return applyErr
	}
	d.paceBehindFlush(mem, seq, n)
	return nil
}

// applyArgs checks what Apply is asked to do before anything else:
// skip is set (with the batch's error, if any) for a batch with nothing to
// write; err refuses the batch.
func (d *DB) applyArgs(b *Batch, o *WriteOptions) (skip bool, err error) {
	if err := d.writable(); err != nil {
		return true, err
	}
	switch {
	case b == nil:
		return true, nil
	case b.err != nil:
		return true, b.err
	case b.Empty():
		return true, nil
	case o != nil && o.Sync && d.opts.DisableWAL:
		// RocksDB: "Sync writes has to enable WAL". Acknowledging a sync
		// that syncs nothing would be a lie about durability.
		return true, base.InvalidArgumentErrorf("WriteOptions.Sync needs the WAL, but the DB was opened with DisableWAL")
	case b.rangeDels > 0 && b.comparer().Name != d.cmp.Name:
		return true, base.InvalidArgumentErrorf("batch holds %d range deletions ordered by comparer %q, but the DB's keys are ordered by %q: build the batch with the DB's NewBatch", b.rangeDels, b.comparer().Name, d.cmp.Name)
	case b.merges > 0 && d.opts.Merger == nil:
		return true, base.InvalidArgumentErrorf("batch holds %d merge operands, but the DB has no Options.Merger", b.merges)
	case b.memSize > maxBatchMemSize:
		return true, base.InvalidArgumentErrorf("batch of %d entries needs %d bytes of memtable, over the limit of %d", b.count, b.memSize, maxBatchMemSize)
	}
	return false, nil
}

// lastRefusal runs, with commitMu held and mem's room reserved, what may
// still refuse the batch before it takes seqnums: its protection check
// and a transaction's check. On refusal the reservation is returned,
// commitMu released, and the refusal returned.
func (d *DB) lastRefusal(mem *memTableEntry, b *Batch, check func() error) error {
	var protErr, err error
	if b.protBytes != 0 {
		protErr = b.verifyProtection()
	}
	if protErr == nil && check != nil {
		err = d.checkAtCommit(check)
	}
	if protErr == nil && err == nil {
		return nil
	}
	mem.mt.Unreserve(b.memSize)
	d.commitMu.Unlock()
	if protErr != nil {
		return d.batchRefused(protErr) // without locks
	}
	return err
}

// protectBatch readies b's protection for Apply (see Batch): a batch
// without any takes the DB's setting, computed from its bytes now, and a
// protected batch of another checksum type than the DB's is checked in its
// own, then protected again in the DB's from the bytes just checked, so that
// the memtable can check each entry's copy in its type. Without locks.
func (d *DB) protectBatch(b *Batch) error {
	switch {
	case b.protBytes == 0:
		return b.protectFromBytes(d.cksum, d.opts.BatchProtectionBytesPerKey)
	case b.protType != d.cksum && d.cksum != checksum.None:
		if err := b.verifyProtection(); err != nil {
			return err
		}
		return b.protectFromBytes(d.cksum, int(b.protBytes))
	}
	return nil
}

// batchRefused reports a batch refused before anything of it was written
// because its bytes are not what they were when its entries were added
// (its protection, or its encoding, says so): counted in
// Metrics.BatchCorruptions, logged and told to the EventListener. The DB
// stays writable: the damage is in the caller's batch, not in the DB. No
// lock is held.
func (d *DB) batchRefused(err error) error {
	if !errors.Is(err, ErrCorruption) {
		return err
	}
	d.stats.batchCorruptions.Add(1)
	err = fmt.Errorf("Apply refused the batch, nothing of it written: %w", err)
	d.log.Errorf("%v", err)
	d.emitCorruption(err)
	return err
}

// The steps every commit takes (Apply, a large batch, an ingestion), in
// order: enterCommit (commitMu, once the write fits, stalling until it
// does), sequence (seqnums) and logCommit (the WAL record, the publish
// ticket), still under commitMu, then, without locks, the path's own work
// (a memtable insert; nothing for a large batch; a flush and a MANIFEST
// edit for an ingestion) and finishCommit (the WAL synced if asked, then
// visible in seqnum order).

// commitSlot is a commit's place once sequenced: its first seqnum, its
// publish ticket, and the end of its WAL record (walW nil without a WAL).
type commitSlot struct {
	seq, ticket uint64
	walW        *wal.Writer
	walEnd      int64
}

// enterApply is enterCommit for Apply: it returns, with commitMu held,
// the memtable that has reserved memSize bytes for the batch. The first
// try is made here, without the closures enterCommit takes: a write that
// fits, nearly every one, costs one lock and one reservation. (Through
// enterCommit at once, in-memory fillseq ran 10 % slower.)
func (d *DB) enterApply(memSize int) (*memTableEntry, error) {
	d.commitMu.Lock()
	if err := d.writable(); err != nil {
		d.commitMu.Unlock()
		return nil, err
	}
	if d.mem.mt.Reserve(memSize) { // d.mem changes only under commitMu
		return d.mem, nil
	}
	d.commitMu.Unlock()
	var mem *memTableEntry
	room := func() (stall string, err error) {
		mem, stall, err = d.makeRoomForWrite(memSize)
		return stall, err
	}
	if err := d.enterCommit(room, d.rotationClearedLocked); err != nil {
		return nil, err
	}
	return mem, nil
}

// enterCommit returns with commitMu held once room, called under it, says
// the write fits (""), or with an error, without commitMu. Otherwise room
// returned the reason to stall: enterCommit releases commitMu (so that
// Flush, Compact and Close, which take it, can clear the stall or end it),
// waits until cleared (called under d.mu) holds, and tries again. A stall
// is logged, counted and reported to the EventListener once, however many
// rounds it takes. This is the one stall loop of the write path.
func (d *DB) enterCommit(room func() (stall string, err error), cleared func() bool) error {
	var stallStart time.Time
	var stallReason string
	defer func() {
		if stallReason != "" {
			d.endStall(stallStart, stallReason)
		}
	}()
	for {
		d.commitMu.Lock()
		// Checked again under commitMu: a rotation that failed while we
		// waited leaves the old memtable with room but its WAL closed.
		if err := d.writable(); err != nil {
			d.commitMu.Unlock()
			return err
		}
		reason, err := room()
		if err != nil {
			d.commitMu.Unlock()
			return err
		}
		if reason == "" {
			return nil
		}
		d.commitMu.Unlock()
		if stallReason == "" {
			stallStart, stallReason = time.Now(), reason
			d.log.Infof("write stall: %s", reason)
			d.emitStall(true, StallInfo{Reason: reason})
		}
		if err := d.waitStalled(cleared); err != nil {
			return err
		}
	}
}

// checkAtCommit runs check, a transaction's validation, once every commit
// sequenced so far is visible: with commitMu held no other commit can be
// sequenced until this one is, so what check reads at the latest state is
// exactly what precedes the commit in seqnum order. The wait is for
// commits already past commitMu (their memtable inserts and fsyncs), which
// need neither lock. commitMu is held.
func (d *DB) checkAtCommit(check func() error) error {
	for spins := 0; d.visibleSeq.Load() < d.nextSeq-1; spins++ {
		if err := d.writable(); err != nil {
			return err
		}
		if spins < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
	return check()
}

// sequence takes the next n seqnums for a commit and returns the first.
// commitMu is held, so seqnum order is the order of the logCommit calls
// that follow.
func (d *DB) sequence(n uint64) uint64 {
	seq := d.nextSeq
	d.nextSeq += n
	return seq
}

// logCommit appends rec, the commit of the n seqnums from seq, to the WAL
// (unless it is disabled) and takes the commit's publish ticket. commitMu
// is held since sequence, so WAL order is seqnum order and tickets follow
// both. On a WAL write failure nothing is enqueued and the WAL's error is
// returned: the caller makes the DB read-only with walFailed (or
// walFailedLocked, holding d.mu). toSync says the caller waits for the
// record to be durable right after releasing commitMu (Apply with
// WriteOptions.Sync), so the WAL's flusher is left for that sync to spare
// (wal.Writer.WriteRecordToSync).
func (d *DB) logCommit(seq, n uint64, rec []byte, toSync bool) (commitSlot, error) {
	s := commitSlot{seq: seq}
	if !d.opts.DisableWAL {
		s.walW = d.wal.live
		var err error
		if toSync {
			s.walEnd, err = s.walW.WriteRecordToSync(rec)
		} else {
			s.walEnd, err = s.walW.WriteRecord(rec)
		}
		if err != nil {
			return commitSlot{}, err
		}
		d.wal.bytes.Add(int64(len(rec)))
		d.wal.records.Add(1)
	}
	s.ticket = d.pub.enqueue(seq + n - 1)
	return s, nil
}

// finishCommit makes a sequenced commit durable if sync asks (concurrent
// synced writers share one fsync: group commit, in package wal), then
// visible, after every commit before it. Durable first, visible second: a
// commit whose sync failed never becomes visible, nor does anything after
// it (visibility is a prefix of the commit order).
func (d *DB) finishCommit(s commitSlot, sync bool) error {
	if sync && s.walW != nil {
		if err := s.walW.SyncTo(s.walEnd); err != nil {
			d.pub.fail(s.ticket)
			return d.walFailed(err)
		}
	}
	return d.pub.publish(s.ticket, &d.visibleSeq)
}

// writeDelay is the schedule of slowed-down writes: each write reserves its
// share of time on one timeline, at the current delayed rate, and sleeps
// until its slot once the reservations run more than a millisecond ahead
// (so that fast writers do not pay a timer per write). RocksDB's
// WriteController does the same with a token bucket.
type writeDelay struct {
	mu   sync.Mutex
	next time.Time // end of the last reservation
}

// slowDown delays a write of n bytes while L0 holds l0 files, between the
// slowdown and stop triggers: at the slowdown trigger the rate is
// DelayedWriteRate, and it falls linearly to 1/16 of it just below the stop
// trigger. Called without locks.
func (d *DB) slowDown(n, l0 int) {
	o := d.opts
	span := max(o.L0StopWritesTrigger-o.L0SlowdownWritesTrigger, 1)
	left := o.L0StopWritesTrigger - l0 // 1..span
	rate := float64(o.DelayedWriteRate) * max(float64(left)/float64(span), 1.0/16)
	cost := time.Duration(float64(n) / rate * float64(time.Second))
	now := time.Now()
	d.delay.mu.Lock()
	start := d.delay.next
	if start.Before(now) {
		start = now
	}
	d.delay.next = start.Add(cost)
	wait := d.delay.next.Sub(now)
	d.delay.mu.Unlock()
	if wait < time.Millisecond {
		return
	}
	time.Sleep(wait)
	d.stats.slowdowns.Add(1)
	d.stats.slowdownNanos.Add(int64(wait))
}

// applyFlushable commits a large batch without inserting it into the
// memtable (see flushable_batch.go): it is sorted and protected, over its
// own buffer, before commitMu, then, under it, gets its seqnums, goes to the WAL as one
// record, and joins the immutable memtables right after the mutable one,
// which a fresh memtable on the next WAL replaces. It becomes visible
// through the publisher like any batch.
func (d *DB) applyFlushable(b *Batch, syncWAL bool, check func() error) error {
	fb, err := newFlushableBatch(d.cmp, b, d.cksum, d.opts.MemtableProtectionBytesPerKey > 0, d.opts.ParanoidMemoryChecks)
	if err != nil {
		return d.batchRefused(err)
	}
	var need int
	room := func() (string, error) {
		if check != nil {
			// Under commitMu, before d.mu (the check reads tables); again
			// after every stall, since commits may have come in between.
			if err := d.checkAtCommit(check); err != nil {
				return "", err
			}
		}
		d.mu.Lock() // kept on success
		// The batch takes a place in the immutable list, and so does the
		// mutable memtable if it holds anything.
		need = 1
		if !d.mem.idleAndEmpty() {
			need = 2
		}
		reason := ""
		switch {
		case len(d.imm)+need > max(d.opts.MaxImmutableMemtables, need):
			reason = fmt.Sprintf("too many immutable memtables for a large batch (%d, MaxImmutableMemtables=%d)", len(d.imm), d.opts.MaxImmutableMemtables)
			// Small memtables of the growth schedule may wait below
			// flushDueLocked's threshold: the batch needs them gone.
			d.imm[len(d.imm)-1].forceFlush = true
		case d.l0Stopped():
			reason = d.stallReasonLocked()
		case !d.walReadyLocked():
			// The batch ends its WAL (see below): the next must be ready.
			d.maybePrepareWALLocked(true)
			reason = stallNoSpareWAL
		}
		if reason != "" {
			d.maybeScheduleFlushLocked()
			d.maybeScheduleCompactionLocked()
			d.mu.Unlock()
		}
		return reason, nil
	}
	cleared := func() bool {
		return len(d.imm)+need <= max(d.opts.MaxImmutableMemtables, need) && !d.l0Stopped() && d.walReadyLocked()
	}
	if err := d.enterCommit(room, cleared); err != nil {
		fb.Release()
		return err
	}
	// d.mu and commitMu are held.
	slot, err := d.queueFlushable(b, fb, need)
	d.mu.Unlock()
	d.commitMu.Unlock()
	if err != nil {
		return err
	}
	return d.finishCommit(slot, syncWAL)
}

// queueFlushable sequences the large batch b (as fb) and puts it in the
// immutable list, need being 2 if the mutable memtable goes there first.
// d.mu and commitMu are held; on error fb is released.
//
// The batch's WAL ends with it: later writes go to the next WAL, in a new
// mutable memtable, so that once the batch is flushed its WAL (as large as
// the batch) is obsolete and deleted, not replayed at every reopen until
// the memtable after it is flushed too. Without a WAL a new memtable is
// needed only if the mutable one holds data.
func (d *DB) queueFlushable(b *Batch, fb *flushableBatch, need int) (commitSlot, error) {
	var mt *memtable.MemTable
	if need == 2 || !d.opts.DisableWAL {
		var err error
		if mt, err = d.newMemTable(d.nextMemtableSize(0)); err != nil {
			fb.Release()
			return commitSlot{}, err
		}
	}
	batchLog, memLog := d.wal.liveNum, d.wal.liveNum
	seq := d.sequence(uint64(b.count))
	b.setSeqNum(seq)
	fb.setSeq(seq)
	slot, err := d.logCommit(seq, uint64(b.count), b.data, false)
	if err == nil && !d.opts.DisableWAL {
		if memLog, err = d.switchWALLocked(); err != nil {
			d.pub.fail(slot.ticket) // never visible: its WAL did not close
		}
	}
	if err != nil {
		err = d.walFailedLocked(err)
		fb.Release()
		releaseMemTable(mt, &d.stats.memtableBytes)
		return commitSlot{}, err
	}
	old := d.mem
	if mt != nil {
		d.mem = newMemTableEntry(d.cmp, mt, memLog, &d.stats.memtableBytes)
		if need == 2 {
			d.imm = append(d.imm, old)
		}
	}
	d.imm = append(d.imm, newBatchEntry(d.cmp, fb, batchLog, &d.stats.memtableBytes))
	// fb reads b's buffer from here on: b must copy before writing again.
	b.lend()
	d.updateReadStateLocked()
	if mt != nil && need == 1 {
		// The empty memtable the new one replaced: readers that still
		// hold it keep their own references.
		old.unref()
	}
	d.log.Infof("large batch of %d records (%d bytes) queued for flush as a table, seqs %d..%d", b.count, len(b.data), slot.seq, slot.seq+uint64(b.count)-1)
	d.maybeScheduleFlushLocked()
	d.maybePrepareWALLocked(false)
	return slot, nil
}

// endStall records a write stall that began at start.
func (d *DB) endStall(start time.Time, reason string) {
	dur := time.Since(start)
	d.stats.recordStall(reason, dur)
	d.log.Infof("write stall ended after %v: %s", dur, reason)
	d.emitStall(false, StallInfo{Reason: reason, Duration: dur})
}

// SyncWAL makes every write that Apply has returned for durable, without
// writing anything: one fsync of the WAL (older WALs were synced when they
// were closed). For embedders that write without Sync and choose when to
// pay for durability (go-ethereum's SyncKeyValue, RocksDB's SyncWAL).
func (d *DB) SyncWAL() error {
	if err := d.writable(); err != nil {
		return err
	}
	if d.opts.DisableWAL {
		return base.InvalidArgumentErrorf("SyncWAL needs the WAL, but the DB was opened with DisableWAL")
	}
	d.commitMu.Lock()
	if d.closed.Load() {
		d.commitMu.Unlock()
		return ErrClosed
	}
	w := d.wal.live
	end := w.Size()
	d.commitMu.Unlock()
	if err := w.SyncTo(end); err != nil {
		// A WAL closed by a rotation since was synced in full by it.
		if errors.Is(err, base.ErrClosed) {
			return nil
		}
		return d.walFailed(err)
	}
	return nil
}

// walFailed makes a WAL write or sync failure a background error: the WAL
// may now miss acknowledged writes, so the DB stops accepting more.
func (d *DB) walFailed(err error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.walFailedLocked(err)
}

// walFailedLocked is walFailed with d.mu held.
func (d *DB) walFailedLocked(err error) error {
	d.setBackgroundErrorLocked(err, "WAL write")
	return fmt.Errorf("%w: WAL write failed: %w", ErrReadOnly, err)
}

// applyToMemtable inserts every record of the encoded batch, each checked
// against its batch protection as it is copied (memtable.AddChecked) when
// the batch has protection of the memtable's checksum type.
func (d *DB) applyToMemtable(mem *memTableEntry, b *Batch) error {
	r, err := newBatchReader(b.data, "batch")
	if err != nil {
		return err
	}
	checked := b.protBytes != 0 && b.protType == d.cksum
	seq := r.seq
	for i := 0; ; i++ {
		kind, key, value, ok, err := r.next("batch")
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		switch {
		case !checked:
			err = mem.mt.Add(seq, kind, key, value)
		case i < len(b.prot):
			err = mem.mt.AddChecked(seq, kind, key, value, b.prot[i], int(b.protBytes))
		default:
			err = base.CorruptionErrorf("record %d has no protection (%d protected)", i, len(b.prot))
		}
		if err != nil {
			return fmt.Errorf("memtable add of %s#%d: %w", base.HexKey(key), seq, err)
		}
		if kind == base.KindRangeDelete {
			mem.rangeDels.Add(1)
		}
		seq++
	}
}

// makeRoomForWrite returns the memtable a batch of memSize bytes goes into,
// rotating the memtable when it is full. When the write must stall (too many
// memtables or L0 files wait for background work) it returns the reason
// instead, having woken the flush and compaction goroutines; the caller
// releases commitMu and waits in waitForStall. commitMu is held.
func (d *DB) makeRoomForWrite(memSize int) (*memTableEntry, string, error) {
	// Fast path: d.mem only changes under commitMu, which we hold.
	if d.mem.mt.Reserve(memSize) {
		return d.mem, "", nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		if d.bgErr != nil {
			return nil, "", fmt.Errorf("%w: writes stopped by a background error: %w", ErrReadOnly, d.bgErr)
		}
		if d.closed.Load() {
			return nil, "", ErrClosed
		}
		if d.mem.mt.Reserve(memSize) {
			return d.mem, "", nil
		}
		if reason := d.stallReasonLocked(); reason != "" {
			d.maybeScheduleFlushLocked()
			d.maybeScheduleCompactionLocked()
			return nil, reason, nil
		}
		if err := d.rotateMemtableLocked(memSize); err != nil {
			if errors.Is(err, errNoSpareWAL) {
				return nil, stallNoSpareWAL, nil
			}
			d.setBackgroundErrorLocked(err, "memtable rotation")
			return nil, "", err
		}
	}
}

// The stall policy. A write stops (stalls) while its memtable cannot be
// had: too many immutable memtables wait for a flush, L0 holds
// L0StopWritesTrigger files or more, or the next WAL is not ready. Between
// L0SlowdownWritesTrigger and the stop it is slowed (slowDown). These are
// the only checks; every path asks them through the functions below.

// paceBehindFlush yields the writer's processor every paceEvery sequence
// numbers (the write that took seqnums [seq, seq+n) yields if they cross
// a multiple of it) while a flush runs and mem, the memtable the write
// went to, is past half full: the flush has fallen behind, and without
// the yield a third memtable forms before it ends.
//
// Why: a writer that never blocks keeps a processor to itself until the
// scheduler preempts it, and the flush and the compactions, which yield
// every 1024 entries (backgroundYieldEvery), share what is left. With
// GOMAXPROCS 2, a flush beside an L0->L1 compaction then took 0.9-1.8 s
// instead of 0.2-0.4 s in a 10M-key fillrandom, the mutable memtable
// filled before it ended, and the peak RSS was 190-218 MiB against
// 140-150 with two memtables. Yielding puts the writer in the queue the
// background goroutines share, so that the three split both processors.
// The writer runs behind a flush for a fraction of each memtable at
// most, and only a yield's worth of time is lost when no one else waits.
func (d *DB) paceBehindFlush(mem *memTableEntry, seq, n uint64) {
	if (seq+n-1)/paceEvery == (seq-1)/paceEvery || !d.flushing.Load() ||
		2*mem.mt.ApproximateSize() < mem.mt.Capacity() {
		return
	}
	if h := d.testingHooks; h != nil && h.pacedYield != nil {
		h.pacedYield()
	}
	runtime.Gosched()
}

// paceEvery is how many sequence numbers (single-entry writes) behind a
// flush make one yield: about 50 µs of a random fill's inserts.
const paceEvery = 32

// l0Stopped reports whether L0 holds enough files to stop writes. d.mu is
// held.
func (d *DB) l0Stopped() bool { return len(d.vs.current.Levels[0]) >= d.opts.L0StopWritesTrigger }

// stallReasonLocked says why a rotation must wait, or "" if it need not.
// d.mu is held.
func (d *DB) stallReasonLocked() string {
	switch {
	case d.immFullLocked():
		return fmt.Sprintf("too many immutable memtables (%d, MaxImmutableMemtables=%d)", len(d.imm), d.opts.MaxImmutableMemtables)
	case d.l0Stopped():
		return fmt.Sprintf("too many L0 files (%d, L0StopWritesTrigger=%d)", len(d.vs.current.Levels[0]), d.opts.L0StopWritesTrigger)
	}
	return ""
}

// immFullLocked reports whether rotating the mutable memtable would leave
// more than MaxImmutableMemtables WriteBufferSizes waiting for a flush,
// each memtable counted by its arena but at most one WriteBufferSize (one
// is larger only to hold one batch). With memtables of WriteBufferSize
// that is "MaxImmutableMemtables of them wait", the rule as it was; the
// small ones of the growth schedule (nextMemtableSize) count by their
// size, so a row of them flushing does not stall writes, and what waits
// stays within the same bound. d.mu is held.
func (d *DB) immFullLocked() bool {
	bytes, _ := d.immArenasLocked()
	return d.immOverLimitLocked(bytes)
}

// immOverLimitLocked is immFullLocked for immutable memtables whose
// arenas add up to immBytes (immArenasLocked). d.mu is held.
func (d *DB) immOverLimitLocked(immBytes int64) bool {
	if len(d.imm) == 0 || d.mem == nil {
		return false
	}
	return immBytes+d.countedArena(d.mem) > int64(d.opts.MaxImmutableMemtables)*int64(d.opts.WriteBufferSize)
}

// countedArena is e's arena as the stall and flush rules count it: at
// most one WriteBufferSize (one is larger only to hold one batch).
func (d *DB) countedArena(e *memTableEntry) int64 {
	return min(int64(e.t.Capacity()), int64(d.opts.WriteBufferSize))
}

// immArenasLocked sums the immutable memtables' countedArena, and reports
// whether one of them is marked forceFlush. d.mu is held.
func (d *DB) immArenasLocked() (bytes int64, forced bool) {
	for _, e := range d.imm {
		bytes += d.countedArena(e)
		forced = forced || e.forceFlush
	}
	return bytes, forced
}

// rotationClearedLocked reports whether a rotation no longer needs to
// wait: a stall of makeRoomForWrite has cleared. d.mu is held.
func (d *DB) rotationClearedLocked() bool { return d.stallReasonLocked() == "" && d.walReadyLocked() }

// waitForStall waits, without commitMu, until the stall that stopped a
// write has cleared. It returns an error if the DB closed or stopped by a
// background error meanwhile.
func (d *DB) waitForStall() error { return d.waitStalled(d.rotationClearedLocked) }

// waitStalled is the one stall wait: a stalled writer (counted in
// Metrics.Stall.Waiting) waits under d.mu's condition until cleared (called
// with d.mu held) says it may go on, or the DB stopped.
func (d *DB) waitStalled(cleared func() bool) error {
	d.stats.stalledWriters.Add(1)
	defer d.stats.stalledWriters.Add(-1)
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		if d.bgErr != nil {
			return fmt.Errorf("%w: writes stopped by a background error: %w", ErrReadOnly, d.bgErr)
		}
		if d.closed.Load() {
			return ErrClosed
		}
		if cleared() {
			return nil
		}
		d.stallCond.Wait()
	}
}

// memtableSizeFor returns the arena size for a memtable of WriteBufferSize
// that must hold at least a batch of memSize bytes. Recovery replays WALs
// into such memtables; mutable ones take nextMemtableSize.
func (d *DB) memtableSizeFor(memSize int) int {
	return arenaSizeFor(d.opts.WriteBufferSize, memSize)
}

// arenaSizeFor returns size, or more if a batch of memSize bytes needs it.
func arenaSizeFor(size, memSize int) int {
	if need := memSize + memSize/8 + 64<<10; need > size {
		size = need
	}
	return size
}

// scheduledMemtableSize returns the arena of the n-th mutable memtable
// after Open (from 0) for a WriteBufferSize of wb: a quarter of it, a
// quarter, a half, then wb itself. The first three hold one
// WriteBufferSize together and flush together (flushDueLocked), so that
// from then on memtables rotate where they would have without them. A wb
// under 1 MiB is used from the first.
//
// Why: a random insert is a skiplist search whose cost is its cache
// misses, which grow with the list. A 1M-key random fill of 33-byte keys
// (bench/peers geth) spends over half its time there: with 16 MiB
// memtables it ran at 0.92M against 0.68M inserts/s with 64 MiB ones.
// Why not smaller (Pebble starts at 256 KiB and doubles): a young DB's
// data then lies in many small memtables, which every read merges;
// starting at 256 KiB made fills 15–21 % faster but memtable-resident
// reads 25–35 % slower (docs/performance.md). And why sizes that add up
// to wb: memtables that grow by doubling from a quarter (16, 32, then 64
// MiB) leave every later memtable a quarter of wb fuller or emptier than
// before at a given point, and a DB's memory at rest (in bench/peers'
// large scenario, 16 MiB more) moved with it.
func scheduledMemtableSize(n, wb int) int {
	switch {
	case wb < 1<<20 || n >= 3:
		return wb
	case n < 2:
		return wb / 4
	}
	return wb / 2
}

// nextMemtableSize returns the arena size for the next mutable memtable,
// which must hold a batch of memSize bytes, and counts it. d.mu is held
// (or Open runs alone).
func (d *DB) nextMemtableSize(memSize int) int {
	size := scheduledMemtableSize(d.memCount, d.opts.WriteBufferSize)
	d.memCount++
	return arenaSizeFor(size, memSize)
}

// newMemTable creates a memtable whose arena lives outside the Go heap,
// counted in Metrics.Memory until releaseMemTable.
func (d *DB) newMemTable(size int) (*memtable.MemTable, error) {
	mt, err := memtable.New(memtable.Options{
		Size:                  size,
		ChecksumType:          d.cksum,
		ParanoidMemoryChecks:  d.opts.ParanoidMemoryChecks,
		ProtectionBytesPerKey: d.opts.MemtableProtectionBytesPerKey,
		ManualMemory:          true,
		Comparer:              d.cmp,
		FilterBytes:           d.memtableFilterBytes(size),
	})
	if err == nil {
		d.stats.memtableBytes.add(int64(mt.Capacity()))
	}
	return mt, err
}

// memtableFilterBytes sizes the filter of a memtable of size bytes
// (Options.MemtableFilterRatio; 0: none).
func (d *DB) memtableFilterBytes(size int) int {
	if r := d.opts.MemtableFilterRatio; r > 0 {
		return int(float64(size) * r)
	}
	return 0
}

// releaseMemTable frees a memtable's arena (or a flushable batch's memory)
// and gives back its bytes.
func releaseMemTable(mt flushable, acct *memAccount) {
	acct.add(-int64(mt.Capacity()))
	mt.Release()
}

// memAccount counts the bytes of the memtables' arenas. With a memory
// budget, every change hands the block cache what the memtables leave of
// it (RocksDB's WriteBufferManager charging the cache): one limit for both.
type memAccount struct {
	bytes atomic.Int64
	// budget is Options.MemoryBudget (0: none) and cache the block cache
	// whose capacity follows it. Set at Open, before any memtable exists.
	budget int64
	cache  *cache.Cache
}

func (a *memAccount) add(n int64) {
	used := a.bytes.Add(n)
	if a.budget > 0 {
		a.cache.SetCapacity(cacheShareOfBudget(a.budget, used))
	}
}

// cacheShareOfBudget is the block cache's capacity under a budget when the
// memtables hold used bytes: the rest, but never below 1/16 of the budget,
// so that reads keep a working set while memtables fill.
func cacheShareOfBudget(budget, used int64) int64 {
	return max(budget-used, budget/16)
}

// errNoSpareWAL is rotateMemtableLocked's answer when the next WAL is not
// created yet: the caller waits (without commitMu) and retries.
var errNoSpareWAL = errors.New("vigil: " + stallNoSpareWAL)

// stallNoSpareWAL is the stall reason of a write that switches WALs before
// the next one is created.
const stallNoSpareWAL = "waiting for the next WAL to be created"

// rotateMemtableLocked makes the mutable memtable immutable, switches to a
// new WAL and memtable, and schedules a flush. It does no file I/O: the new
// WAL was created ahead of time by prepareWAL (errNoSpareWAL if it is not
// ready yet), and the old one is synced and closed in the background by
// closeWAL, which holds the new one back until then (wal.Writer.Hold), so a
// synced write in the new WAL can never sit behind an unsynced tail of the
// old one. d.mu and commitMu are held.
func (d *DB) rotateMemtableLocked(memSize int) error {
	if !d.walReadyLocked() {
		d.maybePrepareWALLocked(true)
		return errNoSpareWAL
	}
	// The memtable first: it can fail (an arena too large), and must do so
	// before the WAL switches.
	mt, err := d.newMemTable(d.nextMemtableSize(memSize))
	if err != nil {
		return err
	}
	var logNum uint64
	if !d.opts.DisableWAL {
		if logNum, err = d.switchWALLocked(); err != nil {
			releaseMemTable(mt, &d.stats.memtableBytes)
			return err
		}
	}
	old := d.mem
	d.imm = append(d.imm, old)
	d.mem = newMemTableEntry(d.cmp, mt, logNum, &d.stats.memtableBytes)
	d.updateReadStateLocked()
	d.log.Infof("memtable rotated: %d bytes, %d entries, WAL %06d -> %06d",
		old.t.ApproximateSize(), old.t.Count(), old.logNum, logNum)
	d.maybeScheduleFlushLocked()
	d.maybePrepareWALLocked(false)
	return nil
}
