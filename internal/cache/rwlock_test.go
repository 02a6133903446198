package cache

import (
	"sync"
	"testing"
)

// TestRWLockExclusion checks rwLock's contract under contention: a writer
// excludes readers and other writers, readers run together. Writers keep
// two plain fields equal only while they hold the lock; a reader that sees
// them differ got in during a write, and the race detector reports any
// unsynchronised access.
func TestRWLockExclusion(t *testing.T) {
	var l rwLock
	var a, b int
	var wg sync.WaitGroup
	const writers, readers, rounds = 3, 3, 2000
	for range writers {
		wg.Go(func() {
			for range rounds {
				l.Lock()
				a++
				for range 10 {
					_ = a // keep the window between the two stores open a little
				}
				b++
				l.Unlock()
			}
		})
	}
	var torn sync.Map
	for r := range readers {
		wg.Go(func() {
			for range rounds {
				l.RLock()
				if a != b {
					torn.Store(r, [2]int{a, b})
				}
				l.RUnlock()
			}
		})
	}
	wg.Wait()
	torn.Range(func(k, v any) bool {
		t.Errorf("reader %v saw a write in progress: a, b = %v", k, v)
		return true
	})
	if a != writers*rounds || b != a {
		t.Fatalf("a, b = %d, %d after %d locked increments each", a, b, writers*rounds)
	}
}

// TestRWLockReadersShare checks that RLock does not exclude other readers:
// a reader holding the lock lets a second reader through at once, and a
// writer gets in once both are gone.
func TestRWLockReadersShare(t *testing.T) {
	var l rwLock
	shared := 0
	l.RLock()
	done := make(chan int)
	go func() {
		l.RLock()
		v := shared
		l.RUnlock()
		done <- v
	}()
	if v := <-done; v != 0 {
		t.Fatalf("second reader saw %d", v)
	}
	l.RUnlock()
	l.Lock()
	shared = 1
	l.Unlock()
	l.RLock()
	defer l.RUnlock()
	if shared != 1 {
		t.Fatalf("reader after the writer saw %d", shared)
	}
}
