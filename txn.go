package vigil

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/vigildb/vigil/internal/base"
)

// Optimistic transactions.
//
// A Txn reads at a snapshot taken when it starts, buffers its writes in an
// indexed batch (so it reads its own writes), and commits them atomically
// as one batch, with consecutive seqnums, if nothing it read changed:
// every key it read with Get, and every range it iterated (its iterator's
// bounds, whatever part of them it visited), must have no write after the
// snapshot, by a transaction or any other commit (a Put, a range deletion,
// an ingestion). Otherwise Commit fails with ErrConflict and writes
// nothing; the caller retries the whole transaction. This is Badger's
// db.Update and RocksDB's OptimisticTransactionDB; it makes committed
// transactions serializable in commit order.
//
// The check runs inside the commit pipeline (DB.apply), under commitMu once
// every commit before it is visible, so no commit can come between the
// check and this one's seqnums. It reads the current state directly (the
// newest version of each key read, every version and tombstone of each
// range read): there is no log of recent writes to keep, so conflict
// tracking takes no memory beyond each transaction's own read set, which
// goes with it. Its cost is a point lookup per key read and a scan per
// range read, paid at commit while other commits wait: keep the ranges a
// transaction iterates small.
//
// A Txn is used by one goroutine at a time. Reads and writes after Commit
// or Discard fail with ErrClosed.
type Txn struct {
	d        *DB
	snap     *Snapshot
	b        *Batch
	readOnly bool
	done     bool
	// committed: Commit wrote the transaction's writes.
	committed bool
	// readKeys holds the keys read from the snapshot (not those the
	// transaction's own writes answered), end to end, readEnds where each
	// ends; ranges are the iterated ranges.
	readKeys []byte
	readEnds []int
	ranges   []txnRange
	// seq is the first seqnum of the committed batch (0 before Commit or
	// without writes).
	seq uint64
	// snapBuf is the snapshot of a pooled transaction (Update, View),
	// reused with the rest of it.
	snapBuf Snapshot
}

// txnPool recycles the transactions of Update and View, whose fn may not
// keep them: their batch's buffer and index, the read set, the snapshot.
var txnPool = sync.Pool{New: func() any { return &Txn{b: &Batch{ix: &batchIndex{}}} }}

// pooledTxn is NewTxn from txnPool: a recycled transaction on a new
// snapshot of d.
func (d *DB) pooledTxn() *Txn {
	t := txnPool.Get().(*Txn)
	t.d, t.readOnly, t.done, t.committed, t.seq = d, false, false, false, 0
	t.snap = &t.snapBuf
	d.registerSnapshot(t.snap)
	t.b.Reset()
	t.b.cmp = d.cmp
	t.b.setProtection(d.cksum, d.opts.BatchProtectionBytesPerKey)
	t.b.ix.db, t.b.ix.snap = d, t.snap
	return t
}

// recycle returns an ended transaction of Update or View to the pool.
func (t *Txn) recycle() {
	if t.b.Len() > maxPooledTxnBatch {
		t.b = &Batch{ix: &batchIndex{}}
	}
	t.b.ix.db, t.b.ix.snap, t.d, t.snap = nil, nil, nil, nil
	txnPool.Put(t)
}

// maxPooledTxnBatch: a transaction whose batch grew past it is not pooled
// with that buffer.
const maxPooledTxnBatch = 64 << 10

// txnRange is an iterated range [lo, hi); nil bounds are unbounded.
type txnRange struct{ lo, hi []byte }

// NewTxn starts a read-write transaction at the DB's current state.
func (d *DB) NewTxn() *Txn {
	s := d.NewSnapshot()
	return &Txn{d: d, snap: s, b: s.NewIndexedBatch()}
}

// Update runs fn in a new transaction and commits it if fn returns nil
// (with no fsync; use NewTxn and Commit for other WriteOptions). It
// returns fn's error, or Commit's: ErrConflict (errors.Is) means another
// commit changed what fn read, and the whole Update may be retried.
//
// The Txn is valid only until fn returns: Update reuses it.
func (d *DB) Update(fn func(*Txn) error) error {
	t := d.pooledTxn()
	defer t.recycle()
	defer t.Discard()
	if err := fn(t); err != nil {
		return err
	}
	if t.committed {
		return nil // fn committed it itself
	}
	return t.Commit(nil)
}

// View runs fn in a read-only transaction: a consistent view at one
// snapshot. Its writes fail with ErrInvalidArgument.
// The Txn is valid only until fn returns: View reuses it.
func (d *DB) View(fn func(*Txn) error) error {
	t := d.pooledTxn()
	t.readOnly = true
	defer t.recycle()
	defer t.Discard()
	return fn(t)
}

func (t *Txn) usable(write bool) error {
	switch {
	case t.done:
		return fmt.Errorf("transaction: %w", ErrClosed)
	case write && t.readOnly:
		return base.InvalidArgumentErrorf("write in a read-only transaction (View)")
	}
	return nil
}

// Get returns the value of key as the transaction sees it: its own writes
// over its snapshot. A key answered by the snapshot joins the read set.
func (t *Txn) Get(key []byte) ([]byte, error) {
	if err := t.usable(false); err != nil {
		return nil, err
	}
	v, st, err := t.b.ix.get(t.b.data, key)
	if st == batchDecided {
		return v, err // the transaction's own writes decide
	}
	t.readKeys = append(t.readKeys, key...)
	t.readEnds = append(t.readEnds, len(t.readKeys))
	below, err := t.snap.Get(key)
	if st == batchUndecided {
		return below, err
	}
	return t.b.ix.mergeOnto(key, below, err, v) // its operands go onto the snapshot's value
}

