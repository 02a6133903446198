package tests

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/cockroachdb/pebble/vfs/errorfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/internal/invariants"
	"github.com/vigildb/vigil/internal/testcmp"
	"github.com/vigildb/vigil/internal/vfsutil"
)

func crashOptions(fs vfs.FS) *vigil.Options {
	return &vigil.Options{
		FS:                  fs,
		WriteBufferSize:     64 << 10,
		TargetFileSize:      16 << 10,
		LBaseMaxBytes:       64 << 10,
		L0CompactionTrigger: 2,
		BlockSize:           512,
	}
}

// TestCrashAtEveryWrite crashes the DB (strict MemFS: unsynced data is
// lost) at the k-th file-system write operation, for every k a workload
// reaches, while flushes and compactions run. After each crash the reopened
// DB must hold exactly the state after some prefix of the operations, and
// that prefix must include every write acknowledged as synced before the
// crash: no synced write lost, no batch torn.
func TestCrashAtEveryWrite(t *testing.T) {
	const ops = 300
	step := 1
	if testing.Short() {
		step = 7
	}
	for k := 0; ; k += step {
		fired := runCrash(t, k, ops)
		if !fired {
			t.Logf("workload needs %d write ops; crashed at each (step %d)", k, step)
			return
		}
	}
}

func runCrash(t *testing.T, k, ops int) (fired bool) { return runCrashWith(t, nil, k, ops) }

// runCrashWith is runCrash with keys ordered by cmp (nil: the default) and
// made for it (see workload.key); after the crash the reopened DB's keys
// must come out in cmp's order.
func runCrashWith(t *testing.T, cmp *vigil.Comparer, k, ops int) (fired bool) {
	pl := newPowerLoss(k, true)
	mem, crashed := pl.Mem, &pl.Crashed
	opts := func(fs vfs.FS) *vigil.Options {
		o := crashOptions(fs)
		o.Comparer = cmp
		return o
	}
	db, err := vigil.Open("db", opts(pl.FS))
	if err != nil {
		t.Fatalf("k=%d: open: %v", k, err)
	}
	h := newHistory()
	w := &workload{rng: rand.New(rand.NewPCG(uint64(k), 1)), keys: 200, key: workloadKey(cmp)}
	lastSynced := 0
	for i := 1; i <= ops; i++ {
		puts, dels, sync, b := w.op(i)
		wo := vigil.NoSync
		if sync {
			wo = vigil.Sync
		}
		err := db.Apply(b, wo)
		if err != nil {
			t.Fatalf("k=%d op %d: %v", k, i, err)
		}
		h.apply(puts, dels)
		if sync && !crashed.Load() {
			lastSynced = i
		}
		if i%50 == 0 {
			if err := db.Flush(); err != nil {
				t.Fatalf("k=%d op %d: flush: %v", k, i, err)
			}
			if !crashed.Load() {
				lastSynced = i // a Flush that returned made it all durable
			}
		}
	}
	attempted := ops
	lastSynced = closeWorkload(t, db, crashed, lastSynced, ops)
	mem.ResetToSyncedState()
	mem.SetIgnoreSyncs(false)

	db, err = vigil.Open("db", opts(mem))
	if err != nil {
		t.Fatalf("k=%d: reopen after crash: %v", k, err)
	}
	defer db.Close()
	got, err := dump(db)
	if err != nil {
		t.Fatalf("k=%d: reading after crash: %v", k, err)
	}
	if err := checkOrder(db, cmp); err != nil {
		t.Fatalf("k=%d: after crash: %v", k, err)
	}
	if _, err := h.matchPrefix(got, lastSynced, attempted); err != nil {
		t.Fatalf("k=%d (last synced op %d): %v", k, lastSynced, err)
	}
	if err := db.Verify(); err != nil {
		t.Fatalf("k=%d: Verify after crash: %v", k, err)
	}
	return crashed.Load()
}

