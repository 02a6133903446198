package vigil

import (
	"fmt"
	"sync"
)

// publisher makes batches visible in sequence-number order. Each committed
// batch takes a ticket in commit order; publish marks it ready (applied to
// its memtable and, if synced, durable) and moves visibleSeq over every
// ready batch at the head of the queue.
//
// Concurrency: all methods are safe for concurrent use; enqueue is called
// under commitMu, so tickets follow seqnum order.
//
// Invariants: head <= tail; visibleSeq is the last seqnum of the batch
// before head; once fail(t) was called, head never passes t, so a batch
// whose WAL sync failed, and every batch after it, stays invisible.
type publisher struct {
	mu   sync.Mutex
	cond sync.Cond
	// ring holds the last seqnum of each batch from head to tail; done
	// marks batches ready but not yet published.
	ring []pubEntry
	head uint64 // ticket of the oldest unpublished batch
	tail uint64 // next ticket
	// failed is set by fail; failedAt is the first failed ticket.
	failed   bool
	failedAt uint64
	// waiting counts the writers asleep in publish that no broadcast has
	// woken yet (for tests, which need to know that every writer has
	// settled: returned, or waits with nothing to wake it).
	waiting int
}

type pubEntry struct {
	lastSeq uint64
	done    bool
}

// errPublishStopped is returned to writers queued behind a batch whose WAL
// sync failed: their batches can never become visible.
var errPublishStopped = fmt.Errorf("%w: an earlier write's WAL sync failed; this write was not made visible", ErrReadOnly)

// enqueue takes a ticket for a batch whose last seqnum is lastSeq. Called
// under commitMu, so tickets follow seqnum order.
func (p *publisher) enqueue(lastSeq uint64) uint64 {
	p.mu.Lock()
	if p.cond.L == nil {
		p.cond.L = &p.mu
	}
	if n := p.tail - p.head; n == uint64(len(p.ring)) {
		ring := make([]pubEntry, max(16, 2*len(p.ring)))
		for t := p.head; t < p.tail; t++ {
			ring[t%uint64(len(ring))] = p.ring[t%uint64(len(p.ring))]
		}
		p.ring = ring
	}
	t := p.tail
	p.ring[t%uint64(len(p.ring))] = pubEntry{lastSeq: lastSeq}
	p.tail++
	p.mu.Unlock()
	return t
}

// publish marks ticket t ready, advances visible over the ready head of the
// queue, and returns once visible covers t's batch. It returns
// errPublishStopped if a batch at or before t failed.
func (p *publisher) publish(t uint64, visible interface {
	Load() uint64
	Store(uint64)
}) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := uint64(len(p.ring))
	p.ring[t%n].done = true
	advanced := false
	for p.head < p.tail && p.ring[p.head%n].done && !(p.failed && p.head >= p.failedAt) {
		visible.Store(p.ring[p.head%n].lastSeq)
		p.ring[p.head%n].done = false
		p.head++
		advanced = true
	}
	if advanced {
		p.waiting = 0
		p.cond.Broadcast()
	}
	for p.head <= t {
		if p.failed && t >= p.failedAt {
			return errPublishStopped
		}
		p.waiting++
		p.cond.Wait()
	}
	return nil
}

// fail marks ticket t as never to be published: t and every later ticket
// stay invisible, and their writers' publish calls return
// errPublishStopped.
func (p *publisher) fail(t uint64) {
	p.mu.Lock()
	if !p.failed || t < p.failedAt {
		p.failed, p.failedAt = true, t
	}
	p.waiting = 0
	p.cond.Broadcast()
	p.mu.Unlock()
}
