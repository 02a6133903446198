package stress

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/vfs/errorfs"
)

// faultInjector fails file reads, writes and syncs with probability rate,
// from its own seeded generator, so that a run's faults are reproducible
// as far as the order of file operations is (errorfs.WithProbability seeds
// from the clock, so it cannot be used for that).
//
// Concurrency: MaybeError is safe for concurrent use (the generator is
// behind a mutex: file operations come from workers, the WAL flusher,
// flushes and compactions at once).
type faultInjector struct {
	rate    float64
	enabled atomic.Bool

	mu  sync.Mutex
	rng *rand.Rand

	injected atomic.Int64
}

func newFaultInjector(seed uint64, rate float64) *faultInjector {
	return &faultInjector{rate: rate, rng: rand.New(rand.NewPCG(seed, 0xfa17))}
}

// injectable reports whether op is one the runner fails: data reads,
// writes and syncs, and the creation, opening and renaming of files.
// Directory listing, locking, stat, removal and close are left alone: the
// DB treats failures there as best effort (cleanup) or fatal at Open, and
// neither tells us more about data safety.
func injectable(op errorfs.Op) bool {
	switch op {
	case errorfs.OpFileRead, errorfs.OpFileReadAt, errorfs.OpFileWrite, errorfs.OpFileWriteAt,
		errorfs.OpFileSync, errorfs.OpFileFlush, errorfs.OpCreate, errorfs.OpOpen, errorfs.OpRename:
		return true
	}
	return false
}

// MaybeError implements errorfs.Injector.
func (f *faultInjector) MaybeError(op errorfs.Op, path string) error {
	if !f.enabled.Load() || !injectable(op) {
		return nil
	}
	f.mu.Lock()
	hit := f.rng.Float64() < f.rate
	f.mu.Unlock()
	if !hit {
		return nil
	}
	f.injected.Add(1)
	return fmt.Errorf("stress fault injection (op %d on %s): %w", op, path, errorfs.ErrInjected)
}
