package stress

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/vigildb/vigil"
)

// maybeEvent runs at most one due event (a reopen after a failed write, an
// in-process crash, a scheduled clean reopen, a bit flip), called by a
// worker between operations with no lock held. Events are counted in
// operations, not time, so a single-threaded run with a given seed crashes
// and flips at the same points every time.
func (r *runner) maybeEvent() {
	if !r.eventMu.TryLock() {
		return
	}
	defer r.eventMu.Unlock()
	if r.stopped() {
		return
	}
	n := r.stats.ops.Load()
	var div *Divergence
	switch {
	case r.needReopen.Load():
		div = r.reopen("a write failed, so its fate is settled by a verification")
	case r.plan.Crash == CrashInProcess && n >= r.nextCrash.Load():
		div = r.crash()
		r.schedule(&r.nextCrash, r.plan.CrashEvery)
	case n >= r.nextReopen.Load():
		div = r.reopen("scheduled")
		r.schedule(&r.nextReopen, r.plan.ReopenEvery)
	case r.plan.Corrupt && n >= r.nextFlip.Load():
		div = r.flip()
		r.schedule(&r.nextFlip, r.plan.FlipEvery)
	case r.log != nil && r.log.len() > maxEpochOps:
		div = r.reopen("the op log reached its bound")
	}
	if div != nil {
		r.fail(div)
	}
}

// reopen closes the DB cleanly, reopens it and verifies it.
func (r *runner) reopen(why string) *Divergence {
	r.gate.Lock()
	defer r.gate.Unlock()
	return r.reopenLocked(why)
}

func (r *runner) reopenLocked(why string) *Divergence {
	r.needReopen.Store(false)
	r.closing.Store(true)
	defer r.closing.Store(false)
	r.flips.settle(r.db)
	r.flips.addCorruptions(r.db.Metrics())
	var rec *opRec
	if r.log != nil {
		rec = &opRec{name: nameClose}
		if err := r.log.begin(rec, r.tick); err != nil {
			return r.machinery(err)
		}
	}
	cerr := r.db.Close()
	r.epoch++
	if rec != nil {
		if err := r.log.end(rec, cerr == nil, r.tick); err != nil {
			return r.machinery(err)
		}
	}
	r.stats.reopens.Add(1)
	r.setFaults(false)
	defer func() { r.setFaults(!r.stopped()) }()
	// A Close that returned nil promises everything acknowledged; one that
	// failed (an I/O fault, or a DB without WAL stopped by a background
	// error before it could flush) promises only what was durable.
	d := durability{cutoff: r.tick(), everything: cerr == nil, syncedWAL: !r.plan.DisableWAL, what: "clean close"}
	if cerr != nil {
		if !r.tolerate(cerr) {
			return &Divergence{Op: "close", Got: cerr.Error(), Detail: "Close failed with no fault or corruption to explain it"}
		}
		d.what = fmt.Sprintf("close that failed (%v)", cerr)
	}
	sawFaults := r.inj != nil && r.inj.injected.Load() > r.faultsAtOpen
	return r.reopenAndVerify(cerr != nil || sawFaults, cerr == nil, d, "reopened ("+why+")")
}

// reopenAndVerify opens the closed DB and verifies it against d — at the
// plan's share of reopen points after flipping a bit in one of its files
// (--corrupt-files, see files.go). lenient: a strict WAL recovery mode may
// refuse the WALs (after a crash, a failed close, or faults); clean: Close
// returned nil. done is logged on success.
func (r *runner) reopenAndVerify(lenient, clean bool, d durability, done string) *Divergence {
	var ff *fileFlip
	if r.files.due() {
		var err error
		ff, err = r.files.flip(r.fs, r.dbDir, clean, r.kc, r.vc, fmt.Sprintf("op %d, after %s", r.stats.ops.Load(), d.what))
		if err != nil {
			return r.machinery(err)
		}
		if ff != nil {
			r.verbosef("flipped %v", ff)
		}
	}
	db, res, err := openDB(r.dbDir, r.plan.options(r.fs), lenient, ff, r.strictRefusal)
	if err != nil {
		r.db = nil
		return r.files.openFailure("reopen after "+d.what, ff, res, err)
	}
	s, err := r.adopt(db)
	if err != nil {
		r.db = nil
		return r.machinery(err)
	}
	r.db = s
	r.verbosef("%s", done)
	var alts []durability
	var outs []fileOutcome
	if res.how == openFlipped {
		alts, outs = ff.alternatives(d, res.mode, db.Metrics())
	}
	which, div := r.verifyAlts(s, d, alts)
	if ff != nil {
		r.verbosef("file flip %s: %v", outcomeOf(res, outs, which, div), ff)
	}
	return r.files.judge(ff, res, outs, which, div)
}

