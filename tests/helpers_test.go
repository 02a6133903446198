// Package tests holds Vigil's integration tests: crash recovery on a strict
// in-memory file system, I/O error injection at every operation, and
// corruption detection end to end. They use only the public API.
package tests

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/cockroachdb/pebble/vfs/errorfs"
	"github.com/vigildb/vigil/internal/testcmp"
	"github.com/vigildb/vigil/internal/vfsutil"

	"github.com/vigildb/vigil"
)

// history records the model state after every operation of a workload, so
// that a recovered DB can be matched against "some prefix of history".
type history struct {
	states []map[string]string // states[i] = state after i operations
}

func newHistory() *history { return &history{states: []map[string]string{{}}} }

func (h *history) current() map[string]string { return h.states[len(h.states)-1] }

// apply records one operation (a batch of puts/deletes) as the next state.
func (h *history) apply(puts map[string]string, dels []string) {
	next := make(map[string]string, len(h.current())+len(puts))
	for k, v := range h.current() {
		next[k] = v
	}
	for _, k := range dels {
		delete(next, k)
	}
	for k, v := range puts {
		next[k] = v
	}
	h.states = append(h.states, next)
}

// dump reads the whole DB.
func dump(db *vigil.DB) (map[string]string, error) {
	it, err := db.NewIter(nil)
	if err != nil {
		return nil, err
	}
	got := map[string]string{}
	for ok := it.First(); ok; ok = it.Next() {
		got[string(it.Key())] = string(it.Value())
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	return got, nil
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// matchPrefix returns the index j in [lo, hi] whose state equals got, or an
// error describing the closest miss.
func (h *history) matchPrefix(got map[string]string, lo, hi int) (int, error) {
	hi = min(hi, len(h.states)-1)
	for j := hi; j >= lo; j-- {
		if equalMaps(got, h.states[j]) {
			return j, nil
		}
	}
	// Describe the difference with the state at lo (all acknowledged syncs).
	want := h.states[max(lo, 0)]
	var diffs []string
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			diffs = append(diffs, fmt.Sprintf("%s: want %q got %q (present=%v)", k, v, g, ok))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: unexpected %q", k, v))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 10 {
		diffs = diffs[:10]
	}
	return -1, fmt.Errorf("recovered state matches no prefix of history in [%d, %d]; vs state %d: %s", lo, hi, lo, strings.Join(diffs, "; "))
}

// workload issues op number i: a batch of 1-5 writes sharing one value stamp
// (so a torn batch would show), synced every few ops.
type workload struct {
	rng  *rand.Rand
	keys int
	// key makes key number i (nil: "k%04d").
	key func(i int) string
}

func (w *workload) op(i int) (puts map[string]string, dels []string, sync bool, batch *vigil.Batch) {
	batch = &vigil.Batch{}
	puts = map[string]string{}
	n := 1 + w.rng.IntN(5)
	for j := 0; j < n; j++ {
		var k string
		if w.key != nil {
			k = w.key(w.rng.IntN(w.keys))
		} else {
			k = fmt.Sprintf("k%04d", w.rng.IntN(w.keys))
		}
		if w.rng.IntN(5) == 0 {
			batch.Delete([]byte(k))
			delete(puts, k)
			dels = append(dels, k)
		} else {
			v := fmt.Sprintf("op%d-%s", i, strings.Repeat("v", w.rng.IntN(300)))
			batch.Put([]byte(k), []byte(v))
			puts[k] = v
			// A later put in the batch wins over an earlier delete.
			for d := len(dels) - 1; d >= 0; d-- {
				if dels[d] == k {
					dels = append(dels[:d], dels[d+1:]...)
				}
			}
		}
	}
	return puts, dels, w.rng.IntN(4) == 0, batch
}

// powerLoss is a strict in-memory file system on which the machine "loses
// power" at one write: from the k+1-th write counted (see newPowerLoss) nothing becomes
// durable any more. The crash tests of writes, large batches, checkpoints
// and ingestions share it.
type powerLoss struct {
	Mem     *vfs.MemFS
	FS      vfs.FS // Mem with the write counter in front
	Armed   atomic.Bool
	Crashed atomic.Bool
	count   atomic.Int32
}

// newPowerLoss returns the file system that crashes at write k+1 (0-based
// k); armed says whether writes count from the start, or only once the
// test sets Armed.
func newPowerLoss(k int, armed bool) *powerLoss {
	p := &powerLoss{Mem: vfs.NewStrictMem()}
	p.Armed.Store(armed)
	p.FS = vfsutil.SyncDataAsSync(errorfs.Wrap(p.Mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if p.Armed.Load() && op.OpKind() == errorfs.OpKindWrite && int(p.count.Add(1)) == k+1 && p.Crashed.CompareAndSwap(false, true) {
			p.Mem.SetIgnoreSyncs(true)
		}
		return nil
	})))
	return p
}

// workloadKey returns the workload's key maker for comparer cmp: under
// testcmp.Versioned, keys are 25 prefixes with 8 versions each (so that
// versions of one prefix sort newest first); otherwise nil ("k%04d").
func workloadKey(cmp *vigil.Comparer) func(int) string {
	if cmp != testcmp.Versioned {
		return nil
	}
	return func(i int) string {
		return string(testcmp.VersionedKey(fmt.Appendf(nil, "k%03d", i/8), uint64(i%8)*1000003))
	}
}

// checkOrder iterates db both ways and reports keys out of cmp's order
// (nil: the default).
func checkOrder(db *vigil.DB, cmp *vigil.Comparer) error {
	c := cmp.Resolve()
	it, err := db.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	var prev []byte
	for ok := it.First(); ok; ok = it.Next() {
		if prev != nil && c.Compare(prev, it.Key()) >= 0 {
			return fmt.Errorf("forward: key %q after %q, out of %s order", it.Key(), prev, c.Name)
		}
		prev = append(prev[:0], it.Key()...)
	}
	prev = nil
	for ok := it.Last(); ok; ok = it.Prev() {
		if prev != nil && c.Compare(prev, it.Key()) <= 0 {
			return fmt.Errorf("reverse: key %q before %q, out of %s order", it.Key(), prev, c.Name)
		}
		prev = append(prev[:0], it.Key()...)
	}
	return it.Error()
}
