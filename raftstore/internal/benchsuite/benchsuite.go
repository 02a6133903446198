// Package benchsuite runs hashicorp/raft's store benchmarks
// (github.com/hashicorp/raft/bench, the set raft-boltdb runs) against
// raftstore.Store and raft-boltdb v2, each on a fresh store in a temporary
// directory, for `go test -bench` and for cmd/vsbolt.
package benchsuite

import (
	"fmt"
	"os"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftbench "github.com/hashicorp/raft/bench"
	"github.com/vigildb/vigil/raftstore"
)

// Store is what the benchmarks exercise.
type Store interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

// Engine opens a store of one kind in an existing empty directory.
type Engine struct {
	Name string
	Open func(dir string) (Store, error)
}

// Engines are Vigil's store and raft-boltdb v2, both with their default
// options: every write synced.
var Engines = []Engine{
	{"vigil", func(dir string) (Store, error) { return raftstore.Open(dir+"/vigil", nil) }},
	{"boltdb", func(dir string) (Store, error) {
		return raftboltdb.New(raftboltdb.Options{Path: dir + "/raft.db"})
	}},
}

// Case is one of raftbench's benchmarks.
type Case struct {
	Name string
	Run  func(b *testing.B, s Store)
}

// Cases are raftbench's benchmarks, in raft-boltdb's order.
var Cases = []Case{
	{"FirstIndex", func(b *testing.B, s Store) { raftbench.FirstIndex(b, s) }},
	{"LastIndex", func(b *testing.B, s Store) { raftbench.LastIndex(b, s) }},
	{"GetLog", func(b *testing.B, s Store) { raftbench.GetLog(b, s) }},
	{"StoreLog", func(b *testing.B, s Store) { raftbench.StoreLog(b, s) }},
	{"StoreLogs", func(b *testing.B, s Store) { raftbench.StoreLogs(b, s) }},
	{"DeleteRange", func(b *testing.B, s Store) { raftbench.DeleteRange(b, s) }},
	{"Set", func(b *testing.B, s Store) { raftbench.Set(b, s) }},
	{"Get", func(b *testing.B, s Store) { raftbench.Get(b, s) }},
	{"SetUint64", func(b *testing.B, s Store) { raftbench.SetUint64(b, s) }},
	{"GetUint64", func(b *testing.B, s Store) { raftbench.GetUint64(b, s) }},
}

// Run runs c against a fresh store of engine e (opened and closed outside
// the timed part) and reports allocations.
func Run(b *testing.B, e Engine, c Case) {
	dir, err := os.MkdirTemp("", "raftstore-bench-"+e.Name+"-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := e.Open(dir)
	if err != nil {
		b.Fatal(fmt.Errorf("opening %s: %w", e.Name, err))
	}
	b.ReportAllocs()
	b.ResetTimer()
	c.Run(b, s)
	b.StopTimer()
	if err := s.Close(); err != nil {
		b.Fatal(fmt.Errorf("closing %s: %w", e.Name, err))
	}
}
