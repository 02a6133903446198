package stress

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vigildb/vigil"
)

// The merges mode's events (crash, clean reopen, final verification) and
// its crash check.

// mergeTestFaults maps a test fault name to a wrapper that makes a merge
// store misbehave; filled by the package's tests only.
var mergeTestFaults = map[string]func(mergeStore) mergeStore{}

// maybeEvent runs at most one due event, called by a worker between
// operations with no lock held. Events are counted in operations.
func (r *mergeRun) maybeEvent() {
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
	case r.p.Crash == CrashInProcess && n >= r.nextCrash.Load():
		div = r.crash()
		r.schedule(&r.nextCrash, r.p.CrashEvery)
	case n >= r.nextReopen.Load():
		div = r.reopen("scheduled")
		r.schedule(&r.nextReopen, r.p.ReopenEvery)
	case r.log.len() > maxEpochOps:
		div = r.reopen("the op log reached its bound")
	}
	if div != nil {
		r.fail(div)
	}
}

// crash simulates power loss on the strict MemFS: nothing becomes durable
// any more, the DB is closed under the workers, the file system goes back
// to its synced state, and the reopened DB is checked.
func (r *mergeRun) crash() *Divergence {
	r.closing.Store(true)
	defer r.closing.Store(false)
	cutoff := r.tick()
	r.mem.SetIgnoreSyncs(true)
	r.db.Close() // r.db only changes under eventMu, which we hold
	r.gate.Lock()
	defer r.gate.Unlock()
	r.epoch++
	r.stats.crashes.Add(1)
	r.mem.ResetToSyncedState()
	r.mem.SetIgnoreSyncs(false)
	return r.reopenAndVerify(true, durability{cutoff: cutoff, syncedWAL: !r.p.DisableWAL, what: "crash"})
}

// reopen closes the DB cleanly, reopens it and verifies it.
func (r *mergeRun) reopen(why string) *Divergence {
	r.gate.Lock()
	defer r.gate.Unlock()
	return r.reopenLocked(why)
}

func (r *mergeRun) reopenLocked(why string) *Divergence {
	r.closing.Store(true)
	defer r.closing.Store(false)
	rec := &opRec{name: nameClose}
	if err := r.log.begin(rec, r.tick); err != nil {
		return r.machinery(err)
	}
	cerr := r.db.Close()
	r.epoch++
	if err := r.log.end(rec, cerr == nil, r.tick); err != nil {
		return r.machinery(err)
	}
	r.stats.reopens.Add(1)
	if cerr != nil {
		return &Divergence{Op: "close (" + why + ")", Got: cerr.Error(), Detail: "Close failed with no fault to explain it"}
	}
	return r.reopenAndVerify(false, durability{cutoff: r.tick(), everything: true, syncedWAL: !r.p.DisableWAL, what: "clean close (" + why + ")"})
}

func (r *mergeRun) machinery(err error) *Divergence {
	return &Divergence{Op: "stress runner failure (not a DB divergence)", Detail: err.Error()}
}

// reopenAndVerify opens the closed DB and verifies it against d.
func (r *mergeRun) reopenAndVerify(afterCrash bool, d durability) *Divergence {
	if err := r.open(afterCrash); err != nil {
		r.db = nil
		return &Divergence{Op: "reopen after " + d.what, Got: err.Error(), Detail: "the DB did not open again"}
	}
	return r.verify(r.db, d)
}

// finish verifies the live DB (every acknowledged write visible), then
// closes it cleanly, reopens and verifies again.
func (r *mergeRun) finish() {
	r.gate.Lock()
	defer r.gate.Unlock()
	d := durability{cutoff: r.tick(), everything: true, syncedWAL: !r.p.DisableWAL, what: "the end of the run (live DB)", live: true}
	if div := r.verify(r.db, d); div != nil {
		r.fail(div)
		return
	}
	if div := r.reopenLocked("final clean close"); div != nil {
		r.fail(div)
	}
}

// verify reads the whole DB, checks it against the epoch's history with
// checkRecovered and runs DB.Verify; unless d.live, the state found
// becomes the oracle's new truth and the next epoch's base.
func (r *mergeRun) verify(db mergeStore, d durability) *Divergence {
	r.stats.verifications.Add(1)
	vals, div := readAllMerged(db, r.kc, getSample(r.kc.n, r.eventRng), "verification after "+d.what)
	if div != nil {
		return div
	}
	var ops []*opRec
	if d.live {
		ops = r.log.snapshot() // kept for the check after the close
	} else {
		ops = r.log.take()
	}
	rec, found, st, div := checkRecovered(r.kc, r.mc, r.or, r.base, vals, ops, d)
	if div != nil {
		return div
	}
	r.stats.lostUnsynced.Add(int64(st.lostAcked))
	if err := db.Verify(); err != nil {
		return &Divergence{Op: "DB.Verify after " + d.what, Got: err.Error()}
	}
	if d.live {
		return nil
	}
	for k := range found {
		r.or.resolve(k, found[k])
	}
	r.base = rec
	return nil
}

