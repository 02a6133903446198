package raftstore_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	"github.com/vigildb/vigil/raftstore"
)

// The log store as raft uses it: append entries (one synced batch), read
// them back, and compact the log's head after a snapshot (one synced range
// deletion).
func ExampleStore() {
	dir, err := os.MkdirTemp("", "raftstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := raftstore.Open(filepath.Join(dir, "raft"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	var logs []*raft.Log
	for i := uint64(1); i <= 5; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprint("cmd", i))})
	}
	if err := store.StoreLogs(logs); err != nil {
		log.Fatal(err)
	}
	var l raft.Log
	if err := store.GetLog(3, &l); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("entry 3: term %d, %s\n", l.Term, l.Data)

	if err := store.DeleteRange(1, 3); err != nil {
		log.Fatal(err)
	}
	first, _ := store.FirstIndex()
	last, _ := store.LastIndex()
	fmt.Println("log:", first, "to", last)
	fmt.Println("entry 2:", store.GetLog(2, &l))

	_ = store.SetUint64([]byte("CurrentTerm"), 1) // the stable store
	term, _ := store.GetUint64([]byte("CurrentTerm"))
	fmt.Println("term:", term)
	// Output:
	// entry 3: term 1, cmd3
	// log: 4 to 5
	// entry 2: log not found
	// term: 1
}

// Two replicas' FSMs that applied the same entries, one batch at a time or
// all at once, have the same checksum.
func ExampleFSM_Checksum() {
	dir, err := os.MkdirTemp("", "raftstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	a, err := raftstore.OpenFSM(filepath.Join(dir, "a"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := raftstore.OpenFSM(filepath.Join(dir, "b"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	cmds := [][]byte{
		raftstore.AppendCommand(nil, raftstore.Op{Kind: raftstore.OpPut, Key: []byte("x"), Value: []byte("1")}),
		raftstore.AppendCommand(nil,
			raftstore.Op{Kind: raftstore.OpPut, Key: []byte("y"), Value: []byte("2")},
			raftstore.Op{Kind: raftstore.OpPut, Key: []byte("z"), Value: []byte("3")}),
		raftstore.AppendCommand(nil, raftstore.Op{Kind: raftstore.OpDelete, Key: []byte("x")}),
	}
	var logs []*raft.Log
	for i, c := range cmds {
		logs = append(logs, &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: c})
	}
	a.ApplyBatch(logs) // one Vigil batch
	for _, l := range logs {
		b.Apply(l) // three
	}

	v, _ := a.Get([]byte("y"))
	fmt.Printf("y=%s, applied: %d %d\n", v, a.AppliedIndex(), b.AppliedIndex())
	ca, _ := a.Checksum()
	cb, _ := b.Checksum()
	fmt.Println("checksums equal:", ca == cb)
	// Output:
	// y=2, applied: 3 3
	// checksums equal: true
}