// NewIter returns an iterator over the transaction's view within o's
// bounds; the whole range of the bounds joins the read set.
func (t *Txn) NewIter(o *IterOptions) (*Iterator, error) {
	if err := t.usable(false); err != nil {
		return nil, err
	}
	it, err := t.b.NewIter(o)
	if err != nil {
		return nil, err
	}
	t.ranges = append(t.ranges, txnRange{cloneOrNil(it.lower), cloneOrNil(it.upper)})
	return it, nil
}

// Put sets key to value in the transaction.
func (t *Txn) Put(key, value []byte) error {
	if err := t.usable(true); err != nil {
		return err
	}
	t.b.Put(key, value)
	return nil
}

// Merge merges operand into key in the transaction (see Merger). It is a
// write without a read: it conflicts with nothing by itself.
func (t *Txn) Merge(key, operand []byte) error {
	if err := t.usable(true); err != nil {
		return err
	}
	t.b.Merge(key, operand)
	return nil
}

// Delete removes key in the transaction.
func (t *Txn) Delete(key []byte) error {
	if err := t.usable(true); err != nil {
		return err
	}
	t.b.Delete(key)
	return nil
}

// DeleteRange removes every key in [start, end) in the transaction.
func (t *Txn) DeleteRange(start, end []byte) error {
	if err := t.usable(true); err != nil {
		return err
	}
	t.b.DeleteRange(start, end)
	return nil
}

// Commit writes the transaction's writes atomically if nothing it read was
// written after its snapshot; otherwise it returns an error wrapping
// ErrConflict that names the key or range, and writes nothing. A
// transaction without writes commits trivially (it saw one snapshot).
// Either way the transaction is over.
func (t *Txn) Commit(o *WriteOptions) error {
	if err := t.usable(false); err != nil {
		return err
	}
	defer t.Discard()
	if t.b.Empty() {
		t.committed = t.b.err == nil
		return t.b.err
	}
	if err := t.d.apply(t.b, o, t.check); err != nil {
		return err
	}
	t.committed = true
	t.seq = binary.LittleEndian.Uint64(t.b.data[:8])
	return nil
}

// CommitSeq returns the sequence number of the transaction's committed
// batch (its first write's): committed transactions are serializable in
// CommitSeq order. 0 before Commit, after a failed one, or for a
// transaction without writes.
func (t *Txn) CommitSeq() uint64 { return t.seq }

// Discard ends the transaction without writing; after Commit it does
// nothing. Safe to call more than once.
func (t *Txn) Discard() {
	if t.done {
		return
	}
	t.done = true
	t.snap.Close()
	t.readKeys, t.readEnds, t.ranges = t.readKeys[:0], t.readEnds[:0], t.ranges[:0]
}

// check is the commit's validation (see Txn): run by DB.apply under
// commitMu with every earlier commit visible.
func (t *Txn) check() error {
	d := t.d
	snap, now := t.snap.seq, d.visibleSeq.Load()
	if now == snap {
		// No commit took a seqnum since the snapshot (every commit is
		// visible here): nothing read can have changed.
		return nil
	}
	rs := d.loadReadState()
	if rs == nil {
		return ErrClosed
	}
	defer rs.unref()
	start := 0
	for _, end := range t.readEnds {
		k := t.readKeys[start:end]
		start = end
		v, err := d.findVersion(rs, k, now)
		v.ref.Release()
		if err != nil {
			return err
		}
		seq := v.cover
		if v.found {
			seq = max(seq, v.seq)
		}
		if seq > snap {
			return fmt.Errorf("%w: key %s was written at seq %d, after the transaction's snapshot at %d",
				ErrConflict, base.HexKey(k), seq, snap)
		}
	}
	for _, r := range t.ranges {
		if seq, err := d.newestInRange(r.lo, r.hi); err != nil {
			return err
		} else if seq > snap {
			return fmt.Errorf("%w: range [%s, %s) was written at seq %d, after the transaction's snapshot at %d",
				ErrConflict, base.HexKey(r.lo), base.HexKey(r.hi), seq, snap)
		}
	}
	return nil
}

// newestInRange returns the largest seqnum of any version or range
// tombstone in [lo, hi) at the DB's current state: every version of every
// key in the range is visited.
func (d *DB) newestInRange(lo, hi []byte) (uint64, error) {
	it, err := d.newIter(&IterOptions{LowerBound: lo, UpperBound: hi}, readLatest, d.userReads)
	if err != nil {
		return 0, err
	}
	defer it.Close()
	m := it.tombs.MaxSeqIn(lo, hi)
	iter := it.iter
	var ok bool
	if lo != nil {
		ok = iter.SeekGE(lo)
	} else {
		ok = iter.First()
	}
	for ; ok; ok = iter.Next() {
		k := iter.Key()
		if hi != nil && it.cmp.Cmp(k.UserKey, hi) >= 0 {
			break
		}
		if s := k.SeqNum(); s <= it.snap {
			m = max(m, s)
		}
	}
	return m, iter.Error()
}