// closeWorkload closes db at the end of a crash test's workload of ops
// operations and returns the last operation the reopened DB must hold:
// all of them if Close returned before the power loss, else lastDurable
// (the last synced or flushed one before it). Power lost during Close —
// at the WAL's clean-close record, or in a flush or compaction Close waits
// for — promises nothing more, whatever Close returned.
func closeWorkload(t *testing.T, db *vigil.DB, crashed *atomic.Bool, lastDurable, ops int) int {
	t.Helper()
	err := db.Close()
	if crashed.Load() {
		return lastDurable
	}
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// TestErrorInjectionAtEveryOp injects one I/O error at the i-th file-system
// operation, for every i a short workload reaches. Each error must surface
// (from Open, a write, Flush or Close) or be survived; after reopening
// without faults, the DB holds a prefix of history containing every write
// acknowledged as synced.
func TestErrorInjectionAtEveryOp(t *testing.T) {
	const ops = 120
	step := int32(1)
	if testing.Short() {
		step = 5
	}
	for i := int32(0); ; i += step {
		inj := errorfs.OnIndex(i)
		mem := vfs.NewMem()
		var injectedAt string
		fs := vfsutil.SyncDataAsSync(errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
			err := inj.MaybeError(op, path)
			if err != nil {
				injectedAt = fmt.Sprintf("op %v on %s", op, path)
			}
			return err
		})))
		h := newHistory()
		lastAcked, attempted := 0, 0
		func() {
			db, err := vigil.Open("db", crashOptions(fs))
			if err != nil {
				return // the error surfaced
			}
			defer db.Close()
			w := &workload{rng: rand.New(rand.NewPCG(uint64(i), 2)), keys: 100}
			for n := 1; n <= ops; n++ {
				puts, dels, _, b := w.op(n)
				attempted = n
				h.apply(puts, dels)
				if err := db.Apply(b, vigil.Sync); err != nil {
					return
				}
				lastAcked = n
				if n%40 == 0 {
					if err := db.Flush(); err != nil {
						return
					}
				}
				if n%60 == 0 {
					if err := db.Compact(nil, nil); err != nil {
						return
					}
				}
			}
		}()
		fired := inj.Index() < 0
		db, err := vigil.Open("db", crashOptions(mem))
		if err != nil {
			t.Fatalf("index %d (error injected at %s): reopen without faults: %v", i, injectedAt, err)
		}
		got, err := dump(db)
		if err != nil {
			t.Fatalf("index %d (error injected at %s): read: %v", i, injectedAt, err)
		}
		if _, err := h.matchPrefix(got, lastAcked, attempted); err != nil {
			t.Fatalf("index %d (error injected at %s; acked %d, attempted %d): %v", i, injectedAt, lastAcked, attempted, err)
		}
		db.Close()
		if !fired {
			t.Logf("workload runs %d FS operations; injected an error at each (step %d)", i, step)
			return
		}
	}
}

// TestCrashDuringLargeBatch crashes at every file-system write while large
// batches (applied as flushable batches, not memtable inserts) are written,
// synced and flushed among small writes: after each crash the DB holds a
// prefix of the operations including every synced one, and never part of a
// batch.
func TestCrashDuringLargeBatch(t *testing.T) {
	step := 1
	if testing.Short() || invariants.RaceEnabled {
		step = 4
	}
	for k := 0; ; k += step {
		if !runLargeBatchCrash(t, k) {
			t.Logf("workload needs %d write ops; crashed at each (step %d)", k, step)
			return
		}
	}
}

