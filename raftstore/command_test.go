package raftstore

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/vigildb/vigil"
)

var commandCases = [][]Op{
	{},
	{{Kind: OpPut, Key: []byte("k"), Value: []byte("v")}},
	{{Kind: OpDelete, Key: []byte("gone")}, {Kind: OpPut, Key: nil, Value: nil}},
	{{Kind: OpDeleteRange, Key: []byte("a"), Value: []byte("c")}, {Kind: OpPut, Key: []byte("b"), Value: bytes.Repeat([]byte("x"), 300)}},
}

func decodeOps(t testing.TB, b []byte) ([]Op, error) {
	var ops []Op
	err := DecodeCommand(b, func(op Op) error { ops = append(ops, op); return nil })
	return ops, err
}

func TestCommandRoundTrip(t *testing.T) {
	for i, ops := range commandCases {
		got, err := decodeOps(t, AppendCommand(nil, ops...))
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if len(got) != len(ops) {
			t.Fatalf("case %d: %d ops, want %d", i, len(got), len(ops))
		}
		for j := range ops {
			if got[j].Kind != ops[j].Kind || !bytes.Equal(got[j].Key, ops[j].Key) || (ops[j].Kind != OpDelete && !bytes.Equal(got[j].Value, ops[j].Value)) {
				t.Errorf("case %d op %d: %+v, want %+v", i, j, got[j], ops[j])
			}
		}
	}
	// Format version 1, pinned.
	enc := AppendCommand(nil, Op{Kind: OpPut, Key: []byte("k"), Value: []byte("v")}, Op{Kind: OpDelete, Key: []byte("d")})
	if got, want := hex.EncodeToString(enc), "0102"+"01016b0176"+"020164"; got != want {
		t.Fatalf("encoding %s, want %s", got, want)
	}
}

func TestDecodeCommandCorrupt(t *testing.T) {
	good := AppendCommand(nil, commandCases[3]...)
	bad := map[string][]byte{
		"empty":         nil,
		"version 2":     {2, 0},
		"count too big": {1, 100, 2, 0},
		"kind 9":        {1, 1, 9, 0},
		"key too long":  {1, 1, 2, 5, 'a'},
		"trailing":      append(AppendCommand(nil, commandCases[1]...), 0),
	}
	for i := range len(good) {
		bad[fmt.Sprintf("prefix %d", i)] = good[:i]
	}
	for name, b := range bad {
		if _, err := decodeOps(t, b); !errors.Is(err, vigil.ErrCorruption) {
			t.Errorf("%s (%x): %v, want ErrCorruption", name, b, err)
		}
	}
}

func TestApplyCommandChecks(t *testing.T) {
	db, err := vigil.Open("/db", memOptions(newMemFS()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for name, ops := range map[string][]Op{
		"put reserved":    {{Kind: OpPut, Key: []byte("ok"), Value: nil}, {Kind: OpPut, Key: appliedKey, Value: []byte("x")}},
		"delete reserved": {{Kind: OpDelete, Key: []byte(ReservedPrefix + "x")}},
		"inverted range":  {{Kind: OpDeleteRange, Key: []byte("b"), Value: []byte("a")}},
		"not a command":   nil,
	} {
		data := AppendCommand(nil, ops...)
		if ops == nil {
			data = []byte{7}
		}
		b := db.NewBatch()
		resp := ApplyCommand(&raft.Log{Index: 3, Data: data}, b)
		if err, ok := resp.(error); !ok || err == nil {
			t.Errorf("%s: response %v, want an error", name, resp)
		}
		if b.Count() != 0 {
			t.Errorf("%s: a rejected command added %d writes", name, b.Count())
		}
	}
	// A range over everything keeps the reserved keys.
	b := db.NewBatch()
	b.Put(appliedKey, []byte("12345678"))
	b.Put([]byte("a"), nil)
	b.Put([]byte("\xff\xffzz"), nil)
	if err := db.Apply(b, nil); err != nil {
		t.Fatal(err)
	}
	b = db.NewBatch()
	if resp := ApplyCommand(&raft.Log{Data: AppendCommand(nil, Op{Kind: OpDeleteRange, Key: nil, Value: []byte("\xff\xff\xff")})}, b); resp != nil {
		t.Fatal(resp)
	}
	if err := db.Apply(b, nil); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{"a": false, "\xff\xffzz": false, string(appliedKey): true} {
		if ok, err := db.Has([]byte(key)); err != nil || ok != want {
			t.Errorf("Has(%q) = %v, %v; want %v", key, ok, err, want)
		}
	}
}

// FuzzDecodeCommand: arbitrary bytes never panic; what decodes re-encodes
// to the same ops.
func FuzzDecodeCommand(f *testing.F) {
	for _, ops := range commandCases {
		f.Add(AppendCommand(nil, ops...))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ops, err := decodeOps(t, b)
		if err != nil {
			if !errors.Is(err, vigil.ErrCorruption) {
				t.Fatalf("error not wrapping ErrCorruption: %v", err)
			}
			return
		}
		again, err := decodeOps(t, AppendCommand(nil, ops...))
		if err != nil || len(again) != len(ops) {
			t.Fatalf("re-encoding: %d ops, %v; want %d", len(again), err, len(ops))
		}
		for i := range ops {
			if again[i].Kind != ops[i].Kind || !bytes.Equal(again[i].Key, ops[i].Key) || !bytes.Equal(again[i].Value, ops[i].Value) {
				t.Fatalf("op %d changed: %+v -> %+v", i, ops[i], again[i])
			}
		}
	})
}
