package stress

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigildb/vigil"
)

// runMerges runs the merges mode for d (half with -short) and returns the
// result and its output.
func runMerges(t *testing.T, cfg MergeConfig, d time.Duration) (*MergeResult, string) {
	t.Helper()
	if testing.Short() {
		d /= 2
	}
	if cfg.Duration == 0 && cfg.Ops == 0 {
		cfg.Duration = d
	}
	var out strings.Builder
	cfg.Out = &out
	res, err := RunMerges(context.Background(), cfg)
	if err != nil {
		t.Fatalf("RunMerges: %v\n%s", err, out.String())
	}
	return res, out.String()
}

// TestMergesMode: the merges mode finds nothing wrong with a healthy DB,
// with each operator, with in-process crashes and without, while doing
// what it promises (merges, long chains, scans, snapshots, flushes,
// compactions, crashes).
func TestMergesMode(t *testing.T) {
	for _, c := range []struct {
		op    MergeOperator
		crash CrashMode
		seed  uint64
	}{{MergeCounter, CrashInProcess, 1}, {MergeAppend, CrashInProcess, 2}, {MergeAppend, CrashNone, 3}} {
		cfg := MergeConfig{Seed: c.seed, Threads: 4, Crash: c.crash, Operator: c.op, planHook: func(p *mergePlan) {
			p.Keys, p.CrashEvery, p.FlushOneIn, p.CompactOneIn = 32, 500, 100, 200
		}}
		res, out := runMerges(t, cfg, time.Second)
		if res.Failure != nil || !strings.Contains(out, "PASS") {
			t.Fatalf("%s %s: healthy DB reported a divergence:\n%s", c.op, c.crash, out)
		}
		if res.MergeOperands == 0 || res.LongestChain < 2 || res.Scans == 0 || res.Snapshots == 0 || res.Flushes == 0 || res.Compactions == 0 ||
			res.Verifications < 2 || (c.crash == CrashInProcess) != (res.Crashes > 0) || res.Operator != c.op {
			t.Fatalf("%s %s: the run did not do what it promises: %+v\n%s", c.op, c.crash, res, out)
		}
		if !strings.HasPrefix(out, "vigil stress --merges: seed=") || !strings.Contains(out, "operator="+string(c.op)) {
			t.Fatalf("plan not printed first:\n%s", out)
		}
	}
}

// TestMergesReproducible: a single-threaded run with a seed and an
// operation count replays the same operations, crashes included.
func TestMergesReproducible(t *testing.T) {
	var results []MergeResult
	for range 2 {
		res, out := runMerges(t, MergeConfig{Seed: 9, Threads: 1, Ops: 3000, Crash: CrashInProcess, planHook: func(p *mergePlan) {
			p.Keys, p.CrashEvery = 16, 700
		}}, 0)
		if res.Failure != nil {
			t.Fatalf("divergence:\n%s", out)
		}
		res.Elapsed, res.Plan = 0, ""
		results = append(results, *res)
	}
	if results[0] != results[1] || results[0].Crashes == 0 {
		t.Fatalf("two runs of one plan differ (or did not crash):\n%+v\n%+v", results[0], results[1])
	}
}

