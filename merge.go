package vigil

import (
	"encoding/binary"
	"fmt"

	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/compact"
)

// Merger is a merge operator: it lets a write say how to change a key's
// value (add 1 to a counter, append to a list) instead of what the value
// is, without reading it first. DB.Merge and Batch.Merge store such an
// operand; a read combines the key's operands with the value below them,
// oldest first: Merge(key, Merge(key, base, op1), op2)... where base is
// the newest Set below the operands, or nil when there is none (the key
// was never set, or a Delete or DeleteRange ends the chain).
//
// Merge must be associative, with nil as an empty value: for any a (nil
// included), b and c, Merge(k, Merge(k, a, b), c) equals
// Merge(k, a, Merge(k, b, c)). Flushes and compactions rely on it to
// combine adjacent operands into one (Merge(k, older, newer)) before the
// value below them is known, and reads combine them newest first for the
// same reason. It must be deterministic, must not keep or change its
// arguments, and may return one of them. An error (an operand it cannot
// parse, say) makes the read that needed it fail with that error; a
// flush or compaction then keeps the operands as they are, so nothing is
// lost.
//
// Name is recorded in the DB's MANIFEST when a DB first opens with the
// merger: a DB that recorded one opens only with a Merger of the same
// name, since its operands mean nothing to another. Pebble's Merger and
// RocksDB's AssociativeMergeOperator are the models.
type Merger struct {
	// Merge returns the result of applying operand to existing (nil when
	// the key has no value below).
	Merge func(key, existing, operand []byte) ([]byte, error)
	// Name identifies the operator's semantics (and the encoding of its
	// operands); change it when they change.
	Name string
}

// Uint64AddMerger treats values as unsigned 64-bit little-endian integers
// and adds operands to them (RocksDB's "uint64add"): DB.Merge(k,
// 8-byte n) adds n to k. An operand or value of another length is
// ErrMergeOperand.
var Uint64AddMerger = &Merger{Name: "uint64add", Merge: mergeUint64Add}

func mergeUint64Add(key, existing, operand []byte) ([]byte, error) {
	var sum uint64
	if existing != nil {
		if len(existing) != 8 {
			return nil, fmt.Errorf("uint64add: value of key %s has %d bytes, not 8: %w", base.HexKey(key), len(existing), ErrMergeOperand)
		}
		sum = binary.LittleEndian.Uint64(existing)
	}
	if len(operand) != 8 {
		return nil, fmt.Errorf("uint64add: operand for key %s has %d bytes, not 8: %w", base.HexKey(key), len(operand), ErrMergeOperand)
	}
	return binary.LittleEndian.AppendUint64(nil, sum+binary.LittleEndian.Uint64(operand)), nil
}

// PutMerger makes a merge a plain write: the newest operand wins (RocksDB's
// "put" operator, which db_bench's --merge_operator=put measures).
var PutMerger = &Merger{Name: "put", Merge: func(_, _, operand []byte) ([]byte, error) { return operand, nil }}

// AppendMerger appends each operand to the value (RocksDB's
// "stringappend" without a delimiter): a log or a list kept under one key.
var AppendMerger = &Merger{Name: "append", Merge: func(_, existing, operand []byte) ([]byte, error) {
	out := make([]byte, 0, len(existing)+len(operand))
	return append(append(out, existing...), operand...), nil
}}

// BuiltinMerger returns the built-in Merger of that name (Uint64AddMerger,
// PutMerger, AppendMerger), or nil. A DB that records one of them opens
// with it when Options.Merger is nil.
func BuiltinMerger(name string) *Merger {
	for _, m := range []*Merger{Uint64AddMerger, PutMerger, AppendMerger} {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// mergeFunc is the Merger's function for flushes and compactions (nil
// without a Merger: operands are kept as they are).
func (d *DB) mergeFunc() compact.MergeFunc {
	if d.opts.Merger == nil {
		return nil
	}
	return d.opts.Merger.Merge
}