// checkRecovered checks vals, every key's value read from the DB after
// the event d (nil: absent), against the epoch's history: each must be a
// state of its key's history since the last verification (a prefix of
// its writes: the oracle's states), and the writes these states add up to
// must be a valid crash prefix across keys (solveCrash: no hole in the
// commit order, batches whole, every durable write there). It returns the
// recovered kstates and states.
func checkRecovered(kc keyCodec, mc mergeCodec, or *mergeOracle, base []kstate, vals [][]byte, ops []*opRec, d durability) ([]kstate, []mstate, solveStats, *Divergence) {
	rec := make([]kstate, len(vals))
	found := make([]mstate, len(vals))
	for k, v := range vals {
		states := or.states(k)
		i := matchState(states, v, v != nil)
		if i < 0 {
			return nil, nil, solveStats{}, &Divergence{Op: "verification after " + d.what, Key: kc.keyName(k),
				Expected: mc.describeStates(k, states), Got: mc.describe(k, v, v != nil),
				Detail: "the value is not what any prefix of the key's writes since the last verification leaves"}
		}
		rec[k], found[k] = states[i].st, states[i]
	}
	st, err := solveCrash(kc, base, rec, ops, d)
	if err != nil {
		return nil, nil, st, &Divergence{Op: "verification after " + d.what, Detail: err.Error()}
	}
	return rec, found, st, nil
}

// readAllMerged reads every key three ways — a forward scan, a backward
// scan, and a Get of each of keys (all of them, or a sample of a large key
// space: getSample) — checks that they agree, and returns each key's value
// (nil: absent).
func readAllMerged(db mergeStore, kc keyCodec, keys []int, what string) ([][]byte, *Divergence) {
	bad := func(op, key, got, detail string) *Divergence {
		return &Divergence{Op: what + ": " + op, Key: key, Got: got, Detail: detail}
	}
	vals := make([][]byte, kc.n)
	for _, forward := range []bool{true, false} {
		seen := make([]bool, kc.n)
		it, err := db.NewIter(nil)
		if err != nil {
			return nil, bad("NewIter", "", err.Error(), "")
		}
		prev := -1
		for ok := first(it, forward); ok; ok = step(it, forward) {
			k, err := kc.decode(it.Key())
			if err != nil || (prev >= 0 && (k > prev) != forward) || k == prev {
				it.Close()
				return nil, bad(dir(forward)+" scan", fmt.Sprintf("%q", it.Key()), "a key out of place", fmt.Sprintf("previous key %d, err %v", prev, err))
			}
			seen[k], prev = true, k
			if forward {
				vals[k] = append([]byte{}, it.Value()...)
			} else if vals[k] == nil || !bytes.Equal(vals[k], it.Value()) {
				it.Close()
				return nil, bad("backward scan", kc.keyName(k), fmt.Sprintf("%x", it.Value()), fmt.Sprintf("the forward scan read %x", vals[k]))
			}
		}
		if err := it.Close(); err != nil {
			return nil, bad(dir(forward)+" scan", "", err.Error(), "the scan ended with an error")
		}
		for k := range seen {
			if !seen[k] && vals[k] != nil {
				return nil, bad("backward scan", kc.keyName(k), "absent", fmt.Sprintf("the forward scan read %x", vals[k]))
			}
		}
	}
	for _, k := range keys {
		v, err := db.Get(kc.key(k))
		switch {
		case errors.Is(err, vigil.ErrNotFound) && vals[k] == nil:
		case err != nil && !errors.Is(err, vigil.ErrNotFound):
			return nil, bad("Get", kc.keyName(k), "error: "+err.Error(), "")
		case (err == nil) != (vals[k] != nil) || !bytes.Equal(v, vals[k]):
			return nil, bad("Get", kc.keyName(k), fmt.Sprintf("%x (err %v)", v, err), fmt.Sprintf("the scans read %x", vals[k]))
		}
	}
	return vals, nil
}

func first(it iterator, forward bool) bool {
	if forward {
		return it.First()
	}
	return it.Last()
}
