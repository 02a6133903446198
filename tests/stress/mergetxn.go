package stress

import (
	"errors"
	"fmt"

	"github.com/vigildb/vigil"
)

// Transactions of the merges mode: a Txn buffers its writes in an indexed
// batch and reads them back through it, combining its own operands with
// its older entries or with the value of its snapshot.

// txnOp writes 1..6 operations on a range [lo, hi) of 1..4 keys in an
// optimistic transaction, and a merge of each key of the range no other
// operation writes: every key of the range is written, so locked, and its
// state at the transaction's snapshot is known exactly.
func (w *mergeWorker) txnOp(db mergeStore) *Divergence {
	n := w.r.p.Keys
	width := 1 + w.rng.IntN(min(4, n))
	lo := w.rng.IntN(n - width + 1)
	hi := lo + width
	var ops []mop
	written := make([]bool, width)
	for range 1 + w.rng.IntN(6) {
		if w.rng.IntN(10) == 0 {
			a := lo + w.rng.IntN(width)
			b := a + 1 + w.rng.IntN(hi-a)
			ops = append(ops, mop{kind: 'r', a: a, b: b})
			for k := a; k < b; k++ {
				written[k-lo] = true
			}
			continue
		}
		k := lo + w.rng.IntN(width)
		ops = append(ops, mop{kind: w.opKind(), a: k})
		written[k-lo] = true
	}
	for k := lo; k < hi; k++ {
		if !written[k-lo] {
			ops = append(ops, mop{kind: 'm', a: k})
		}
	}
	w.r.stats.txns.Add(1)
	return w.write(db, nameTxn, ops)
}

// callTxn writes ops in a transaction: after each operation Txn.Get must
// return the state the operations so far leave the key in, and before the
// commit an iterator over the keys written, walked both ways, the final
// states. The divergence is for a wrong read, the error for the commit.
func (w *mergeWorker) callTxn(db mergeStore, ops []mop, keys []int, wp writePlan, synced bool) (*Divergence, error) {
	r := w.r
	state := make(map[int]mstate, len(keys))
	for i, k := range keys {
		state[k] = wp.before[i]
	}
	tx := db.DB().NewTxn()
	defer tx.Discard()
	lo, hi := keys[0], keys[0]+1
	for i, o := range ops {
		var err error
		b := o.a + 1
		switch o.kind {
		case 's':
			err = tx.Put(r.kc.key(o.a), r.mc.operand(o.a, wp.vers[o.a], i, true))
		case 'm':
			r.stats.operands.Add(1)
			err = tx.Merge(r.kc.key(o.a), r.mc.operand(o.a, wp.vers[o.a], i, false))
		case 'd':
			err = tx.Delete(r.kc.key(o.a))
		case 'r':
			b = o.b
			err = tx.DeleteRange(r.kc.key(o.a), r.kc.key(o.b))
		}
		if err != nil {
			return nil, err
		}
		for k := o.a; k < b; k++ {
			state[k] = r.mc.apply(state[k], o, k, wp.vers[k], i)
			lo, hi = min(lo, k), max(hi, k+1)
		}
		if div, err := w.txnGet(tx, o.a+w.rng.IntN(b-o.a), state); div != nil || err != nil {
			return div, err
		}
	}
	final := func(k int) []mstate { return []mstate{state[k]} }
	for _, forward := range []bool{true, false} {
		it, err := tx.NewIter(&vigil.IterOptions{LowerBound: r.kc.key(lo), UpperBound: r.kc.key(hi)})
		if err != nil {
			return nil, err
		}
		s := newMergeWalk(w, it, "transaction scan", lo, hi, true, final)
		div := s.walk(true, forward, 0, 0)
		if cerr := it.Close(); div == nil && cerr != nil && !s.errSeen {
			return nil, cerr
		}
		if div != nil {
			return div, nil
		}
	}
	err := tx.Commit(&vigil.WriteOptions{Sync: synced})
	if errors.Is(err, vigil.ErrConflict) && !r.closing.Load() {
		return &Divergence{Op: "transaction commit", Got: err.Error(), Detail: fmt.Sprintf("a conflict on keys [%d, %d), which no other writer could write (they were locked)", lo, hi)}, nil
	}
	return nil, err
}

// txnGet reads key k through the transaction: its state must be state[k].
func (w *mergeWorker) txnGet(tx *vigil.Txn, k int, state map[int]mstate) (*Divergence, error) {
	v, err := tx.Get(w.r.kc.key(k))
	if err != nil && !errors.Is(err, vigil.ErrNotFound) {
		return nil, err
	}
	return w.judge("transaction get", k, []mstate{state[k]}, v, err == nil), nil
}