// crash simulates power loss on the strict MemFS: from now on nothing
// becomes durable, the DB is closed under the workers' feet, the file
// system is reset to its synced state, and the DB is reopened and checked
// against the history with the crash checker.
func (r *runner) crash() *Divergence {
	r.closing.Store(true)
	defer r.closing.Store(false)
	cutoff := r.tick()
	r.mem.SetIgnoreSyncs(true)
	// r.db only changes under eventMu, which we hold.
	old := r.db
	r.flips.addCorruptions(old.Metrics())
	old.Close()

	r.gate.Lock()
	defer r.gate.Unlock()
	r.flips.settle(nil)
	r.epoch++
	r.stats.crashes.Add(1)
	r.mem.ResetToSyncedState()
	r.mem.SetIgnoreSyncs(false)
	r.setFaults(false)
	defer func() { r.setFaults(!r.stopped()) }()
	d := durability{cutoff: cutoff, syncedWAL: !r.plan.DisableWAL, what: "crash"}
	return r.reopenAndVerify(true, false, d, "crashed and recovered")
}

// machinery reports a failure of the runner itself (its op log could not
// be written): not the DB's fault, but the run cannot go on.
func (r *runner) machinery(err error) *Divergence {
	return &Divergence{Op: "stress runner failure (not a DB divergence)", Detail: err.Error()}
}

// verify reads the whole DB and checks it: against the crash checker when
// writes may be in doubt, else exactly against the oracle; then runs
// DB.Verify, and makes the state found the oracle's new truth.
func (r *runner) verify(db store, d durability) *Divergence {
	_, div := r.verifyAlts(db, d, nil)
	return div
}

// verifyAlts is verify with alternative rules for a state recovered from a
// flipped file: if the state breaks d, each of alts is tried in turn. It
// returns which rule explained the state (0: d; i: alts[i-1]).
func (r *runner) verifyAlts(db store, d durability, alts []durability) (int, *Divergence) {
	r.stats.verifications.Add(1)
	rec, div := readAll(db, r.kc, r.vc, r.eventRng, "verification after "+d.what)
	if div != nil {
		return 0, div
	}
	which := 0
	if r.log != nil {
		var ops []*opRec
		if d.live {
			ops = r.log.snapshot() // kept for the check after the close
		} else {
			ops = r.log.take()
		}
		st, w, err := solveWith(r.kc, r.base, rec, ops, d, alts)
		if err != nil {
			return 0, &Divergence{Op: "verification after " + d.what, Detail: err.Error()}
		}
		which = w
		r.stats.lostUnsynced.Add(int64(st.lostAcked))
		if d.live {
			if err := db.Verify(); err != nil {
				return 0, &Divergence{Op: "DB.Verify after " + d.what, Got: err.Error()}
			}
			return which, nil
		}
	} else {
		var v keyView
		for k := range rec {
			r.or.view(k, &v)
			if check(&v, &v, rec[k]) == verdictWrong {
				return 0, &Divergence{Op: "verification after " + d.what, Key: r.kc.keyName(k),
					Expected: expected(&v, &v), Got: rec[k].String()}
			}
		}
	}
	if err := db.Verify(); err != nil {
		return 0, &Divergence{Op: "DB.Verify after " + d.what, Got: err.Error()}
	}
	if r.log != nil {
		if err := r.log.verified(rec); err != nil {
			return 0, r.machinery(err)
		}
	}
	for k := range rec {
		r.or.resolve(k, rec[k])
	}
	r.base = rec
	// Writes that failed before this verification are settled now.
	r.needReopen.Store(false)
	return which, nil
}

// readAll reads every key of the DB three ways — a forward scan, a
// backward scan, and Gets (of every key, or of a sample of large key
// spaces) — checks that they agree and that every key and value is one
// the runner wrote, and returns each key's state.
func readAll(db store, kc keyCodec, vc valueCodec, rng *rand.Rand, what string) ([]kstate, *Divergence) {
	f := fullRead{db: db, kc: kc, vc: vc, what: what}
	rec := make([]kstate, kc.n)
	for i := range rec {
		rec[i] = kstate{del: true}
	}
	order, div := f.scanForward(rec)
	if div != nil {
		return nil, div
	}
	if div := f.scanBackward(rec, order); div != nil {
		return nil, div
	}
	if div := f.getAll(rec, getSample(kc.n, rng)); div != nil {
		return nil, div
	}
	return rec, nil
}

// fullRead holds what the steps of one readAll share: the DB, its codecs,
// and what the read verifies (the start of every divergence's Op).
type fullRead struct {
	db   store
	kc   keyCodec
	vc   valueCodec
	what string
}

// bad reports a divergence found by op.
func (f *fullRead) bad(op, key, got, detail string) *Divergence {
	return &Divergence{Op: f.what + ": " + op, Key: key, Got: got, Detail: detail}
}

