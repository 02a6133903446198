package vigil

import "github.com/vigildb/vigil/memtable"

// testingHooks let tests of this package intercept internal steps. They are
// nil in production.
type testingHooks struct {
	// beforeFlush runs on the flush goroutine with the memtable about to be
	// flushed, after its writers finished.
	beforeFlush func(mt *memtable.MemTable)
}
