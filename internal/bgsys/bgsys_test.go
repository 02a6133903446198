package bgsys

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestDoBounds runs many blocking calls at once under several GOMAXPROCS
// values and checks that no more than GOMAXPROCS-1 (at least 1) are ever
// inside fn together, that all of them run, and that fn's error is Do's.
func TestDoBounds(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 4} {
		runtime.GOMAXPROCS(procs)
		want := max(procs-1, 1)
		var in, peak, ran atomic.Int32
		release := make(chan struct{})
		var wg sync.WaitGroup
		errWant := errors.New("boom")
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := Do(func() error {
					n := in.Add(1)
					for {
						p := peak.Load()
						if n <= p || peak.CompareAndSwap(p, n) {
							break
						}
					}
					<-release
					in.Add(-1)
					ran.Add(1)
					return errWant
				})
				if err != errWant {
					t.Errorf("Do returned %v, want fn's error", err)
				}
			}()
		}
		// Let the calls pile up at the gate, then release them. A call
		// counted in InProgress yields before it enters fn: wait until
		// the first ones are inside (a loaded -race run took longer than
		// 1,000 yields).
		for InProgress() < want || int(in.Load()) < want {
			runtime.Gosched()
		}
		// Give the other callers every chance to get past the gate.
		for range 1000 {
			runtime.Gosched()
		}
		if n := in.Load(); int(n) != want {
			t.Errorf("GOMAXPROCS=%d: %d calls inside while the first ones block, want %d", procs, n, want)
		}
		close(release)
		wg.Wait()
		if p := peak.Load(); int(p) > want {
			t.Errorf("GOMAXPROCS=%d: %d calls at once, want at most %d", procs, p, want)
		}
		if ran.Load() != 16 {
			t.Errorf("GOMAXPROCS=%d: %d of 16 calls ran", procs, ran.Load())
		}
		if n := InProgress(); n != 0 {
			t.Errorf("GOMAXPROCS=%d: %d calls still counted in progress", procs, n)
		}
	}
}