func runLargeBatchCrash(t *testing.T, k int) (fired bool) {
	pl := newPowerLoss(k, true)
	mem, crashed := pl.Mem, &pl.Crashed
	opts := func(fs vfs.FS) *vigil.Options {
		return &vigil.Options{FS: fs, WriteBufferSize: 64 << 10, L0CompactionTrigger: 2, TargetFileSize: 16 << 10}
	}
	db, err := vigil.Open("db", opts(pl.FS))
	if err != nil {
		t.Fatalf("k=%d: open: %v", k, err)
	}
	h := newHistory()
	lastSynced := 0
	const ops = 12
	for i := 1; i <= ops; i++ {
		puts := map[string]string{}
		b := db.NewBatch()
		n := 5
		if i%3 == 0 {
			n = 2000 // ~70 KB of memtable: over half the write buffer
		}
		for j := 0; j < n; j++ {
			key, val := fmt.Sprintf("k%04d", (i*131+j*7)%2500), fmt.Sprintf("v%d.%d", i, j)
			b.Put([]byte(key), []byte(val))
			puts[key] = val
		}
		sync := i%2 == 0
		wo := vigil.NoSync
		if sync {
			wo = vigil.Sync
		}
		if err := db.Apply(b, wo); err != nil {
			t.Fatalf("k=%d op %d: %v", k, i, err)
		}
		h.apply(puts, nil)
		if sync && !crashed.Load() {
			lastSynced = i
		}
		if i%5 == 0 {
			if err := db.Flush(); err != nil {
				t.Fatalf("k=%d op %d: flush: %v", k, i, err)
			}
			if !crashed.Load() {
				lastSynced = i
			}
		}
	}
	lastSynced = closeWorkload(t, db, crashed, lastSynced, ops)
	mem.ResetToSyncedState()
	mem.SetIgnoreSyncs(false)
	db, err = vigil.Open("db", opts(mem))
	if err != nil {
		t.Fatalf("k=%d: reopen after crash: %v", k, err)
	}
	defer db.Close()
	got, err := dump(db)
	if err != nil {
		t.Fatalf("k=%d: reading after crash: %v", k, err)
	}
	if _, err := h.matchPrefix(got, lastSynced, ops); err != nil {
		t.Fatalf("k=%d (last synced op %d): %v", k, lastSynced, err)
	}
	return crashed.Load()
}

// TestCrashAtEveryWriteMerges is TestCrashAtEveryWrite with merge operands
// among the writes, for each built-in operator (uint64add counters,
// append lists): batches of sets, deletes, range deletions and merges on a
// few keys — several merges of one key in a batch, merges over a deletion
// — so that merge chains run through memtables, flushes and compactions,
// which combine them. The DB crashes at every k-th file-system write (a
// sample of them under -short and -race); the reopened DB, read forward,
// backward and key by key, must hold exactly the state after some prefix of
// the operations, with the operands folded by an independent model of the
// operator, and that prefix must include every synced operation.
func TestCrashAtEveryWriteMerges(t *testing.T) {
	for _, m := range []*vigil.Merger{vigil.Uint64AddMerger, vigil.AppendMerger} {
		t.Run(m.Name, func(t *testing.T) {
			step := 1
			if testing.Short() || invariants.RaceEnabled {
				step = 5
			}
			for k := 0; ; k += step {
				if !runMergeCrash(t, m, k) {
					t.Logf("workload needs %d write ops; crashed at each (step %d)", k, step)
					return
				}
			}
		})
	}
}

func runMergeCrash(t *testing.T, m *vigil.Merger, k int) (fired bool) {
	const ops = 150
	pl := newPowerLoss(k, true)
	opts := func(fs vfs.FS) *vigil.Options {
		o := crashOptions(fs)
		o.Merger = m
		return o
	}
	db, err := vigil.Open("db", opts(pl.FS))
	if err != nil {
		t.Fatalf("%s k=%d: open: %v", m.Name, k, err)
	}
	h := newHistory()
	w := &mergeWorkload{rng: rand.New(rand.NewPCG(uint64(k), 3)), keys: 12, counter: m == vigil.Uint64AddMerger}
	lastSynced := 0
	for i := 1; i <= ops; i++ {
		hops, sync, b := w.op(i)
		wo := vigil.NoSync
		if sync {
			wo = vigil.Sync
		}
		if err := db.Apply(b, wo); err != nil {
			t.Fatalf("%s k=%d op %d: %v", m.Name, k, i, err)
		}
		h.applyMerges(hops, w.merge)
		if sync && !pl.Crashed.Load() {
			lastSynced = i
		}
		if i%40 == 0 {
			if err := db.Flush(); err != nil {
				t.Fatalf("%s k=%d op %d: flush: %v", m.Name, k, i, err)
			}
			if !pl.Crashed.Load() {
				lastSynced = i // a Flush that returned made it all durable
			}
		}
	}
	lastSynced = closeWorkload(t, db, &pl.Crashed, lastSynced, ops)
	pl.Mem.ResetToSyncedState()
	pl.Mem.SetIgnoreSyncs(false)
	db, err = vigil.Open("db", opts(pl.Mem))
	if err != nil {
		t.Fatalf("%s k=%d: reopen after crash: %v", m.Name, k, err)
	}
	defer db.Close()
	got, err := dumpThreeWays(db, w.keyNames())
	if err != nil {
		t.Fatalf("%s k=%d: reading after crash: %v", m.Name, k, err)
	}
	if _, err := h.matchPrefix(got, lastSynced, ops); err != nil {
		t.Fatalf("%s k=%d (last synced op %d): %v", m.Name, k, lastSynced, err)
	}
	return pl.Crashed.Load()
}

