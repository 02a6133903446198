package tests

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/cockroachdb/pebble/vfs/errorfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/internal/invariants"
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

func runCrash(t *testing.T, k, ops int) (fired bool) {
	pl := newPowerLoss(k, true)
	mem, crashed := pl.Mem, &pl.Crashed
	db, err := vigil.Open("db", crashOptions(pl.FS))
	if err != nil {
		t.Fatalf("k=%d: open: %v", k, err)
	}
	h := newHistory()
	w := &workload{rng: rand.New(rand.NewPCG(uint64(k), 1)), keys: 200}
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
		}
	}
	attempted := ops
	if !crashed.Load() {
		// No crash: a clean close must keep everything.
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		lastSynced = ops
	} else {
		db.Close()
	}
	mem.ResetToSyncedState()
	mem.SetIgnoreSyncs(false)

	db, err = vigil.Open("db", crashOptions(mem))
	if err != nil {
		t.Fatalf("k=%d: reopen after crash: %v", k, err)
	}
	defer db.Close()
	got, err := dump(db)
	if err != nil {
		t.Fatalf("k=%d: reading after crash: %v", k, err)
	}
	if _, err := h.matchPrefix(got, lastSynced, attempted); err != nil {
		t.Fatalf("k=%d (last synced op %d): %v", k, lastSynced, err)
	}
	if err := db.Verify(); err != nil {
		t.Fatalf("k=%d: Verify after crash: %v", k, err)
	}
	return crashed.Load()
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
		}
	}
	if !crashed.Load() {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		lastSynced = ops
	} else {
		db.Close()
	}
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