// scanForward scans the whole DB forward, records each key's version in
// rec, and returns the keys found in order. Keys must be ours and strictly
// ascending, and each value a final one written under its key.
func (f *fullRead) scanForward(rec []kstate) ([]int, *Divergence) {
	kc := f.kc
	it, err := f.db.NewIter(nil)
	if err != nil {
		return nil, f.bad("NewIter", "", err.Error(), "")
	}
	var order []int
	prev := -1
	for ok := it.First(); ok; ok = it.Next() {
		k, err := kc.decode(it.Key())
		if err != nil {
			it.Close()
			return nil, f.bad("forward scan", fmt.Sprintf("%q", it.Key()), "a key the runner never wrote", err.Error())
		}
		if k <= prev {
			it.Close()
			return nil, f.bad("forward scan", kc.keyName(k), "keys out of order", fmt.Sprintf("%s came after %s", kc.keyName(k), kc.keyName(prev)))
		}
		dv, err := f.vc.decodeValue(it.Value())
		if err == nil && (dv.key != k || dv.transient) {
			err = valueMismatch(dv, k)
		}
		if err != nil {
			it.Close()
			return nil, f.bad("forward scan", kc.keyName(k), "a wrong value", err.Error())
		}
		rec[k] = kstate{ver: dv.version}
		order = append(order, k)
		prev = k
	}
	if err := it.Close(); err != nil {
		return nil, f.bad("forward scan", "", err.Error(), "the scan ended with an error")
	}
	return order, nil
}

// scanBackward scans the whole DB backward and checks that it returns
// exactly the forward scan's keys (order), in reverse, with the versions
// the forward scan recorded in rec.
func (f *fullRead) scanBackward(rec []kstate, order []int) *Divergence {
	kc := f.kc
	it, err := f.db.NewIter(nil)
	if err != nil {
		return f.bad("NewIter", "", err.Error(), "")
	}
	i := len(order) - 1
	for ok := it.Last(); ok; ok = it.Prev() {
		k, err := kc.decode(it.Key())
		if err != nil || i < 0 || order[i] != k {
			it.Close()
			want := "the end"
			if i >= 0 {
				want = kc.keyName(order[i])
			}
			return f.bad("backward scan", fmt.Sprintf("%q", it.Key()), "a key the forward scan did not return here",
				fmt.Sprintf("forward scan has %s at this position", want))
		}
		dv, err := f.vc.decodeValue(it.Value())
		if err != nil || dv.key != k || dv.transient || dv.version != rec[k].ver {
			it.Close()
			return f.bad("backward scan", kc.keyName(k), fmt.Sprintf("value %+v (err %v)", dv, err), fmt.Sprintf("forward scan read %v", rec[k]))
		}
		i--
	}
	if err := it.Close(); err != nil {
		return f.bad("backward scan", "", err.Error(), "the scan ended with an error")
	}
	if i != -1 {
		return f.bad("backward scan", kc.keyName(order[i]), "end of keys", "the backward scan stopped before this key, which the forward scan returned")
	}
	return nil
}

// getSample returns the keys readAll checks with Get: all n of them, or,
// above 4096 keys, 4096 drawn from rng (which may be nil for small key
// spaces).
func getSample(n int, rng *rand.Rand) []int {
	keys := make([]int, 0, min(n, 4096))
	if n <= 4096 {
		for k := 0; k < n; k++ {
			keys = append(keys, k)
		}
	} else {
		for j := 0; j < 4096; j++ {
			keys = append(keys, rng.IntN(n))
		}
	}
	return keys
}

// getAll reads each of keys with Get and checks that it finds what the
// scans recorded in rec: the same version, or nothing for a deleted key.
func (f *fullRead) getAll(rec []kstate, keys []int) *Divergence {
	kc := f.kc
	for _, k := range keys {
		v, err := f.db.Get(kc.key(k))
		got := kstate{del: true}
		if err != nil && !errors.Is(err, vigil.ErrNotFound) {
			return f.bad("Get", kc.keyName(k), err.Error(), "")
		}
		if err == nil {
			dv, err := f.vc.decodeValue(v)
			if err == nil && (dv.key != k || dv.transient) {
				err = valueMismatch(dv, k)
			}
			if err != nil {
				return f.bad("Get", kc.keyName(k), "a wrong value", err.Error())
			}
			got = kstate{ver: dv.version}
		}
		if !got.same(rec[k]) {
			return f.bad("Get", kc.keyName(k), got.String(), fmt.Sprintf("the scans read %v", rec[k]))
		}
	}
	return nil
}

// valueMismatch describes a well-formed value found under the wrong key or
// left over from inside a batch.
func valueMismatch(dv decodedValue, k int) error {
	if dv.transient {
		return fmt.Errorf("transient value (key %d version %d) that a later write of the same batch overwrote: a batch was applied out of order or in part", dv.key, dv.version)
	}
	return fmt.Errorf("the value of key %d (version %d) under key %d", dv.key, dv.version, k)
}
