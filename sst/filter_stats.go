package sst

import "sync/atomic"

// FilterStats counts what the bloom filters of the tables read with it
// (ReadOptions.Filter) answered: point reads that asked a table's filter
// and those it answered "absent" (the table was not read), and the same
// for prefix scans (ReadOptions.Prefix). A DB keeps one for its users'
// reads (vigil.Metrics.Filter).
//
// Concurrency: safe for concurrent use. The counts are spread over shards,
// each on a cache line of its own, picked by the table's number, so that readers of different tables on different
// processors do not take turns owning one line (a single atomic counter
// cost 2-thread Gets a cache miss per table probed).
type FilterStats struct {
	shards [filterShards]filterShard
}

const filterShards = 8

type filterShard struct {
	checked, useful, prefixChecked, prefixUseful atomic.Int64
	_                                            [32]byte // to 64 bytes
}

func (s *FilterStats) shard(k uint64) *filterShard { return &s.shards[k%filterShards] }

// point counts one point read's filter probe of table k; useful if it
// excluded the table.
func (s *FilterStats) point(k uint64, useful bool) {
	sh := s.shard(k)
	sh.checked.Add(1)
	if useful {
		sh.useful.Add(1)
	}
}

// prefix counts one prefix scan's filter probe of table k; useful if it
// excluded the table.
func (s *FilterStats) prefix(k uint64, useful bool) {
	sh := s.shard(k)
	sh.prefixChecked.Add(1)
	if useful {
		sh.prefixUseful.Add(1)
	}
}

// Totals returns the counts so far: point probes and those that excluded
// a table, prefix probes and those that excluded a table.
func (s *FilterStats) Totals() (checked, useful, prefixChecked, prefixUseful int64) {
	for i := range s.shards {
		sh := &s.shards[i]
		checked += sh.checked.Load()
		useful += sh.useful.Load()
		prefixChecked += sh.prefixChecked.Load()
		prefixUseful += sh.prefixUseful.Load()
	}
	return checked, useful, prefixChecked, prefixUseful
}
