package vigil

import (
	"errors"
	"sync"
	"time"
)

// EventListener is told about the DB's background events, so that an
// application can export them as metrics and alert on the ones that matter
// (a corruption found, a background error that made the DB read-only).
// Every field is optional. Callbacks run one at a time, in the order of
// the events, on a goroutine of the DB's own, never under a DB lock; they
// must not block for long (events queue behind them) and must not call
// Close. RocksDB's EventListener and Pebble's EventListener play this role.
type EventListener struct {
	// FlushEnd follows every memtable flush (Err set if it failed).
	FlushEnd func(FlushInfo)
	// CompactionEnd follows every compaction and trivial move.
	CompactionEnd func(CompactionInfo)
	// WALCreated follows the switch to a new WAL (at Open and at every
	// memtable rotation).
	WALCreated func(WALInfo)
	// WriteStallBegin and WriteStallEnd bracket a writer's stall.
	WriteStallBegin func(StallInfo)
	WriteStallEnd   func(StallInfo)
	// BackgroundError reports the error that made the DB read-only.
	BackgroundError func(error)
	// CorruptionFound reports every corruption found: by a read (memtable,
	// table, iterator), a flush, a compaction or Verify. The error wraps
	// ErrCorruption and says where.
	CorruptionFound func(error)
}

// FlushInfo describes a flush.
type FlushInfo struct {
	// LogNum is the WAL of the flushed memtable; FileNum the table written
	// (0 for an empty memtable).
	LogNum, FileNum uint64
	Entries, Bytes  uint64
	Duration        time.Duration
	Err             error
}

// CompactionInfo describes a compaction.
type CompactionInfo struct {
	Level, OutputLevel int
	// Reason says why it ran: "score 1.25" (the level's score), "manual"
	// or "manual, bottom level in place" (Compact), "seeks" (see
	// Options.SeekCompactionBytes).
	Reason                string
	Inputs, Outputs       []uint64 // file numbers
	ReadBytes, WriteBytes uint64
	// TrivialMove: the inputs moved down without being rewritten.
	TrivialMove bool
	Duration    time.Duration
	Err         error
}

// WALInfo describes a WAL the DB switched to.
type WALInfo struct {
	LogNum, PrevLogNum uint64
}

// StallInfo describes a write stall.
type StallInfo struct {
	Reason   string
	Duration time.Duration // WriteStallEnd only
}

// eventQueue delivers listener callbacks in order on one goroutine.
type eventQueue struct {
	mu      sync.Mutex
	cond    sync.Cond
	q       []func()
	closing bool
	done    chan struct{}
}

func newEventQueue() *eventQueue {
	e := &eventQueue{done: make(chan struct{})}
	e.cond.L = &e.mu
	go e.run()
	return e
}

func (e *eventQueue) run() {
	defer close(e.done)
	for {
		e.mu.Lock()
		for len(e.q) == 0 && !e.closing {
			e.cond.Wait()
		}
		q := e.q
		e.q = nil
		closing := e.closing
		e.mu.Unlock()
		for _, fn := range q {
			fn()
		}
		if closing && len(q) == 0 {
			return
		}
	}
}

func (e *eventQueue) push(fn func()) {
	e.mu.Lock()
	e.q = append(e.q, fn)
	e.cond.Signal()
	e.mu.Unlock()
}

// close delivers what is queued and stops.
func (e *eventQueue) close() {
	e.mu.Lock()
	e.closing = true
	e.cond.Signal()
	e.mu.Unlock()
	<-e.done
}

// The emit helpers queue an event if the listener wants it; they cost a
// nil check otherwise, and may be called under DB locks.

func (d *DB) emitFlush(i FlushInfo) {
	if l := d.opts.EventListener; l != nil && l.FlushEnd != nil {
		d.events.push(func() { l.FlushEnd(i) })
	}
	if i.Err != nil {
		d.emitCorruption(i.Err)
	}
}

func (d *DB) emitCompaction(i CompactionInfo) {
	if l := d.opts.EventListener; l != nil && l.CompactionEnd != nil {
		d.events.push(func() { l.CompactionEnd(i) })
	}
	if i.Err != nil {
		d.emitCorruption(i.Err)
	}
}

func (d *DB) emitWAL(i WALInfo) {
	if l := d.opts.EventListener; l != nil && l.WALCreated != nil {
		d.events.push(func() { l.WALCreated(i) })
	}
}

func (d *DB) emitStall(begin bool, i StallInfo) {
	l := d.opts.EventListener
	switch {
	case l == nil:
	case begin && l.WriteStallBegin != nil:
		d.events.push(func() { l.WriteStallBegin(i) })
	case !begin && l.WriteStallEnd != nil:
		d.events.push(func() { l.WriteStallEnd(i) })
	}
}

func (d *DB) emitBackgroundError(err error) {
	if l := d.opts.EventListener; l != nil && l.BackgroundError != nil {
		d.events.push(func() { l.BackgroundError(err) })
	}
	d.emitCorruption(err)
}

// emitCorruption reports err if it is a corruption.
func (d *DB) emitCorruption(err error) {
	if l := d.opts.EventListener; l != nil && l.CorruptionFound != nil && errors.Is(err, ErrCorruption) {
		d.events.push(func() { l.CorruptionFound(err) })
	}
}
