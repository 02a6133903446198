// Package benchsuite runs hashicorp/raft's store benchmarks
// (github.com/hashicorp/raft/bench, the set raft-boltdb runs) against
// raftstore.Store, raft-boltdb v2 and raft-wal, each on a fresh store in a
// temporary directory, for `go test -bench` and for cmd/raftbench; and a
// sustained-append workload (RunSustained) shaped like a raft leader's log.
package benchsuite

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
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
	// Contiguous: the store accepts only consecutive indexes from 1 (index
	// 0 or a gap is an error) and deletes only a prefix or a suffix of the
	// log: all that raft itself ever asks (raft-wal).
	Contiguous bool
}

// Engines are the three stores with their default options, every write
// durable before it returns:
//
//   - vigil: raftstore.Store. StoreLogs is one Vigil batch applied with
//     Sync (one WAL record, one fdatasync while it lands in the WAL's
//     preallocated zero reserve, an fsync otherwise); DeleteRange is one
//     synced range deletion; Set/SetUint64 one synced put.
//   - boltdb: raft-boltdb v2 (bbolt, NoSync false). Every StoreLogs,
//     DeleteRange and Set is one bbolt read-write transaction, whose
//     commit writes the dirty pages, fdatasyncs, writes the meta page and
//     fdatasyncs again.
//   - raftwal: hashicorp/raft-wal. StoreLogs writes the entries and a
//     commit frame to the tail segment file (preallocated, 64 MiB by
//     default) and fsyncs it (the first sync of a new segment also fsyncs
//     the directory); a full segment is sealed and the next one created in
//     the background, after a synced commit to its bbolt meta file, and the
//     next StoreLogs waits for that. DeleteRange of a prefix or suffix is
//     one synced bbolt commit of the new bounds (files wholly outside are
//     removed, and the directory fsynced, once no reader holds them).
//     Set/SetUint64 are one synced bbolt transaction in that meta file.
var Engines = []Engine{
	{Name: "vigil", Open: func(dir string) (Store, error) { return raftstore.Open(dir+"/vigil", nil) }},
	{Name: "boltdb", Open: func(dir string) (Store, error) {
		return raftboltdb.New(raftboltdb.Options{Path: dir + "/raft.db"})
	}},
	{Name: "raftwal", Open: openRaftWAL, Contiguous: true},
}

// EngineByName returns the engine called name.
func EngineByName(name string) (Engine, bool) {
	for _, e := range Engines {
		if e.Name == name {
			return e, true
		}
	}
	return Engine{}, false
}

// raftWAL is a raft-wal WAL and the bbolt meta store it was opened with:
// WAL.Close (v0.4.0) leaves the meta store open, so Close closes it too.
type raftWAL struct {
	*wal.WAL
	meta *metadb.BoltMetaDB
}

func openRaftWAL(dir string) (Store, error) {
	dir = filepath.Join(dir, "raftwal")
	if err := os.Mkdir(dir, 0o755); err != nil { // wal.Open wants an existing directory
		return nil, err
	}
	meta := &metadb.BoltMetaDB{} // raft-wal's default meta store, kept to close it
	w, err := wal.Open(dir, wal.WithMetaStore(meta),
		wal.WithLogger(hclog.New(&hclog.LoggerOptions{Name: "raft-wal", Level: hclog.Warn})))
	if err != nil {
		_ = meta.Close()
		return nil, err
	}
	return raftWAL{w, meta}, nil
}

func (w raftWAL) Close() error {
	err := w.WAL.Close()
	if cerr := w.meta.Close(); err == nil {
		err = cerr
	}
	return err
}

// Case is one of the benchmarks.
type Case struct {
	Name string
	Run  func(b *testing.B, s Store)
	// Irregular: the case stores index 0 or non-consecutive indexes, so it
	// cannot run on a Contiguous engine.
	Irregular bool
}

// Supports reports whether c can run on e.
func (c Case) Supports(e Engine) bool { return !c.Irregular || !e.Contiguous }

// Cases are raftbench's benchmarks, in raft-boltdb's order, and
// DeleteRangePrefix. Two of raftbench's cannot run on raft-wal: StoreLog
// starts at index 0, and DeleteRange stores indexes 10n..10n+2 (gaps of 7)
// and deletes 10n..10n+9. So DeleteRangePrefix (not one of raft's helpers)
// measures what raft's log compaction does on every engine: a consecutive
// log of 10·b.N entries (stored before the timer starts) whose oldest 10
// entries are deleted per iteration. (StoreLogs, three entries a call from
// index 1, runs everywhere.)
var Cases = []Case{
	{Name: "FirstIndex", Run: func(b *testing.B, s Store) { raftbench.FirstIndex(b, s) }},
	{Name: "LastIndex", Run: func(b *testing.B, s Store) { raftbench.LastIndex(b, s) }},
	{Name: "GetLog", Run: func(b *testing.B, s Store) { raftbench.GetLog(b, s) }},
	{Name: "StoreLog", Run: func(b *testing.B, s Store) { raftbench.StoreLog(b, s) }, Irregular: true},
	{Name: "StoreLogs", Run: func(b *testing.B, s Store) { raftbench.StoreLogs(b, s) }},
	{Name: "DeleteRange", Run: func(b *testing.B, s Store) { raftbench.DeleteRange(b, s) }, Irregular: true},
	{Name: "DeleteRangePrefix", Run: deleteRangePrefix},
	{Name: "Set", Run: func(b *testing.B, s Store) { raftbench.Set(b, s) }},
	{Name: "Get", Run: func(b *testing.B, s Store) { raftbench.Get(b, s) }},
	{Name: "SetUint64", Run: func(b *testing.B, s Store) { raftbench.SetUint64(b, s) }},
	{Name: "GetUint64", Run: func(b *testing.B, s Store) { raftbench.GetUint64(b, s) }},
}

// deleteRangePrefix stores entries 1..10·b.N (in batches of 64, raft's
// MaxAppendEntries), then deletes [10n+1, 10n+10] for n < b.N: the log's
// oldest ten entries each time, as a compaction does.
func deleteRangePrefix(b *testing.B, s Store) {
	b.StopTimer()
	const per, batch = 10, 64
	total := uint64(per * b.N)
	logs := make([]*raft.Log, 0, batch)
	for i := uint64(1); i <= total; i++ {
		logs = append(logs, &raft.Log{Index: i, Data: []byte("data")})
		if len(logs) == batch || i == total {
			if err := s.StoreLogs(logs); err != nil {
				b.Fatalf("err: %s", err)
			}
			logs = logs[:0]
		}
	}
	b.StartTimer()
	for n := uint64(0); n < uint64(b.N); n++ {
		if err := s.DeleteRange(per*n+1, per*n+per); err != nil {
			b.Fatalf("err: %s", err)
		}
	}
}

// TempDir is the directory Run makes its stores' directories in; empty
// means os.TempDir().
var TempDir string

// Run runs c against a fresh store of engine e (opened and closed outside
// the timed part) and reports allocations. It skips a case e does not
// support.
func Run(b *testing.B, e Engine, c Case) {
	if !c.Supports(e) {
		b.Skipf("%s stores index 0 or gapped indexes, which %s refuses", c.Name, e.Name)
	}
	dir, err := os.MkdirTemp(TempDir, "raftstore-bench-"+e.Name+"-")
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
