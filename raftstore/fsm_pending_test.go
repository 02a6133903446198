package raftstore

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/hashicorp/raft"
	"github.com/vigildb/vigil"
)

// TestFSMGetPending runs a read-modify-write ApplyFunc (each command adds
// its delta to a counter, or deletes or range-deletes it) over raft batches
// of several entries: each entry must see what the entries before it in the
// same batch wrote, and the final state must be the one applying the
// entries one at a time gives.
func TestFSMGetPending(t *testing.T) {
	var f *FSM
	apply := func(l *raft.Log, b *vigil.Batch) any {
		key := l.Data[1:2]
		switch l.Data[0] {
		case 'd':
			b.Delete(key)
			return nil
		case 'r':
			b.DeleteRange([]byte("a"), []byte("c"))
			return nil
		}
		var n uint64
		v, err := f.GetPending(b, key)
		switch {
		case err == nil:
			n = binary.BigEndian.Uint64(v)
		case !errors.Is(err, vigil.ErrNotFound):
			return err
		}
		n += uint64(l.Data[2])
		b.Put(key, binary.BigEndian.AppendUint64(nil, n))
		return n
	}
	var err error
	f, err = OpenFSM("/fsm", &FSMOptions{Vigil: memOptions(vfs.NewMem()), Apply: apply})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmds := []string{"+a\x01", "+a\x02", "+b\x05", "+a\x03", "da", "+a\x04", "+c\x01", "r", "+b\x01", "+c\x02"}
	want := []any{uint64(1), uint64(3), uint64(5), uint64(6), nil, uint64(4), uint64(1), nil, uint64(1), uint64(3)}
	var logs []*raft.Log
	for i, c := range cmds {
		logs = append(logs, &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: []byte(c + "\x00\x00")})
	}
	// Two raft batches: the DB holds the first one's writes when the
	// second is applied, the batch holds the rest.
	got := append(f.ApplyBatch(logs[:4]), f.ApplyBatch(logs[4:])...)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d (%q): response %v, want %v", i+1, cmds[i], got[i], want[i])
		}
	}
	for key, n := range map[string]uint64{"a": 0, "b": 1, "c": 3} {
		v, err := f.Get([]byte(key))
		if n == 0 {
			if !errors.Is(err, vigil.ErrNotFound) {
				t.Errorf("Get(%q) = %x, %v; want not found", key, v, err)
			}
			continue
		}
		if err != nil || binary.BigEndian.Uint64(v) != n {
			t.Errorf("Get(%q) = %x, %v; want %d", key, v, err, n)
		}
	}
}