// mergeOp is one write of a mergeWorkload batch: set, merge or delete key,
// or delete the keys [key, end).
type mergeOp struct {
	kind     byte // 's', 'm', 'd', 'r'
	key, end string
	val      string
}

// mergeWorkload issues batches of 1-6 writes on a few keys, mostly merges,
// a quarter of them synced. Every operand is distinct (random counters,
// list items naming their operation), so a lost, doubled or misplaced one
// shows in the value.
type mergeWorkload struct {
	rng     *rand.Rand
	keys    int
	counter bool
}

func (w *mergeWorkload) keyNames() []string {
	var names []string
	for i := 0; i < w.keys; i++ {
		names = append(names, fmt.Sprintf("k%04d", i))
	}
	return names
}

func (w *mergeWorkload) op(i int) ([]mergeOp, bool, *vigil.Batch) {
	b := &vigil.Batch{}
	var ops []mergeOp
	near := w.rng.IntN(w.keys)
	for j := 0; j < 1+w.rng.IntN(6); j++ {
		k := min(w.keys-1, near+w.rng.IntN(3))
		o := mergeOp{key: fmt.Sprintf("k%04d", k)}
		switch x := w.rng.IntN(20); {
		case x < 12:
			o.kind, o.val = 'm', w.value(i, j)
			b.Merge([]byte(o.key), []byte(o.val))
		case x < 16:
			o.kind, o.val = 's', w.value(i, j)
			b.Put([]byte(o.key), []byte(o.val))
		case x < 19:
			o.kind = 'd'
			b.Delete([]byte(o.key))
		default:
			o.kind, o.end = 'r', fmt.Sprintf("k%04d", k+1+w.rng.IntN(3))
			b.DeleteRange([]byte(o.key), []byte(o.end))
		}
		ops = append(ops, o)
	}
	return ops, w.rng.IntN(4) == 0, b
}

// value returns a set's value or a merge's operand: a random counter, or
// a list item naming the operation, padded so that flushes come.
func (w *mergeWorkload) value(i, j int) string {
	if w.counter {
		return string(binary.LittleEndian.AppendUint64(nil, w.rng.Uint64()))
	}
	return fmt.Sprintf("<%d.%d%s>", i, j, strings.Repeat("x", w.rng.IntN(120)))
}

// merge is the model of the operator: operand merged into the value
// existing (nil: none).
func (w *mergeWorkload) merge(existing *string, operand string) string {
	if !w.counter {
		if existing == nil {
			return operand
		}
		return *existing + operand
	}
	var sum uint64
	if existing != nil {
		sum = binary.LittleEndian.Uint64([]byte(*existing))
	}
	return string(binary.LittleEndian.AppendUint64(nil, sum+binary.LittleEndian.Uint64([]byte(operand))))
}

// applyMerges records one batch of a mergeWorkload as the next state:
// its writes in order, operands folded with merge.
func (h *history) applyMerges(ops []mergeOp, merge func(existing *string, operand string) string) {
	next := make(map[string]string, len(h.current()))
	for k, v := range h.current() {
		next[k] = v
	}
	for _, o := range ops {
		switch o.kind {
		case 's':
			next[o.key] = o.val
		case 'm':
			var existing *string
			if v, ok := next[o.key]; ok {
				existing = &v
			}
			next[o.key] = merge(existing, o.val)
		case 'd':
			delete(next, o.key)
		case 'r':
			for k := range next {
				if k >= o.key && k < o.end {
					delete(next, k)
				}
			}
		}
	}
	h.states = append(h.states, next)
}

