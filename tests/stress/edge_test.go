package stress

import (
	"errors"
	"strings"
	"testing"

	"github.com/vigildb/vigil"
)

// Empty and inverted range deletions.

func init() {
	testFaults["empty-range-deletes"] = func(s store) store { return &emptyRangeDeletes{store: s} }
	testFaults["inverted-accepted"] = func(s store) store { return &invertedAccepted{store: s} }
	testFaults["inverted-applied"] = func(s store) store { return &invertedApplied{store: s} }
}

// emptyRangeDeletes takes DeleteRange(k, k) for a deletion of k.
type emptyRangeDeletes struct{ store }

func (e *emptyRangeDeletes) DeleteRange(start, end []byte, o *vigil.WriteOptions) error {
	if string(start) == string(end) {
		return e.store.Delete(start, o)
	}
	return e.store.DeleteRange(start, end, o)
}

// invertedAccepted answers success where the DB refused an inverted range.
type invertedAccepted struct{ store }

func (i *invertedAccepted) DeleteRange(start, end []byte, o *vigil.WriteOptions) error {
	if err := i.store.DeleteRange(start, end, o); !errors.Is(err, vigil.ErrInvalidArgument) {
		return err
	}
	return nil
}

func (i *invertedAccepted) Apply(b *vigil.Batch, o *vigil.WriteOptions) error {
	if err := i.store.Apply(b, o); !errors.Is(err, vigil.ErrInvalidArgument) {
		return err
	}
	return nil
}

// invertedApplied refuses an inverted DeleteRange as it should, but
// deletes the range the other way round first.
type invertedApplied struct{ store }

func (i *invertedApplied) DeleteRange(start, end []byte, o *vigil.WriteOptions) error {
	if string(start) > string(end) {
		if err := i.store.DeleteRange(end, start, o); err != nil {
			return err
		}
	}
	return i.store.DeleteRange(start, end, o)
}

// edgeRunner is a runner on a MemFS DB with no events, for driving one
// worker by hand.
func edgeRunner(t *testing.T, fault string) (*runner, *worker) {
	t.Helper()
	cfg := Config{Seed: 41, Threads: 1, Ops: 1, testFault: fault}
	if err := cfg.normalize(); err != nil {
		t.Fatal(err)
	}
	p := drawPlan(&cfg)
	p.Keys, p.SyncPct, p.DisableWAL = 16, 0, false
	r := newRunner(cfg, p)
	r.dbDir = "db"
	r.setupFS()
	db, err := r.open(false)
	if err != nil {
		t.Fatal(err)
	}
	r.db = db
	t.Cleanup(func() { r.db.Close() })
	return r, newWorker(r, 0)
}

func (r *runner) mustVerify(t *testing.T) {
	t.Helper()
	if div := r.verify(r.db, durability{cutoff: r.tick(), everything: true, syncedWAL: true, what: "test", live: true}); div != nil {
		t.Fatalf("verification: %v", div)
	}
}

// TestEmptyRangeOracleRule: DeleteRange(k, k) in a batch or alone changes
// no key, for the oracle and for the DB, wherever it stands.
func TestEmptyRangeOracleRule(t *testing.T) {
	r, w := edgeRunner(t, "")
	ops := []wop{{kind: 's', a: 3}, {kind: 'r', a: 5, b: 5}, {kind: 'd', a: 4}, {kind: 's', a: 5}, {kind: 'r', a: 5, b: 5}, {kind: 'r', a: 3, b: 3}, {kind: 'r', a: 16, b: 16}}
	if div := w.write(r.db, nameBatch, ops); div != nil {
		t.Fatal(div)
	}
	if div := w.write(r.db, nameBatch, []wop{{kind: 'r', a: 6, b: 6}}); div != nil {
		t.Fatalf("a batch of empty ranges only: %v", div)
	}
	if div := w.write(r.db, nameDeleteRange, []wop{{kind: 'r', a: 5, b: 5}}); div != nil {
		t.Fatalf("DB.DeleteRange(k, k): %v", div)
	}
	cur := r.or.current()
	if cur[3].del || cur[5].del || !cur[4].del || cur[6] != neverWritten {
		t.Fatalf("oracle after empty ranges: 3=%v 4=%v 5=%v 6=%v", cur[3], cur[4], cur[5], cur[6])
	}
	if r.or.nextVersion(6) != 1 {
		t.Fatal("an empty range took a version of its key")
	}
	r.mustVerify(t)
}

// TestInvertedRangeRefused: a batch or DeleteRange with start > end fails
// with ErrInvalidArgument and leaves nothing behind.
func TestInvertedRangeRefused(t *testing.T) {
	r, w := edgeRunner(t, "")
	if div := w.write(r.db, nameBatch, []wop{{kind: 's', a: 1}, {kind: 's', a: 2}, {kind: 's', a: 7}}); div != nil {
		t.Fatal(div)
	}
	for i := 0; i < 20; i++ {
		if div := w.invertedBatch(r.db, []wop{{kind: 's', a: 1}, {kind: 'd', a: 2}, {kind: 'r', a: 6, b: 9}}); div != nil {
			t.Fatal(div)
		}
		if div := w.invertedDeleteRange(r.db, 0, 16); div != nil {
			t.Fatal(div)
		}
	}
	if got := r.stats.invertedRanges.Load(); got != 40 {
		t.Fatalf("%d inverted writes refused, want 40", got)
	}
	r.mustVerify(t)
}

func TestInvertedRangeFaultsNoticed(t *testing.T) {
	r, w := edgeRunner(t, "inverted-accepted")
	div := w.invertedBatch(r.db, []wop{{kind: 's', a: 1}})
	if div == nil || !strings.Contains(div.Expected, "ErrInvalidArgument") {
		t.Fatalf("an accepted inverted batch went unnoticed: %v", div)
	}
	if div := w.invertedDeleteRange(r.db, 2, 5); div == nil {
		t.Fatal("an accepted inverted DeleteRange went unnoticed")
	}

	r, w = edgeRunner(t, "inverted-applied")
	if div := w.write(r.db, nameBatch, []wop{{kind: 's', a: 2}, {kind: 's', a: 3}}); div != nil {
		t.Fatal(div)
	}
	if div := w.invertedDeleteRange(r.db, 2, 5); div != nil {
		t.Fatalf("the error was the right one: %v", div)
	}
	if div := r.verify(r.db, durability{cutoff: r.tick(), everything: true, syncedWAL: true, what: "test", live: true}); div == nil {
		t.Fatal("a refused DeleteRange that deleted keys went unnoticed")
	}
}

// The runner notices, in a run, a DB that takes empty ranges for deletions
// and one that accepts inverted ones.
func TestDetectsEmptyRangeDeleting(t *testing.T) {
	mustDetect(t, Config{Seed: 42, Threads: 2, Ops: 30000, testFault: "empty-range-deletes", planHook: func(p *plan) { p.Keys = 8 }}, 0, "")
}

func TestDetectsInvertedRangeAccepted(t *testing.T) {
	mustDetect(t, Config{Seed: 43, Threads: 2, Ops: 30000, testFault: "inverted-accepted", planHook: small}, 0, "inverted")
}
