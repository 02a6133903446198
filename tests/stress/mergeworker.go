package stress

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/vigildb/vigil"
)

// mergeWorker is one goroutine of a merges run, issuing random operations
// and checking every answer against the mergeOracle.
type mergeWorker struct {
	r         *mergeRun
	id        int
	rng       *rand.Rand
	pre, post []mergeView
	snaps     []mergeSnapshot
	snapEpoch uint64
}

// mergeSnapshot is a snapshot taken with its keys [lo, hi) locked: each
// key's state then (states[k-lo], with any write in doubt) is what every
// read through it must return.
type mergeSnapshot struct {
	s      snapshot
	lo, hi int
	states [][]mstate
}

func newMergeWorker(r *mergeRun, id int) *mergeWorker {
	return &mergeWorker{r: r, id: id, rng: rand.New(rand.NewPCG(r.p.Seed, 0x3e000000+uint64(id)))}
}

func (w *mergeWorker) run() {
	r := w.r
	for !r.stopped() {
		if r.closing.Load() {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		r.gate.RLock()
		if r.db == nil || r.stopped() {
			r.gate.RUnlock()
			break
		}
		if w.snapEpoch != r.epoch {
			w.dropSnapshots()
			w.snapEpoch = r.epoch
		}
		div := w.step(r.db)
		r.gate.RUnlock()
		if div != nil {
			div.Op = fmt.Sprintf("%s (worker %d)", div.Op, w.id)
			r.fail(div)
			return
		}
		if n := r.stats.ops.Add(1); r.cfg.Ops > 0 && n >= r.cfg.Ops {
			r.stopFlag.Store(true)
		}
		r.maybeEvent()
	}
	r.gate.RLock()
	w.dropSnapshots()
	r.gate.RUnlock()
}

func (w *mergeWorker) dropSnapshots() {
	for _, s := range w.snaps {
		_ = s.s.Close() // may belong to a DB a crash closed
	}
	w.snaps = w.snaps[:0]
}

// step runs one random operation: mostly merges and reads.
func (w *mergeWorker) step(db mergeStore) *Divergence {
	p := &w.r.p
	if w.rng.IntN(p.FlushOneIn) == 0 {
		return w.flush(db)
	}
	if w.rng.IntN(p.CompactOneIn) == 0 {
		return w.compact(db)
	}
	switch x := w.rng.IntN(1000); {
	case x < 230:
		return w.get(db)
	case x < 440:
		return w.single(db)
	case x < 450:
		a, b := w.rangeOf()
		return w.write(db, nameDeleteRange, []mop{{kind: 'r', a: a, b: b}})
	case x < 570:
		return w.batch(db)
	case x < 800:
		return w.scan(db)
	case x < 850:
		return w.snapshotOp(db)
	case x < 870:
		return w.txnOp(db)
	default:
		return w.get(db)
	}
}

// largeBatchOneIn: one batch in largeBatchOneIn is a large one.
const largeBatchOneIn = 100

func (w *mergeWorker) randKey() int { return w.rng.IntN(w.r.p.Keys) }

// rangeOf returns a random range [a, b) of 1..16 keys.
func (w *mergeWorker) rangeOf() (int, int) {
	n := w.r.p.Keys
	width := 1 + w.rng.IntN(min(16, n))
	a := w.rng.IntN(n - width + 1)
	return a, a + width
}

// opKind draws a single-key operation: a merge (the plan's share), else
// a set or (one time in four) a delete.
func (w *mergeWorker) opKind() byte {
	switch {
	case w.rng.IntN(100) < w.r.p.MergePct:
		return 'm'
	case w.rng.IntN(4) == 0:
		return 'd'
	}
	return 's'
}

func (w *mergeWorker) single(db mergeStore) *Divergence {
	o := mop{kind: w.opKind(), a: w.randKey()}
	name := map[byte]opName{'m': nameMerge, 's': namePut, 'd': nameDelete}[o.kind]
	return w.write(db, name, []mop{o})
}

// batch writes 1..10 operations, half of the batches around one key so
// that they write keys several times (merges on merges, a merge after a
// set or a delete, a range deletion over earlier operands). One batch in
// largeBatchOneIn is large: over half the write buffer, so the DB applies
// it as a flushable batch, with merges for at most half its operations
// (so that its merge chains stay short).
func (w *mergeWorker) batch(db mergeStore) *Divergence {
	n := 1 + w.rng.IntN(10)
	near := -1
	if w.rng.IntN(2) == 0 {
		near = w.randKey()
	}
	large := w.rng.IntN(largeBatchOneIn) == 0
	if large {
		// A memtable entry takes over 120 bytes of arena (see
		// memtable.EntrySize): this is over half the buffer.
		n, near = w.r.p.WriteBuffer/2/120+16, -1
		w.r.stats.largeBatches.Add(1)
	}
	ops := make([]mop, 0, n)
	for range n {
		k := w.randKey()
		if near >= 0 {
			k = min(w.r.p.Keys-1, near+w.rng.IntN(3))
		}
		if w.rng.IntN(15) == 0 {
			ops = append(ops, mop{kind: 'r', a: k, b: min(w.r.p.Keys, k+1+w.rng.IntN(4))})
			continue
		}
		kind := w.opKind()
		if large && kind == 'm' && w.rng.IntN(2) == 0 {
			kind = 's'
		}
		ops = append(ops, mop{kind: kind, a: k})
	}
	return w.write(db, nameBatch, ops)
}

// write performs one write: lock its keys, compute the state it leaves
// each key in (its operations on the key, in order, on the key's current
// state) under the key's next version, mark those pending, log, call the
// DB, log the answer and commit. An error is allowed only while a crash
// closes the DB: the write then stays pending, in doubt, until the crash
// check; no write of its keys follows it (a write whose locks come free
// during a crash is not issued), so a key's writes in doubt are the last
// of its history.
func (w *mergeWorker) write(db mergeStore, name opName, ops []mop) *Divergence {
	r := w.r
	keys, touch := writeKeys(ops)
	unlock := r.or.lock(keys)
	defer unlock()
	if r.closing.Load() {
		return nil
	}
	rec := &opRec{name: name, synced: w.rng.IntN(100) < r.p.SyncPct}
	wp := planWrite(r.or, r.mc, ops, keys, touch)
	rec.writes = wp.writes
	if err := r.log.begin(rec, r.tick); err != nil {
		return r.machinery(err)
	}
	var err error
	var div *Divergence
	if name == nameTxn {
		div, err = w.callTxn(db, ops, keys, wp, rec.synced)
	} else {
		err = w.call(db, name, ops, wp.vers, rec.synced)
	}
	if lerr := r.log.end(rec, err == nil && div == nil, r.tick); lerr != nil {
		return r.machinery(lerr)
	}
	if div != nil {
		return div
	}
	r.stats.writes.Add(1)
	if err != nil {
		if r.tolerate(err) {
			return nil
		}
		return &Divergence{Op: rec.String(), Got: err.Error(), Detail: "the write failed with no crash to explain it"}
	}
	for i, k := range keys {
		r.or.commit(k, wp.after[i])
	}
	return nil
}

// writeKeys returns the keys ops write, in the order they first appear,
// and for each key the indexes of the operations that write it, in order.
func writeKeys(ops []mop) ([]int, map[int][]int) {
	var keys []int
	touch := map[int][]int{}
	for i, o := range ops {
		b := o.a + 1
		if o.kind == 'r' {
			b = o.b
		}
		for k := o.a; k < b; k++ {
			if _, ok := touch[k]; !ok {
				keys = append(keys, k)
			}
			touch[k] = append(touch[k], i)
		}
	}
	return keys, touch
}

// writePlan is what a write of the merges mode does to its keys: its
// effect for the op log, each key's version, and each key's state before
// and after it (indexed like keys).
type writePlan struct {
	writes        []keyWrite
	vers          map[int]uint32
	before, after []mstate
}

// planWrite gives each of keys (locked by the caller) its next version
// and computes the state the write of ops leaves it in: the key's
// operations (touch[k]), in order, on its current state. It marks the
// write pending in or.
func planWrite(or *mergeOracle, mc mergeCodec, ops []mop, keys []int, touch map[int][]int) writePlan {
	wp := writePlan{writes: make([]keyWrite, 0, len(keys)), vers: make(map[int]uint32, len(keys)),
		before: make([]mstate, len(keys)), after: make([]mstate, len(keys))}
	for i, k := range keys {
		cur, ver := or.current(k)
		st := cur
		merged := true // the new state depends on the old one
		for _, j := range touch[k] {
			st = mc.apply(st, ops[j], k, ver, j)
			merged = merged && ops[j].kind == 'm'
		}
		st.st = kstate{ver: ver, del: st.val == nil}
		or.pend(k, st)
		wp.writes = append(wp.writes, keyWrite{key: uint32(k), st: st.st, merged: merged})
		wp.vers[k], wp.before[i], wp.after[i] = ver, cur, st
	}
	return wp
}

// call issues a write's DB call.
func (w *mergeWorker) call(db mergeStore, name opName, ops []mop, vers map[int]uint32, synced bool) error {
	r := w.r
	wo := vigil.NoSync
	if synced {
		wo = vigil.Sync
	}
	o := ops[0]
	switch name {
	case namePut:
		return db.Put(r.kc.key(o.a), r.mc.operand(o.a, vers[o.a], 0, true), wo)
	case nameMerge:
		r.stats.operands.Add(1)
		return db.Merge(r.kc.key(o.a), r.mc.operand(o.a, vers[o.a], 0, false), wo)
	case nameDelete:
		return db.Delete(r.kc.key(o.a), wo)
	case nameDeleteRange:
		return db.DeleteRange(r.kc.key(o.a), r.kc.key(o.b), wo)
	}
	b := db.DB().NewBatch()
	for i, o := range ops {
		switch o.kind {
		case 's':
			b.Put(r.kc.key(o.a), r.mc.operand(o.a, vers[o.a], i, true))
		case 'm':
			r.stats.operands.Add(1)
			b.Merge(r.kc.key(o.a), r.mc.operand(o.a, vers[o.a], i, false))
		case 'd':
			b.Delete(r.kc.key(o.a))
		case 'r':
			b.DeleteRange(r.kc.key(o.a), r.kc.key(o.b))
		}
	}
	return db.Apply(b, wo)
}

// judge checks that a read of key k returned (val, present) a state of
// cands, and notes its merge chain.
func (w *mergeWorker) judge(op string, k int, cands []mstate, val []byte, present bool) *Divergence {
	r := w.r
	i := matchState(cands, val, present)
	if i < 0 {
		return &Divergence{Op: op, Key: r.kc.keyName(k), Expected: r.mc.describeStates(k, cands), Got: r.mc.describe(k, val, present)}
	}
	r.noteChain(cands[i].chain)
	return nil
}

func (w *mergeWorker) get(db mergeStore) *Divergence {
	r := w.r
	r.stats.reads.Add(1)
	k := w.randKey()
	var pre, post mergeView
	r.or.view(k, &pre)
	v, err := db.Get(r.kc.key(k))
	r.or.view(k, &post)
	if err != nil && !errors.Is(err, vigil.ErrNotFound) {
		if r.tolerate(err) {
			return nil
		}
		return &Divergence{Op: "get", Key: r.kc.keyName(k), Expected: r.mc.describeStates(k, candidates(&pre, &post)), Got: "error: " + err.Error()}
	}
	return w.judge("get", k, candidates(&pre, &post), v, err == nil)
}

func (w *mergeWorker) flush(db mergeStore) *Divergence {
	r := w.r
	r.stats.flushes.Add(1)
	rec := &opRec{name: nameFlush}
	if err := r.log.begin(rec, r.tick); err != nil {
		return r.machinery(err)
	}
	err := db.Flush()
	if lerr := r.log.end(rec, err == nil, r.tick); lerr != nil {
		return r.machinery(lerr)
	}
	if err != nil && !r.tolerate(err) {
		return &Divergence{Op: "flush", Got: err.Error()}
	}
	return nil
}

func (w *mergeWorker) compact(db mergeStore) *Divergence {
	r := w.r
	r.stats.compactions.Add(1)
	var err error
	if w.rng.IntN(3) == 0 {
		err = db.Compact(nil, nil)
	} else {
		a, b := w.rangeOf()
		err = db.Compact(r.kc.key(a), r.kc.key(b))
	}
	if err != nil && !r.tolerate(err) {
		return &Divergence{Op: "compact", Got: err.Error()}
	}
	return nil
}
