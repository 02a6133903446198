package stress

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/vigildb/vigil"
)

// worker is one goroutine issuing random operations and checking every
// result against the oracle. Not safe for concurrent use (one goroutine).
type worker struct {
	r   *runner
	id  int
	rng *rand.Rand
	// edgeRng draws the empty and inverted range deletions (see
	// edgeRanges), apart from rng so that they leave the rest of a seed's
	// operations as they were; flipRng, likewise, the write batches
	// flipped before Apply (see batchFlipDue).
	edgeRng, flipRng *rand.Rand

	keyBuf, key2Buf, valBuf []byte
	pre, post               []keyView
	seen                    []kstate
	seenSet                 []bool
	// batch is the worker's write batch, made by batchDB's NewBatch (so
	// protected from each Put when the plan has batch protection).
	batch   *vigil.Batch
	batchDB *vigil.DB

	snaps     []heldSnapshot
	snapEpoch uint64
}

func newWorker(r *runner, id int) *worker {
	return &worker{r: r, id: id, rng: rand.New(rand.NewPCG(r.plan.Seed, uint64(id)+1)),
		edgeRng: rand.New(rand.NewPCG(r.plan.Seed, 0xed9e0000+uint64(id))),
		flipRng: rand.New(rand.NewPCG(r.plan.Seed, 0xf11b0000+uint64(id)))}
}

// batchFor returns the worker's batch, empty, made by db's NewBatch: a new
// one whenever the DB changed (a reopen), so that it carries the DB's
// protection from its first Put.
func (w *worker) batchFor(db store) *vigil.Batch {
	if d := db.DB(); d != w.batchDB || w.batch == nil {
		w.batch, w.batchDB = d.NewBatch(), d
	}
	w.batch.Reset()
	return w.batch
}

// heldSnapshot is a snapshot taken while its keys were locked, so their
// states at that moment are known: later reads through the snapshot must
// return exactly those, whatever was written, flushed or compacted since.
type heldSnapshot struct {
	s      snapshot
	lo, hi int
	views  []keyView
	// what names the reader in reports: "snapshot", or "checkpoint" for
	// a checkpoint opened read-only (checkpointOp).
	what string
}

