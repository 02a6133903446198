package vigil

import (
	"fmt"
	"sync"
	"time"

	"github.com/vigildb/vigil/internal/base"
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
	b := batchPool.Get().(*Batch)
	b.Put(key, value)
	err := d.Apply(b, o)
	b.Reset()
	batchPool.Put(b)
	return err
}

// Delete removes key. Deleting a missing key is not an error.
func (d *DB) Delete(key []byte, o *WriteOptions) error {
	b := batchPool.Get().(*Batch)
	b.Delete(key)
	err := d.Apply(b, o)
	b.Reset()
	batchPool.Put(b)
	return err
}

// DeleteRange removes every key in [start, end). start must be < end.
func (d *DB) DeleteRange(start, end []byte, o *WriteOptions) error {
	if string(start) >= string(end) {
		return base.InvalidArgumentErrorf("DeleteRange: start %s must be before end %s", base.HexKey(start), base.HexKey(end))
	}
	b := batchPool.Get().(*Batch)
	b.DeleteRange(start, end)
	err := d.Apply(b, o)
	b.Reset()
	batchPool.Put(b)
	return err
}

var batchPool = sync.Pool{New: func() any { return new(Batch) }}

// Apply commits the batch atomically: after a crash it is all there or not
// at all, and readers see all of it or none. The batch may be reused once
// Apply returns.
func (d *DB) Apply(b *Batch, o *WriteOptions) error {
	if err := d.writable(); err != nil {
		return err
	}
	if b == nil || b.Empty() {
		return nil
	}
	if b.err != nil {
		return b.err
	}
	syncWAL := o != nil && o.Sync && !d.opts.DisableWAL

	d.commitMu.Lock()
	if d.closed.Load() {
		d.commitMu.Unlock()
		return ErrClosed
	}
	// Again under commitMu: a rotation that failed while we waited for it
	// leaves the old memtable with room but its WAL closed.
	if err := d.writable(); err != nil {
		d.commitMu.Unlock()
		return err
	}
	mem, err := d.makeRoomForWrite(b.memSize)
	if err != nil {
		d.commitMu.Unlock()
		return err
	}
	seq := d.nextSeq
	d.nextSeq += uint64(b.count)
	b.setSeqNum(seq)
	var walEnd int64
	walW := d.walW
	if !d.opts.DisableWAL {
		walEnd, err = walW.WriteRecord(b.data)
		if err != nil {
			d.commitMu.Unlock()
			return d.walFailed(err)
		}
		d.stats.walBytes.Add(int64(len(b.data)))
		d.stats.walRecords.Add(1)
	}
	mem.writers.Add(1)
	ticket := d.pub.enqueue(seq + uint64(b.count) - 1)
	d.commitMu.Unlock()

	applyErr := d.applyToMemtable(mem, b)
	if applyErr != nil {
		// Part of the batch may be in the memtable. Poison it before the
		// batch's seqnums become visible, so no reader sees half a batch;
		// the WAL holds the whole batch for the next Open.
		mem.poison(applyErr)
	}
	mem.writers.Done()
	d.pub.publish(ticket, &d.visibleSeq)
	if applyErr != nil {
		d.mu.Lock()
		d.setBackgroundErrorLocked(applyErr, "memtable insert")
		d.mu.Unlock()
		return applyErr
	}
	if syncWAL {
		if err := walW.SyncTo(walEnd); err != nil {
			return d.walFailed(err)
		}
	}
	return nil
}

// walFailed makes a WAL write or sync failure a background error: the WAL
// may now miss acknowledged writes, so the DB stops accepting more.
func (d *DB) walFailed(err error) error {
	d.mu.Lock()
	d.setBackgroundErrorLocked(err, "WAL write")
	d.mu.Unlock()
	return fmt.Errorf("%w: WAL write failed: %w", ErrReadOnly, err)
}

// applyToMemtable inserts every record of the encoded batch.
func (d *DB) applyToMemtable(mem *memTableEntry, b *Batch) error {
	r, err := newBatchReader(b.data, "batch")
	if err != nil {
		return err
	}
	seq := r.seq
	for {
		kind, key, value, ok, err := r.next("batch")
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if err := mem.mt.Add(seq, kind, key, value); err != nil {
			return fmt.Errorf("memtable add of %s#%d: %w", base.HexKey(key), seq, err)
		}
		if kind == base.KindRangeDelete {
			mem.rangeDels.Add(1)
		}
		seq++
	}
}

