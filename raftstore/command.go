package raftstore

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/sst"
)

// OpKind is the kind of one write in a command: vigil.BatchKind, whose
// numbers (1 put, 2 delete, 3 delete-range) are part of the command format.
type OpKind = vigil.BatchKind

// The kinds of write a command holds.
const (
	// OpPut sets Key to Value.
	OpPut = vigil.BatchPut
	// OpDelete removes Key.
	OpDelete = vigil.BatchDelete
	// OpDeleteRange removes every key in [Key, Value).
	OpDeleteRange = vigil.BatchDeleteRange
)

// Op is one write of a command: a put of Key=Value, a delete of Key, or a
// range deletion of [Key, Value).
type Op struct {
	Kind  OpKind
	Key   []byte
	Value []byte
}

// The command format, version 1 (a raft log entry's Data):
//
//	version(1) | uvarint count | count × op
//	op = kind u8 | uvarint len | key | [uvarint len | value]   (value: put and delete-range)
const (
	commandFormatV1 = 1
	// minOpBytes is the smallest encoded op (a delete of the empty key):
	// it bounds the op count a decoder believes before it has seen the ops.
	minOpBytes = 2
)

// AppendCommand appends the encoding of ops (a command of format version 1)
// to dst and returns the extended slice. The FSM applies the ops of one
// command atomically, in order.
func AppendCommand(dst []byte, ops ...Op) []byte {
	dst = append(dst, commandFormatV1)
	dst = binary.AppendUvarint(dst, uint64(len(ops)))
	for _, op := range ops {
		dst = append(dst, byte(op.Kind))
		dst = binary.AppendUvarint(dst, uint64(len(op.Key)))
		dst = append(dst, op.Key...)
		if op.Kind != OpDelete {
			dst = binary.AppendUvarint(dst, uint64(len(op.Value)))
			dst = append(dst, op.Value...)
		}
	}
	return dst
}

// DecodeCommand calls fn with each op of the command b, in order, and
// returns the first error fn returns. An op's Key and Value alias b. A
// command that does not decode (unknown version or kind, a length past the
// end, trailing bytes) gives an error wrapping vigil.ErrCorruption, after
// fn saw the ops before the damage; DecodeCommand never panics and never
// allocates. Validate the whole command (e.g. with fn returning nil) before
// acting on its ops if part of it must not be applied alone.
func DecodeCommand(b []byte, fn func(Op) error) error {
	if len(b) < 2 {
		return corruptf("command of %d bytes is shorter than its header", len(b))
	}
	if b[0] != commandFormatV1 {
		return corruptf("command format version %d is unknown (this build reads version %d)", b[0], commandFormatV1)
	}
	count, n := binary.Uvarint(b[1:])
	if n <= 0 {
		return corruptf("command op count: bad uvarint")
	}
	p := 1 + n
	if count > uint64(len(b)-p)/minOpBytes {
		return corruptf("command claims %d ops in %d bytes", count, len(b)-p)
	}
	field := func(what string, i uint64) ([]byte, error) {
		m, n := binary.Uvarint(b[p:])
		if n <= 0 {
			return nil, corruptf("command op %d: %s length: bad uvarint at offset %d", i, what, p)
		}
		p += n
		if m > uint64(len(b)-p) {
			return nil, corruptf("command op %d: %s of %d bytes at offset %d, but %d bytes remain", i, what, m, p, len(b)-p)
		}
		f := b[p : p+int(m) : p+int(m)]
		p += int(m)
		return f, nil
	}
	for i := uint64(0); i < count; i++ {
		if p >= len(b) {
			return corruptf("command op %d of %d: no bytes left", i, count)
		}
		op := Op{Kind: OpKind(b[p])}
		p++
		var err error
		switch op.Kind {
		case OpPut, OpDeleteRange:
			if op.Key, err = field("key", i); err == nil {
				op.Value, err = field("value", i)
			}
		case OpDelete:
			op.Key, err = field("key", i)
		default:
			err = corruptf("command op %d: unknown kind %d", i, op.Kind)
		}
		if err != nil {
			return err
		}
		if err := fn(op); err != nil {
			return err
		}
	}
	if p != len(b) {
		return corruptf("command has %d trailing bytes after its %d ops", len(b)-p, count)
	}
	return nil
}

// ApplyCommand is the FSM's default ApplyFunc: it decodes l.Data with
// DecodeCommand and adds its ops to b. A command that does not decode, puts
// or deletes a key under ReservedPrefix, has an inverted range or an entry
// too large for Vigil adds nothing, and its error (wrapping
// vigil.ErrCorruption or vigil.ErrInvalidArgument) is the response. A range
// deletion skips the reserved keys: it never removes the FSM's own state.
// On success the response is nil.
func ApplyCommand(l *raft.Log, b *vigil.Batch) any {
	if err := DecodeCommand(l.Data, checkOp); err != nil {
		return fmt.Errorf("raftstore: command at index %d: %w", l.Index, err)
	}
	_ = DecodeCommand(l.Data, func(op Op) error {
		switch op.Kind {
		case OpPut:
			b.Put(op.Key, op.Value)
		case OpDelete:
			b.Delete(op.Key)
		case OpDeleteRange:
			// The parts of [Key, Value) below and above the reserved keys.
			if bytes.Compare(op.Key, reservedStart) < 0 {
				b.DeleteRange(op.Key, minBytes(op.Value, reservedStart))
			}
			if bytes.Compare(op.Value, reservedEnd) > 0 {
				b.DeleteRange(maxBytes(op.Key, reservedEnd), op.Value)
			}
		}
		return nil
	})
	return nil
}

func checkOp(op Op) error {
	if n := len(op.Key) + len(op.Value); n > sst.MaxEntrySize {
		return fmt.Errorf("%w: %s of %d bytes exceeds Vigil's maximum entry of %d", vigil.ErrInvalidArgument, op.Kind, n, sst.MaxEntrySize)
	}
	switch op.Kind {
	case OpPut, OpDelete:
		if bytes.HasPrefix(op.Key, reservedStart) {
			return fmt.Errorf("%w: %s of key %q under the FSM's reserved prefix", vigil.ErrInvalidArgument, op.Kind, op.Key)
		}
	case OpDeleteRange:
		if bytes.Compare(op.Key, op.Value) > 0 {
			return fmt.Errorf("%w: delete-range end %q before start %q", vigil.ErrInvalidArgument, op.Value, op.Key)
		}
	}
	return nil
}

func minBytes(a, b []byte) []byte {
	if bytes.Compare(a, b) < 0 {
		return a
	}
	return b
}

func maxBytes(a, b []byte) []byte {
	if bytes.Compare(a, b) > 0 {
		return a
	}
	return b
}