// dumpThreeWays reads the whole DB with a forward and a backward scan and
// a Get of each of keys, and fails unless the three agree.
func dumpThreeWays(db *vigil.DB, keys []string) (map[string]string, error) {
	got, err := dump(db)
	if err != nil {
		return nil, err
	}
	it, err := db.NewIter(nil)
	if err != nil {
		return nil, err
	}
	back := map[string]string{}
	for ok := it.Last(); ok; ok = it.Prev() {
		back[string(it.Key())] = string(it.Value())
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	if !equalMaps(got, back) {
		return nil, fmt.Errorf("a backward scan read %q, the forward scan %q", back, got)
	}
	for _, k := range keys {
		v, err := db.Get([]byte(k))
		if err != nil && !errors.Is(err, vigil.ErrNotFound) {
			return nil, err
		}
		if w, ok := got[k]; ok != (err == nil) || w != string(v) {
			return nil, fmt.Errorf("Get(%s) = %q (err %v), the scans read %q (present %v)", k, v, err, w, ok)
		}
	}
	return got, nil
}

// TestMergeHistoryModel: the crash test's model folds operands in order
// onto the value below them (nothing after a deletion or a range
// deletion), and matchPrefix rejects a state with an operand lost or
// doubled.
func TestMergeHistoryModel(t *testing.T) {
	le := func(n uint64) string { return string(binary.LittleEndian.AppendUint64(nil, n)) }
	batches := [][]mergeOp{
		{{kind: 'm', key: "a", val: "1"}, {kind: 's', key: "b", val: "5"}},
		{{kind: 'm', key: "a", val: "2"}, {kind: 'm', key: "b", val: "6"}},
		{{kind: 'd', key: "a"}, {kind: 'm', key: "a", val: "3"}, {kind: 'r', key: "b", end: "c"}, {kind: 'm', key: "b", val: "7"}},
	}
	for _, counter := range []bool{false, true} {
		w := &mergeWorkload{counter: counter}
		val := func(s string) string {
			if counter {
				return le(uint64(s[0] - '0'))
			}
			return s
		}
		h := newHistory()
		for _, b := range batches {
			var ops []mergeOp
			for _, o := range b {
				if o.val != "" {
					o.val = val(o.val)
				}
				ops = append(ops, o)
			}
			h.applyMerges(ops, w.merge)
		}
		want := map[string]string{"a": "12", "b": "56"}
		final := map[string]string{"a": "3", "b": "7"}
		if counter {
			want = map[string]string{"a": le(3), "b": le(11)}
			final = map[string]string{"a": le(3), "b": le(7)}
		}
		if !equalMaps(h.states[2], want) || !equalMaps(h.states[3], final) {
			t.Fatalf("counter=%v: states %q, want %q then %q", counter, h.states, want, final)
		}
		lost, doubled := map[string]string{"a": val("2"), "b": "56"}, map[string]string{"a": "122", "b": "56"}
		if counter {
			lost, doubled = map[string]string{"a": le(2), "b": le(11)}, map[string]string{"a": le(5), "b": le(11)}
		}
		for _, bad := range []map[string]string{lost, doubled} {
			if _, err := h.matchPrefix(bad, 0, 3); err == nil {
				t.Errorf("counter=%v: %q accepted as a prefix", counter, bad)
			}
		}
	}
}

// TestCrashAtEveryWriteComparers is TestCrashAtEveryWrite under the
// reverse order and under keys that end in a version sorting newest first
// (package testcmp), crashing at every third write (every 17th in -short).
func TestCrashAtEveryWriteComparers(t *testing.T) {
	step := 3
	if testing.Short() {
		step = 17
	}
	for _, c := range []*vigil.Comparer{testcmp.Reverse, testcmp.Versioned} {
		t.Run(c.Name, func(t *testing.T) {
			for k := 0; ; k += step {
				if !runCrashWith(t, c, k, 300) {
					t.Logf("workload needs %d write ops; crashed at every %d", k, step)
					return
				}
			}
		})
	}
}
