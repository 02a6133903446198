package sst

import (
	"sync"
	"testing"
)

// Counts from many goroutines add up, whatever shards they land in.
func TestFilterStatsTotals(t *testing.T) {
	var s FilterStats
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				s.point(uint64(i), i%4 == 0)
				s.prefix(uint64(i), i%2 == 0)
			}
		}()
	}
	wg.Wait()
	c, u, pc, pu := s.Totals()
	if c != 4000 || u != 1000 || pc != 4000 || pu != 2000 {
		t.Fatalf("Totals = %d %d %d %d, want 4000 1000 4000 2000", c, u, pc, pu)
	}
}