func (w *worker) run() {
	r := w.r
	for !r.stopped() {
		if r.closing.Load() {
			// A crash is closing the DB: operations already under way race
			// with Close; new ones would only fail with ErrClosed.
			time.Sleep(100 * time.Microsecond)
			continue
		}
		r.gate.RLock()
		if r.db == nil || r.stopped() {
			// A failed reopen left no DB; the run is over.
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
		n := r.stats.ops.Add(1)
		if r.cfg.Ops > 0 && n >= r.cfg.Ops {
			r.stop()
		}
		r.maybeEvent()
	}
	r.gate.RLock()
	if r.db != nil {
		w.dropSnapshots()
	}
	r.gate.RUnlock()
}

func (w *worker) dropSnapshots() {
	for _, s := range w.snaps {
		// The snapshot may belong to a DB closed by a crash; Close then
		// fails, which is fine.
		_ = s.s.Close()
	}
	w.snaps = w.snaps[:0]
}

// step runs one random operation. The mix follows db_stress's defaults
// loosely: mostly reads and writes, some scans, a few of everything else;
// explicit flushes, compactions, ingestions and checkpoints at the plan's
// rates.
func (w *worker) step(db store) *Divergence {
	p := &w.r.plan
	if p.FlushOneIn > 0 && w.rng.IntN(p.FlushOneIn) == 0 {
		return w.flush(db)
	}
	if p.CompactOneIn > 0 && w.rng.IntN(p.CompactOneIn) == 0 {
		return w.compact(db)
	}
	if p.IngestOneIn > 0 && w.rng.IntN(p.IngestOneIn) == 0 {
		return w.ingestOp(db)
	}
	if p.CheckpointOneIn > 0 && w.rng.IntN(p.CheckpointOneIn) == 0 {
		return w.checkpointOp(db)
	}
	x := w.rng.IntN(1000)
	switch {
	case x < 300:
		return w.get(db)
	case x < 500:
		return w.put(db)
	case x < 560:
		return w.del(db)
	case x < 580:
		return w.delRange(db)
	case x < 660:
		return w.writeBatch(db)
	case x < 820:
		return w.scan(db)
	case x < 850:
		return w.snapshotOp(db)
	case x < 851:
		return w.verifyOp(db)
	default:
		return w.get(db)
	}
}

func (w *worker) randKey() int { return w.rng.IntN(w.r.plan.Keys) }

func (w *worker) writeOptions() *vigil.WriteOptions {
	if w.rng.IntN(100) < w.r.plan.SyncPct {
		return vigil.Sync
	}
	return vigil.NoSync
}

// wop is one write inside an operation: set or delete key a, or delete
// the keys [a, b).
type wop struct {
	kind byte // 's', 'd', 'r'
	a, b int
}

func (w *worker) put(db store) *Divergence {
	return w.write(db, namePut, []wop{{kind: 's', a: w.randKey()}})
}

func (w *worker) del(db store) *Divergence {
	return w.write(db, nameDelete, []wop{{kind: 'd', a: w.randKey()}})
}

// rangeOf returns a random range [a, b) of 1..16 keys.
func (w *worker) rangeOf() (int, int) {
	n := w.r.plan.Keys
	width := 1 + w.rng.IntN(min(16, n))
	a := w.rng.IntN(n - width + 1)
	return a, a + width
}

func (w *worker) delRange(db store) *Divergence {
	a, b := w.rangeOf()
	if w.edgeRng.IntN(invertedOneIn) == 0 {
		if div := w.invertedDeleteRange(db, a, b); div != nil {
			return div
		}
	}
	if w.edgeRng.IntN(emptyRangeOneIn) == 0 {
		// DeleteRange(k, k) deletes nothing: the oracle changes no key.
		b = a
		w.r.stats.emptyRanges.Add(1)
	}
	return w.write(db, nameDeleteRange, []wop{{kind: 'r', a: a, b: b}})
}

// Edge ranges. An empty range deletion, DeleteRange(k, k), deletes nothing
// and is not even recorded (RocksDB's rule): write() gives it no key, so
// the oracle expects no change, and a batch of nothing else applies as an
// empty batch. An inverted one, start > end, makes Apply (and
// DB.DeleteRange) fail with ErrInvalidArgument before anything reaches the
// WAL: the runner issues such writes in addition to the workload's, never
// logs them, and checks that nothing of them is ever seen.
const (
	// emptyRangeOneIn: a standalone range deletion is made empty, and a
	// batch gets one or two empty ranges, one time in emptyRangeOneIn.
	emptyRangeOneIn = 8
	// invertedOneIn: a range deletion or batch is preceded by an inverted
	// one, one time in invertedOneIn.
	invertedOneIn = 40
)

// invertedDeleteRange calls DB.DeleteRange(b, a) with a < b: it must fail
// with ErrInvalidArgument, and delete nothing.
func (w *worker) invertedDeleteRange(db store, a, b int) *Divergence {
	r := w.r
	err := db.DeleteRange(r.kc.key(b), r.kc.key(a), w.edgeWriteOptions())
	return w.invertedVerdict(fmt.Sprintf("inverted DeleteRange(%s, %s)", r.kc.keyName(b), r.kc.keyName(a)), err)
}

// edgeWriteOptions draws the write options of an edge-range write.
func (w *worker) edgeWriteOptions() *vigil.WriteOptions {
	if w.edgeRng.IntN(100) < w.r.plan.SyncPct {
		return vigil.Sync
	}
	return vigil.NoSync
}

// invertedVerdict judges the answer to a write with an inverted range.
func (w *worker) invertedVerdict(op string, err error) *Divergence {
	r := w.r
	switch {
	case errors.Is(err, vigil.ErrInvalidArgument):
		r.stats.invertedRanges.Add(1)
		return nil
	case err == nil:
		return &Divergence{Op: op, Expected: "ErrInvalidArgument (start > end)", Got: "success"}
	case r.tolerate(err):
		// Closed by a crash, read-only after a fault: refused either way.
		return nil
	}
	return &Divergence{Op: op, Expected: "ErrInvalidArgument (start > end)", Got: err.Error()}
}

// invertedBatch applies, before the workload's batch ops, a copy of it
// with an inverted range deletion somewhere and a Put of a key k with
// version 0, which no write ever takes (so a value of version 0 anywhere
// names this batch): Apply must fail with ErrInvalidArgument, and k, locked
// meanwhile so that its state cannot change, must read as before.
func (w *worker) invertedBatch(db store, ops []wop) *Divergence {
	r := w.r
	n := r.plan.Keys
	k := w.edgeRng.IntN(n)
	unlock := r.or.lock([]int{k})
	defer unlock()
	a := w.edgeRng.IntN(n)
	hi := min(n, a+1+w.edgeRng.IntN(8))
	at := w.edgeRng.IntN(len(ops) + 1)
	b := w.batchFor(db)
	for i := 0; i <= len(ops); i++ {
		if i == at {
			b.DeleteRange(r.kc.key(hi), r.kc.key(a))
		}
		if i == len(ops) {
			break
		}
		o := ops[i]
		w.keyBuf = r.kc.appendKey(w.keyBuf[:0], o.a)
		switch o.kind {
		case 's':
			w.valBuf = r.vc.appendValue(w.valBuf[:0], o.a, 0, false)
			b.Put(w.keyBuf, w.valBuf)
		case 'd':
			b.Delete(w.keyBuf)
		case 'r':
			w.key2Buf = r.kc.appendKey(w.key2Buf[:0], o.b)
			b.DeleteRange(w.keyBuf, w.key2Buf)
		}
	}
	w.keyBuf = r.kc.appendKey(w.keyBuf[:0], k)
	w.valBuf = r.vc.appendValue(w.valBuf[:0], k, 0, false)
	b.Put(w.keyBuf, w.valBuf)
	err := db.Apply(b, w.edgeWriteOptions())
	if div := w.invertedVerdict(fmt.Sprintf("batch of %d writes with an inverted DeleteRange(%s, %s)", len(ops)+2, r.kc.keyName(hi), r.kc.keyName(a)), err); div != nil || err == nil {
		return div
	}
	var pre keyView
	r.or.view(k, &pre)
	v, gerr := db.Get(r.kc.key(k))
	if gerr != nil && !errors.Is(gerr, vigil.ErrNotFound) {
		if r.tolerate(gerr) {
			return nil
		}
		return &Divergence{Op: "get after a refused batch", Key: r.kc.keyName(k), Expected: expected(&pre, &pre), Got: "error: " + gerr.Error()}
	}
	got, derr := w.observe(k, v, gerr)
	if derr != nil {
		return &Divergence{Op: "get after a refused batch", Key: r.kc.keyName(k), Expected: expected(&pre, &pre), Got: "a wrong value", Detail: derr.Error()}
	}
	return w.judge("get after a batch refused for its inverted range (its Put of version 0 must not be visible)", k, &pre, &pre, got)
}

// edgeRanges adds one or two empty range deletions to a batch's ops, at
// random places, one time in emptyRangeOneIn.
func (w *worker) edgeRanges(ops []wop) []wop {
	if w.edgeRng.IntN(emptyRangeOneIn) != 0 {
		return ops
	}
	for n := 1 + w.edgeRng.IntN(2); n > 0; n-- {
		k := w.edgeRng.IntN(w.r.plan.Keys + 1)
		at := w.edgeRng.IntN(len(ops) + 1)
		ops = append(ops[:at], append([]wop{{kind: 'r', a: k, b: k}}, ops[at:]...)...)
		w.r.stats.emptyRanges.Add(1)
	}
	return ops
}

func (w *worker) writeBatch(db store) *Divergence {
	n := 1 + w.rng.IntN(8)
	ops := make([]wop, 0, n)
	// Half the batches stay near one key, so that their writes overlap
	// (a set then a delete of the same key, a range over earlier sets).
	near := -1
	if w.rng.IntN(2) == 0 {
		near = w.randKey()
	}
	for i := 0; i < n; i++ {
		k := w.randKey()
		if near >= 0 {
			k = min(w.r.plan.Keys-1, near+w.rng.IntN(4))
		}
		switch x := w.rng.IntN(10); {
		case x < 6:
			ops = append(ops, wop{kind: 's', a: k})
		case x < 9:
			ops = append(ops, wop{kind: 'd', a: k})
		default:
			b := min(w.r.plan.Keys, k+1+w.rng.IntN(8))
			ops = append(ops, wop{kind: 'r', a: k, b: b})
		}
	}
	if w.edgeRng.IntN(invertedOneIn) == 0 {
		if div := w.invertedBatch(db, ops); div != nil {
			return div
		}
	}
	return w.write(db, nameBatch, w.edgeRanges(ops))
}

// write performs one write operation: lock the keys, give each key it
// leaves changed its next version, log the intent, call the DB, log the
// answer, commit (or leave pending on error).
func (w *worker) write(db store, name opName, ops []wop) *Divergence {
	r := w.r
	// The last write to each key decides its state; earlier sets of the
	// same key in a batch write transient values nobody may ever see.
	last := map[int]int{}
	var keys []int
	for i, o := range ops {
		switch o.kind {
		case 's', 'd':
			if _, ok := last[o.a]; !ok {
				keys = append(keys, o.a)
			}
			last[o.a] = i
		case 'r':
			for k := o.a; k < o.b; k++ {
				if _, ok := last[k]; !ok {
					keys = append(keys, k)
				}
				last[k] = i
			}
		}
	}
	unlock := r.or.lock(keys)
	defer unlock()
	rec := &opRec{name: name}
	rec.writes = make([]keyWrite, len(keys))
	vers := make(map[int]uint32, len(keys))
	for i, k := range keys {
		st := r.or.begin(k, ops[last[k]].kind != 's')
		rec.writes[i] = keyWrite{key: uint32(k), st: st}
		vers[k] = st.ver
	}
	wo := w.writeOptions()
	// A write of nothing (empty range deletions only) is not recorded at
	// all: Apply returns at once, as Pebble's does, without a WAL record or
	// an fsync, so its Sync makes nothing durable and it is no durability
	// barrier for the crash checker.
	rec.synced = wo.Sync && len(keys) > 0
	if r.log != nil {
		if err := r.log.begin(rec, r.tick); err != nil {
			return r.machinery(err)
		}
	}
	var err error
	switch name {
	case namePut:
		k := ops[0].a
		w.keyBuf = r.kc.appendKey(w.keyBuf[:0], k)
		w.valBuf = r.vc.appendValue(w.valBuf[:0], k, vers[k], false)
		err = db.Put(w.keyBuf, w.valBuf, wo)
	case nameDelete:
		w.keyBuf = r.kc.appendKey(w.keyBuf[:0], ops[0].a)
		err = db.Delete(w.keyBuf, wo)
	case nameDeleteRange:
		w.keyBuf = r.kc.appendKey(w.keyBuf[:0], ops[0].a)
		w.key2Buf = r.kc.appendKey(w.key2Buf[:0], ops[0].b)
		err = db.DeleteRange(w.keyBuf, w.key2Buf, wo)
	default:
		var bf *batchFlip
		if w.batchFlipDue() {
			bf = &batchFlip{}
		}
		b := w.buildBatch(db, ops, last, vers, keys, bf)
		err = db.Apply(b, wo)
		if bf != nil {
			if div, settled := w.settleBatchFlip(db, bf, rec, keys, err); settled {
				return div
			}
		}
	}
	if r.log != nil {
		if lerr := r.log.end(rec, err == nil, r.tick); lerr != nil {
			return r.machinery(lerr)
		}
	}
	r.stats.writes.Add(1)
	if err != nil {
		if !r.tolerate(err) {
			return &Divergence{Op: fmt.Sprintf("%v", rec), Got: err.Error(), Detail: "the write failed with no fault, crash or corruption to explain it"}
		}
		r.needReopen.Store(true)
		return nil
	}
	for _, kw := range rec.writes {
		r.or.commit(int(kw.key), kw.st)
		r.noteWritten(int(kw.key))
	}
	return nil
}

// buildBatch builds the batch of a write: ops, with the versions vers,
// earlier sets of a key (not its last write, last) writing transient
// values. With bf, one bit of it is flipped once it is built (flipBatch),
// and with fewer than 8 batch protection bytes a decoy goes first: a set of
// one of the batch's keys to a transient value, which a later write of the
// batch overrides, so that the flip (in the decoy's value) can do no harm
// if it escapes the check, as it may with probability 2^-8N.
func (w *worker) buildBatch(db store, ops []wop, last map[int]int, vers map[int]uint32, keys []int, bf *batchFlip) *vigil.Batch {
	r := w.r
	b := w.batchFor(db)
	if bf != nil && r.plan.BatchProtection < 8 {
		k := keys[w.flipRng.IntN(len(keys))]
		w.keyBuf = r.kc.appendKey(w.keyBuf[:0], k)
		w.valBuf = r.vc.appendValue(w.valBuf[:0], k, vers[k], true)
		b.Put(w.keyBuf, w.valBuf)
		bf.decoy = true
	}
	for i, o := range ops {
		w.keyBuf = r.kc.appendKey(w.keyBuf[:0], o.a)
		switch o.kind {
		case 's':
			w.valBuf = r.vc.appendValue(w.valBuf[:0], o.a, vers[o.a], last[o.a] != i)
			b.Put(w.keyBuf, w.valBuf)
		case 'd':
			b.Delete(w.keyBuf)
		case 'r':
			w.key2Buf = r.kc.appendKey(w.key2Buf[:0], o.b)
			b.DeleteRange(w.keyBuf, w.key2Buf)
		}
	}
	if bf != nil {
		w.flipBatch(b, bf)
	}
	return b
}

// observe decodes what a read returned for key k into a state, or explains
// why the value is not one the runner wrote for k.
func (w *worker) observe(k int, value []byte, err error) (kstate, error) {
	if errors.Is(err, vigil.ErrNotFound) {
		return kstate{del: true}, nil
	}
	dv, derr := w.r.vc.decodeValue(value)
	if derr == nil && (dv.key != k || dv.transient) {
		derr = valueMismatch(dv, k)
	}
	if derr != nil {
		return kstate{}, derr
	}
	return kstate{ver: dv.version}, nil
}

func (w *worker) get(db store) *Divergence {
	r := w.r
	r.stats.reads.Add(1)
	k := w.randKey()
	w.keyBuf = r.kc.appendKey(w.keyBuf[:0], k)
	var pre, post keyView
	r.or.view(k, &pre)
	v, err := db.Get(w.keyBuf)
	r.or.view(k, &post)
	if err != nil && !errors.Is(err, vigil.ErrNotFound) {
		if r.tolerate(err) {
			return nil
		}
		return &Divergence{Op: "get", Key: r.kc.keyName(k), Expected: expected(&pre, &post), Got: "error: " + err.Error()}
	}
	got, derr := w.observe(k, v, err)
	if derr != nil {
		r.flips.noteMissed()
		return &Divergence{Op: "get", Key: r.kc.keyName(k), Expected: expected(&pre, &post), Got: "a wrong value", Detail: derr.Error()}
	}
	return w.judge("get", k, &pre, &post, got)
}

// judge checks one observation and turns a wrong one into a divergence.
func (w *worker) judge(op string, k int, pre, post *keyView, got kstate) *Divergence {
	switch check(pre, post, got) {
	case verdictUnverifiable:
		w.r.stats.unverifiable.Add(1)
	case verdictWrong:
		w.r.flips.noteMissed()
		return &Divergence{Op: op, Key: w.r.kc.keyName(k), Expected: expected(pre, post), Got: got.String()}
	}
	return nil
}

func (w *worker) flush(db store) *Divergence {
	r := w.r
	r.stats.flushes.Add(1)
	rec := &opRec{name: nameFlush}
	if r.log != nil {
		if err := r.log.begin(rec, r.tick); err != nil {
			return r.machinery(err)
		}
	}
	err := db.Flush()
	if r.log != nil {
		if lerr := r.log.end(rec, err == nil, r.tick); lerr != nil {
			return r.machinery(lerr)
		}
	}
	if err != nil && !r.tolerate(err) {
		return &Divergence{Op: "flush", Got: err.Error()}
	}
	if err != nil {
		r.needReopen.Store(true)
	}
	return nil
}

func (w *worker) compact(db store) *Divergence {
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
	if err != nil {
		r.needReopen.Store(true)
	}
	return nil
}

func (w *worker) verifyOp(db store) *Divergence {
	if err := db.Verify(); err != nil && !w.r.tolerate(err) {
		return &Divergence{Op: "DB.Verify", Got: err.Error()}
	}
	return nil
}

// snapshotOp takes a snapshot of a small locked range, or checks and
// releases one taken earlier.
func (w *worker) snapshotOp(db store) *Divergence {
	r := w.r
	if len(w.snaps) > 0 && (len(w.snaps) >= 3 || w.rng.IntN(2) == 0) {
		i := w.rng.IntN(len(w.snaps))
		h := w.snaps[i]
		w.snaps = append(w.snaps[:i], w.snaps[i+1:]...)
		div := w.checkSnapshot(h)
		if err := h.s.Close(); err != nil && div == nil && !r.tolerate(err) {
			div = &Divergence{Op: "snapshot Close", Got: err.Error()}
		}
		return div
	}
	r.stats.snapshots.Add(1)
	lo, hi := w.rangeOf()
	keys := make([]int, 0, hi-lo)
	for k := lo; k < hi; k++ {
		keys = append(keys, k)
	}
	unlock := r.or.lock(keys)
	h := heldSnapshot{lo: lo, hi: hi, views: make([]keyView, hi-lo), what: "snapshot"}
	for k := lo; k < hi; k++ {
		r.or.view(k, &h.views[k-lo])
	}
	h.s = db.NewSnapshot()
	unlock()
	w.snaps = append(w.snaps, h)
	return nil
}

// checkSnapshot reads a held snapshot's range with Get and with an
// iterator in both directions: each key must be in the state it had when
// the snapshot was taken, and the three reads must agree.
func (w *worker) checkSnapshot(h heldSnapshot) *Divergence {
	r := w.r
	got := make([]kstate, h.hi-h.lo)
	for k := h.lo; k < h.hi; k++ {
		v, err := h.s.Get(r.kc.key(k))
		if err != nil && !errors.Is(err, vigil.ErrNotFound) {
			if r.tolerate(err) {
				return nil
			}
			return &Divergence{Op: h.what + " get", Key: r.kc.keyName(k), Got: "error: " + err.Error()}
		}
		st, derr := w.observe(k, v, err)
		if derr != nil {
			return &Divergence{Op: h.what + " get", Key: r.kc.keyName(k), Got: "a wrong value", Detail: derr.Error()}
		}
		if div := w.judge(h.what+" get", k, &h.views[k-h.lo], &h.views[k-h.lo], st); div != nil {
			return div
		}
		got[k-h.lo] = st
	}
	for _, forward := range []bool{true, false} {
		it, err := h.s.NewIter(&vigil.IterOptions{LowerBound: r.kc.key(h.lo), UpperBound: r.kc.key(h.hi)})
		if err != nil {
			if r.tolerate(err) {
				return nil
			}
			return &Divergence{Op: h.what + " NewIter", Got: err.Error()}
		}
		seen := make([]kstate, len(got))
		for i := range seen {
			seen[i] = kstate{del: true}
		}
		var ok bool
		if forward {
			ok = it.First()
		} else {
			ok = it.Last()
		}
		prev := -1
		for ; ok; ok = step(it, forward) {
			k, err := r.kc.decode(it.Key())
			if err != nil || k < h.lo || k >= h.hi || (prev >= 0 && (k > prev) != forward) || k == prev {
				it.Close()
				return &Divergence{Op: h.what + " scan " + dir(forward), Key: fmt.Sprintf("%q", it.Key()), Got: "a key out of place",
					Detail: fmt.Sprintf("range [%d, %d), previous key %d, err %v", h.lo, h.hi, prev, err)}
			}
			st, derr := w.observe(k, it.Value(), nil)
			if derr != nil {
				it.Close()
				return &Divergence{Op: h.what + " scan " + dir(forward), Key: r.kc.keyName(k), Got: "a wrong value", Detail: derr.Error()}
			}
			seen[k-h.lo] = st
			prev = k
		}
		if err := it.Close(); err != nil {
			if r.tolerate(err) {
				return nil
			}
			return &Divergence{Op: h.what + " scan " + dir(forward), Got: "error: " + err.Error()}
		}
		for i := range seen {
			if !seen[i].same(got[i]) {
				return &Divergence{Op: h.what + " scan " + dir(forward), Key: r.kc.keyName(h.lo + i),
					Expected: got[i].String() + " (as Get through the same snapshot read it)", Got: seen[i].String()}
			}
		}
	}
	return nil
}

func step(it iterator, forward bool) bool {
	if forward {
		return it.Next()
	}
	return it.Prev()
}
