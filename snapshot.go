package vigil

import "sync/atomic"

// Snapshot is a consistent, read-only view of the DB at the moment it was
// taken: its Get and NewIter see exactly the writes visible then, whatever
// happens later. Compactions keep the versions a live snapshot needs, so
// Close snapshots when done.
//
// Safe for concurrent use.
type Snapshot struct {
	d      *DB
	seq    uint64
	closed atomic.Bool
	// list links, guarded by DB.mu.
	prev, next *Snapshot
}

// snapshotList is a doubly linked list of live snapshots in seqnum order
// (snapshots are taken at a non-decreasing visible seqnum). Guarded by DB.mu.
type snapshotList struct {
	root  Snapshot
	count int
}

func (l *snapshotList) init() {
	l.root.next = &l.root
	l.root.prev = &l.root
}

func (l *snapshotList) push(s *Snapshot) {
	if l.root.next == nil {
		l.init()
	}
	s.prev = l.root.prev
	s.next = &l.root
	s.prev.next = s
	s.next.prev = s
	l.count++
}

func (l *snapshotList) remove(s *Snapshot) {
	s.prev.next = s.next
	s.next.prev = s.prev
	s.prev, s.next = nil, nil
	l.count--
}

// seqs returns the sequence numbers of the live snapshots, ascending.
func (l *snapshotList) seqs() []uint64 {
	if l.root.next == nil {
		return nil
	}
	out := make([]uint64, 0, l.count)
	for s := l.root.next; s != &l.root; s = s.next {
		out = append(out, s.seq)
	}
	return out
}

// NewSnapshot returns a snapshot of the DB's current state. Close it when
// done: it pins old versions of keys against compaction.
func (d *DB) NewSnapshot() *Snapshot {
	s := &Snapshot{}
	d.registerSnapshot(s)
	return s
}

// registerSnapshot makes s, new or closed, a snapshot of d's current
// state.
func (d *DB) registerSnapshot(s *Snapshot) {
	s.d = d
	s.closed.Store(false)
	d.mu.Lock()
	s.seq = d.visibleSeq.Load()
	d.snapshots.push(s)
	d.mu.Unlock()
}

// Seq returns the sequence number the snapshot reads at.
func (s *Snapshot) Seq() uint64 { return s.seq }

// Get returns a copy of the value key had when the snapshot was taken, or
// ErrNotFound.
func (s *Snapshot) Get(key []byte) ([]byte, error) {
	if s.closed.Load() || s.d.closed.Load() {
		return nil, ErrClosed
	}
	return s.d.get(nil, key, s.seq, false)
}

// NewIter returns an iterator over the snapshot's state.
func (s *Snapshot) NewIter(o *IterOptions) (*Iterator, error) {
	if s.closed.Load() || s.d.closed.Load() {
		return nil, ErrClosed
	}
	return s.d.newIter(o, s.seq, s.d.userReads)
}

// Close releases the snapshot. Closing twice returns ErrClosed.
func (s *Snapshot) Close() error {
	if s.closed.Swap(true) {
		return ErrClosed
	}
	s.d.mu.Lock()
	s.d.snapshots.remove(s)
	s.d.mu.Unlock()
	return nil
}