// TestMergeCodecModelsVigil: the runner's model of each operator folds
// operands as vigil's Merger does, and is associative.
func TestMergeCodecModelsVigil(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, op := range []MergeOperator{MergeCounter, MergeAppend} {
		mc, m := mergeCodec{counter: op == MergeCounter, filler: 20}, op.merger()
		var model, real []byte
		for i := range 500 {
			switch x := rng.IntN(10); {
			case x == 0:
				model, real = nil, nil
			case x < 3:
				v := mc.operand(3, uint32(i+1), 0, true)
				model, real = v, v
			default:
				o := mc.operand(3, uint32(i+1), rng.IntN(4), false)
				model = mc.merge(model, o)
				var err error
				if real, err = m.Merge([]byte("k"), real, o); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(model, real) || (model == nil) != (real == nil) {
				t.Fatalf("%s: step %d: model %x, vigil %x", op, i, model, real)
			}
		}
		a, b, c := mc.operand(1, 1, 0, true), mc.operand(1, 2, 0, false), mc.operand(1, 3, 0, false)
		if !bytes.Equal(mc.merge(mc.merge(a, b), c), mc.merge(a, mc.merge(b, c))) {
			t.Fatalf("%s: the model is not associative", op)
		}
	}
}

// mhist builds a merges history by hand: writes through the oracle and
// the op log, in real-time order (each issued after the previous one
// returned).
type mhist struct {
	mc   mergeCodec
	or   *mergeOracle
	ops  []*opRec
	tick uint64
}

func newMHist(counter bool, keys int) *mhist {
	return &mhist{mc: mergeCodec{counter: counter, filler: 6}, or: newMergeOracle(keys)}
}

// write records a write of ops that ends with status (acknowledged,
// failed, or still pending) and returns the state it leaves each key in.
func (h *mhist) write(status opStatus, synced bool, ops ...mop) map[int]mstate {
	keys, touch := writeKeys(ops)
	wp := planWrite(h.or, h.mc, ops, keys, touch)
	h.tick++
	o := &opRec{id: uint64(len(h.ops) + 1), name: nameBatch, synced: synced, status: status, inv: h.tick, writes: wp.writes}
	if status != opPending {
		h.tick++
		o.ack = h.tick
	}
	h.ops = append(h.ops, o)
	out := map[int]mstate{}
	for i, k := range keys {
		if status == opOK {
			h.or.commit(k, wp.after[i])
		}
		out[k] = wp.after[i]
	}
	return out
}

func mset(k int) mop   { return mop{kind: 's', a: k} }
func mmerge(k int) mop { return mop{kind: 'm', a: k} }
func mdel(k int) mop   { return mop{kind: 'd', a: k} }

// TestMergeOracleCheck: a read is accepted exactly when it returns a
// state the key held while the read ran or a write in flight then leaves;
// a lost, doubled, reordered or foreign operand, a merge onto the value
// below a deletion, a stale state, a flipped byte are rejected.
func TestMergeOracleCheck(t *testing.T) {
	for _, counter := range []bool{true, false} {
		h := newMHist(counter, 2)
		mc := h.mc
		s1 := h.write(opOK, false, mset(0))[0]
		s2 := h.write(opOK, false, mmerge(0))[0]
		var pre mergeView
		h.or.view(0, &pre)
		s3 := h.write(opOK, false, mmerge(0), mmerge(0))[0] // a batch merging twice
		s4 := h.write(opPending, false, mmerge(0))[0]       // in flight
		var post mergeView
		h.or.view(0, &post)
		cands := candidates(&pre, &post)
		for _, s := range []mstate{s2, s3, s4} {
			if matchState(cands, s.val, true) < 0 {
				t.Fatalf("counter=%v: state %v rejected: %s", counter, s.st, mc.describe(0, s.val, true))
			}
		}
		op := func(ver uint32, idx int) []byte { return mc.operand(0, ver, idx, false) }
		flipped := append([]byte(nil), s3.val...)
		flipped[len(flipped)/2] ^= 1
		wrong := map[string][]byte{
			"stale (before the read)":   s1.val,
			"operand of v2 lost":        mc.merge(mc.merge(s1.val, op(3, 0)), op(3, 1)),
			"operand of v3 doubled":     mc.merge(s3.val, op(3, 1)),
			"foreign operand (key 1)":   mc.merge(s2.val, mc.operand(1, 3, 0, false)),
			"flipped byte":              flipped,
			"in-flight operand on v2":   mc.merge(s2.val, op(4, 0)),
			"in-flight operand applied": mc.merge(s4.val, op(4, 0)),
		}
		if !counter {
			wrong["v3's operands reordered"] = mc.merge(mc.merge(s2.val, op(3, 1)), op(3, 0))
		}
		for name, v := range wrong {
			if i := matchState(cands, v, true); i >= 0 {
				t.Errorf("counter=%v: %s accepted as %v: %s", counter, name, cands[i].st, mc.describe(0, v, true))
			}
		}
		if matchState(cands, nil, false) >= 0 {
			t.Errorf("counter=%v: absent accepted", counter)
		}
		// Key 1: set, then a batch deleting it and merging: the merge goes
		// onto nothing, not onto the deleted value.
		t1 := h.write(opOK, false, mset(1))[1]
		t2 := h.write(opOK, false, mdel(1), mmerge(1))[1]
		var v1 mergeView
		h.or.view(1, &v1)
		c1 := candidates(&v1, &v1)
		if matchState(c1, t2.val, true) < 0 || matchState(c1, mc.merge(t1.val, mc.operand(1, 2, 1, false)), true) >= 0 {
			t.Errorf("counter=%v: merge after a delete in a batch: want only %s", counter, mc.describe(1, t2.val, true))
		}
	}
}

// TestMergeCrashCheck: the recovered state must be a prefix of each key's
// history (checkRecovered), and these prefixes must add up to a prefix of
// the commit order holding every durable write (solveCrash): a lost
// synced merge, a value no prefix leaves, a torn batch and a hole across
// keys are rejected, a lost unsynced tail accepted.
func TestMergeCrashCheck(t *testing.T) {
	for _, counter := range []bool{true, false} {
		h := newMHist(counter, 2)
		base := h.or.base()
		w1 := h.write(opOK, true, mset(0))
		w2 := h.write(opOK, false, mmerge(0))
		w3 := h.write(opOK, false, mmerge(0), mmerge(1)) // a batch over both keys
		w4 := h.write(opOK, false, mmerge(1))
		w5 := h.write(opOK, true, mmerge(0)) // synced
		w6 := h.write(opOK, false, mmerge(1))
		w7 := h.write(opPending, false, mmerge(1)) // in flight at the crash
		crash := durability{cutoff: h.tick + 1, syncedWAL: true, what: "crash"}
		noWAL := durability{cutoff: h.tick + 1, what: "crash"}
		clean := durability{cutoff: h.tick + 1, everything: true, syncedWAL: true, what: "clean close"}
		missing := h.mc.merge(w1[0].val, h.mc.operand(0, w3[0].st.ver, 0, false)) // w3's operand without w2's
		for _, c := range []struct {
			name   string
			k0, k1 []byte
			d      durability
			want   string
		}{
			{"prefix to the synced w5", w5[0].val, w4[1].val, crash, ""},
			{"everything, w7 included", w5[0].val, w7[1].val, crash, ""},
			{"everything but w7", w5[0].val, w6[1].val, clean, ""},
			{"synced w5 lost", w3[0].val, w4[1].val, crash, "acknowledged as synced"},
			{"w6 lost at a clean close", w5[0].val, w4[1].val, clean, "acknowledged before the clean close"},
			{"w2's operand missing under w3's", missing, w3[1].val, noWAL, "not what any prefix"},
			{"torn batch w3", w2[0].val, w3[1].val, noWAL, "cannot have happened"},
			{"hole across keys: w6 without w5", w3[0].val, w6[1].val, noWAL, "issued after it was acknowledged"},
			{"no WAL: only w1", w1[0].val, nil, noWAL, ""},
		} {
			_, _, _, div := checkRecovered(keyCodec{n: 2}, h.mc, h.or, base, [][]byte{c.k0, c.k1}, h.ops, c.d)
			got := ""
			if div != nil {
				got = div.Error()
			}
			switch {
			case c.want == "" && div != nil:
				t.Errorf("counter=%v %s: rejected: %v", counter, c.name, got)
			case c.want != "" && div == nil:
				t.Errorf("counter=%v %s: accepted, want an error with %q", counter, c.name, c.want)
			case c.want != "" && !strings.Contains(got, c.want):
				t.Errorf("counter=%v %s: error %v does not say %q", counter, c.name, got, c.want)
			}
		}
	}
}

// Merge test faults: stores that get merges wrong in one known way.
func init() {
	mergeTestFaults["drop-merge"] = func(s mergeStore) mergeStore { return &dropMerge{mergeStore: s} }
	mergeTestFaults["double-merge"] = func(s mergeStore) mergeStore { return &doubleMerge{mergeStore: s} }
	mergeTestFaults["reorder-merges"] = func(s mergeStore) mergeStore { return &reorderMerges{mergeStore: s} }
	mergeTestFaults["snapshot-latest"] = func(s mergeStore) mergeStore { return &mergeSnapLatest{mergeStore: s} }
	mergeTestFaults["sync-lie"] = func(s mergeStore) mergeStore { return &mergeSyncLie{mergeStore: s} }
}

// dropMerge acknowledges every 23rd DB.Merge without writing it.
type dropMerge struct {
	mergeStore
	n atomic.Int64
}

func (d *dropMerge) Merge(key, operand []byte, o *vigil.WriteOptions) error {
	if d.n.Add(1)%23 == 0 {
		return nil
	}
	return d.mergeStore.Merge(key, operand, o)
}

// doubleMerge writes every 29th DB.Merge twice.
type doubleMerge struct {
	mergeStore
	n atomic.Int64
}

func (d *doubleMerge) Merge(key, operand []byte, o *vigil.WriteOptions) error {
	if d.n.Add(1)%29 == 0 {
		if err := d.mergeStore.Merge(key, operand, o); err != nil {
			return err
		}
	}
	return d.mergeStore.Merge(key, operand, o)
}

// reorderMerges applies each batch with its merge operands in reverse
// order (an order only the append operator can see).
type reorderMerges struct{ mergeStore }

func (r *reorderMerges) Apply(b *vigil.Batch, o *vigil.WriteOptions) error {
	type rec struct {
		kind       vigil.BatchKind
		key, value []byte
	}
	var recs []rec
	var merges []int
	rd := b.Reader()
	for {
		kind, key, value, ok := rd.Next()
		if !ok {
			break
		}
		if kind == vigil.BatchMerge {
			merges = append(merges, len(recs))
		}
		recs = append(recs, rec{kind, key, value})
	}
	for i, j := 0, len(merges)-1; i < j; i, j = i+1, j-1 {
		recs[merges[i]], recs[merges[j]] = recs[merges[j]], recs[merges[i]]
	}
	c := r.DB().NewBatch()
	for _, x := range recs {
		switch x.kind {
		case vigil.BatchPut:
			c.Put(x.key, x.value)
		case vigil.BatchDelete:
			c.Delete(x.key)
		case vigil.BatchDeleteRange:
			c.DeleteRange(x.key, x.value)
		case vigil.BatchMerge:
			c.Merge(x.key, x.value)
		}
	}
	return r.mergeStore.Apply(c, o)
}

// mergeSnapLatest makes snapshot reads see the latest state.
type mergeSnapLatest struct{ mergeStore }

func (s *mergeSnapLatest) NewSnapshot() snapshot {
	return &latestSnap{snapshot: s.mergeStore.NewSnapshot(), db: s.mergeStore}
}

// mergeSyncLie acknowledges synced writes without syncing them.
type mergeSyncLie struct{ mergeStore }

func (s *mergeSyncLie) Put(key, value []byte, _ *vigil.WriteOptions) error {
	return s.mergeStore.Put(key, value, vigil.NoSync)
}

func (s *mergeSyncLie) Merge(key, operand []byte, _ *vigil.WriteOptions) error {
	return s.mergeStore.Merge(key, operand, vigil.NoSync)
}

func (s *mergeSyncLie) Delete(key []byte, _ *vigil.WriteOptions) error {
	return s.mergeStore.Delete(key, vigil.NoSync)
}

func (s *mergeSyncLie) DeleteRange(start, end []byte, _ *vigil.WriteOptions) error {
	return s.mergeStore.DeleteRange(start, end, vigil.NoSync)
}

func (s *mergeSyncLie) Apply(b *vigil.Batch, _ *vigil.WriteOptions) error {
	return s.mergeStore.Apply(b, vigil.NoSync)
}

// TestMergesDetect: each merge test fault is reported, with the seed and
// the replay command, by the check it breaks.
func TestMergesDetect(t *testing.T) {
	small := func(p *mergePlan) { p.Keys = 16 }
	for _, c := range []struct {
		fault string
		op    MergeOperator
		crash CrashMode
		hook  func(*mergePlan)
		want  string
	}{
		{"drop-merge", MergeCounter, CrashNone, small, "expected: "},
		{"drop-merge", MergeAppend, CrashNone, small, "expected: "},
		{"double-merge", MergeCounter, CrashNone, small, ""},
		{"reorder-merges", MergeAppend, CrashNone, func(p *mergePlan) { p.Keys, p.MergePct = 4, 90 }, ""},
		{"snapshot-latest", MergeAppend, CrashNone, small, "snapshot"},
		{"sync-lie", MergeCounter, CrashInProcess, func(p *mergePlan) {
			p.Keys, p.SyncPct, p.DisableWAL, p.WriteBuffer, p.CrashEvery, p.FlushOneIn, p.CompactOneIn = 16, 100, false, 4<<20, 300, 1<<30, 1<<30
		}, "acknowledged as synced"},
	} {
		res, out := runMerges(t, MergeConfig{Seed: 31, Threads: 2, Crash: c.crash, Operator: c.op, testFault: c.fault, planHook: c.hook}, 6*time.Second)
		if res.Failure == nil {
			t.Fatalf("%s (%s): not detected:\n%s", c.fault, c.op, out)
		}
		if !strings.Contains(out, "replay:   vigil stress --merges --seed=31") || !strings.Contains(out, "FAIL") || !strings.Contains(out, c.want) {
			t.Fatalf("%s (%s): report lacks the replay command, FAIL or %q:\n%s", c.fault, c.op, c.want, out)
		}
		t.Logf("%s (%s): %v", c.fault, c.op, res.Failure)
	}
}