// makeRoomForWrite returns the memtable a batch of memSize bytes goes into,
// rotating the memtable when it is full and stalling (not failing) while too
// many memtables or L0 files wait for background work. commitMu is held.
func (d *DB) makeRoomForWrite(memSize int) (*memTableEntry, error) {
	// Fast path: d.mem only changes under commitMu, which we hold.
	if d.mem.mt.Reserve(memSize) {
		return d.mem, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var stallStart time.Time
	var stallReason string
	defer func() {
		if stallReason != "" {
			dur := time.Since(stallStart)
			d.stats.recordStall(stallReason, dur)
			d.log.Infof("write stall ended after %v: %s", dur, stallReason)
		}
	}()
	for {
		if d.bgErr != nil {
			return nil, fmt.Errorf("%w: writes stopped by a background error: %w", ErrReadOnly, d.bgErr)
		}
		if d.closed.Load() {
			return nil, ErrClosed
		}
		if d.mem.mt.Reserve(memSize) {
			return d.mem, nil
		}
		reason := ""
		switch {
		case len(d.imm) >= d.opts.MaxImmutableMemtables:
			reason = fmt.Sprintf("too many immutable memtables (%d, MaxImmutableMemtables=%d)", len(d.imm), d.opts.MaxImmutableMemtables)
		case len(d.vs.current.levels[0]) >= d.opts.L0StopWritesTrigger:
			reason = fmt.Sprintf("too many L0 files (%d, L0StopWritesTrigger=%d)", len(d.vs.current.levels[0]), d.opts.L0StopWritesTrigger)
		}
		if reason != "" {
			if stallReason == "" {
				stallStart = time.Now()
				stallReason = reason
				d.log.Infof("write stall: %s", reason)
			}
			d.maybeScheduleFlushLocked()
			d.maybeScheduleCompactionLocked()
			d.stallCond.Wait()
			continue
		}
		if err := d.rotateMemtableLocked(memSize); err != nil {
			d.setBackgroundErrorLocked(err, "memtable rotation")
			return nil, err
		}
	}
}

// memtableSizeFor returns the arena size for a new memtable that must hold
// at least a batch of memSize bytes.
func (d *DB) memtableSizeFor(memSize int) int {
	size := d.opts.WriteBufferSize
	if need := memSize + memSize/8 + 64<<10; need > size {
		size = need
	}
	return size
}

func (d *DB) newMemTable(size int) (*memtable.MemTable, error) {
	return memtable.New(memtable.Options{
		Size:                  size,
		ChecksumType:          d.cksum,
		ParanoidMemoryChecks:  d.opts.ParanoidMemoryChecks,
		ProtectionBytesPerKey: d.opts.MemtableProtectionBytesPerKey,
	})
}

// rotateMemtableLocked makes the mutable memtable immutable, starts a new
// WAL and memtable, and schedules a flush. The old WAL is synced and closed
// first, so a synced write in the new WAL can never sit behind an unsynced
// tail of the old one (recovery stops at the first damaged WAL). d.mu and
// commitMu are held.
func (d *DB) rotateMemtableLocked(memSize int) error {
	var logNum uint64
	var newW *wal.Writer
	if !d.opts.DisableWAL {
		if err := d.walW.Close(); err != nil {
			return fmt.Errorf("closing WAL %06d: %w", d.walNum, err)
		}
		logNum = d.vs.allocFileNum()
		var err error
		newW, err = d.createWAL(logNum)
		if err != nil {
			return err
		}
	}
	mt, err := d.newMemTable(d.memtableSizeFor(memSize))
	if err != nil {
		return err
	}
	old := d.mem
	d.imm = append(d.imm, old)
	d.mem = &memTableEntry{mt: mt, logNum: logNum, flushed: make(chan struct{})}
	if newW != nil {
		d.walW, d.walNum = newW, logNum
	}
	d.updateReadStateLocked()
	d.log.Infof("memtable rotated: %d bytes, %d entries, WAL %06d -> %06d",
		old.mt.ApproximateSize(), old.mt.Count(), old.logNum, logNum)
	d.maybeScheduleFlushLocked()
	return nil
}

// createWAL creates and syncs the directory entry of a new WAL.
func (d *DB) createWAL(logNum uint64) (*wal.Writer, error) {
	name := makeFilename(d.fs, d.dirname, fileTypeLog, logNum)
	f, err := d.fs.Create(name)
	if err != nil {
		return nil, fmt.Errorf("creating WAL %s: %w", name, err)
	}
	w, err := wal.NewWriter(f, name, logNum, d.cksum)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("creating WAL %s: %w", name, err)
	}
	// Make the header durable, so that a crash leaves a valid empty log,
	// not an empty file (which AbsoluteConsistency recovery would reject).
	if err := w.Sync(); err != nil {
		w.Close()
		return nil, fmt.Errorf("syncing new WAL %s: %w", name, err)
	}
	if err := d.dataDir.Sync(); err != nil {
		w.Close()
		return nil, fmt.Errorf("syncing directory after creating %s: %w", name, err)
	}
	return w, nil
}

// publisher makes batches visible in sequence-number order. Each committed
// batch takes a ticket in commit order; publish marks it applied and moves
// visibleSeq over every applied batch at the head of the queue.
type publisher struct {
	mu   sync.Mutex
	cond sync.Cond
	// ring holds the last seqnum of each batch from head to tail; done
	// marks batches applied but not yet published.
	ring []pubEntry
	head uint64 // ticket of the oldest unpublished batch
	tail uint64 // next ticket
}

type pubEntry struct {
	lastSeq uint64
	done    bool
}

// enqueue takes a ticket for a batch whose last seqnum is lastSeq. Called
// under commitMu, so tickets follow seqnum order.
func (p *publisher) enqueue(lastSeq uint64) uint64 {
	p.mu.Lock()
	if p.cond.L == nil {
		p.cond.L = &p.mu
	}
	if n := p.tail - p.head; n == uint64(len(p.ring)) {
		grown := make([]pubEntry, max(16, 2*len(p.ring)))
		for t := p.head; t < p.tail; t++ {
			grown[t%uint64(len(grown))] = p.ring[t%uint64(len(p.ring))]
		}
		p.ring = grown
	}
	t := p.tail
	p.ring[t%uint64(len(p.ring))] = pubEntry{lastSeq: lastSeq}
	p.tail++
	p.mu.Unlock()
	return t
}

// publish marks ticket t applied, advances visible over the applied head of
// the queue, and returns once visible covers t's batch.
func (p *publisher) publish(t uint64, visible interface {
	Load() uint64
	Store(uint64)
}) {
	p.mu.Lock()
	n := uint64(len(p.ring))
	p.ring[t%n].done = true
	advanced := false
	for p.head < p.tail && p.ring[p.head%n].done {
		visible.Store(p.ring[p.head%n].lastSeq)
		p.ring[p.head%n].done = false
		p.head++
		advanced = true
	}
	if advanced {
		p.cond.Broadcast()
	}
	for p.head <= t {
		p.cond.Wait()
	}
	p.mu.Unlock()
}
