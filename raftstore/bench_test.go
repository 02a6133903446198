package raftstore_test

import (
	"testing"

	"github.com/vigildb/vigil/raftstore/internal/benchsuite"
)

// BenchmarkStores runs hashicorp/raft's store benchmarks (and
// DeleteRangePrefix) against Vigil's Store, raft-boltdb v2 and raft-wal
// side by side:
//
//	go test -run '^$' -bench Stores -benchmem -count 5 | benchstat ...
//
// raftbench's StoreLog and DeleteRange are skipped on raft-wal, which
// refuses their index 0 and gapped indexes. cmd/raftbench runs the same benchmarks alternating the engines
// and prints their ratios.
func BenchmarkStores(b *testing.B) {
	for _, c := range benchsuite.Cases {
		for _, e := range benchsuite.Engines {
			b.Run(c.Name+"/"+e.Name, func(b *testing.B) { benchsuite.Run(b, e, c) })
		}
	}
}
