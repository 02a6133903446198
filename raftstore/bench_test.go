package raftstore_test

import (
	"testing"

	"github.com/vigildb/vigil/raftstore/internal/benchsuite"
)

// BenchmarkStores runs hashicorp/raft's store benchmarks against Vigil's
// Store and raft-boltdb v2 side by side:
//
//	go test -run '^$' -bench Stores -benchmem -count 5 | benchstat ...
//
// cmd/vsbolt runs the same benchmarks alternating the engines and prints
// their ratios.
func BenchmarkStores(b *testing.B) {
	for _, c := range benchsuite.Cases {
		for _, e := range benchsuite.Engines {
			b.Run(c.Name+"/"+e.Name, func(b *testing.B) { benchsuite.Run(b, e, c) })
		}
	}
}
