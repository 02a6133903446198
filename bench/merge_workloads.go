package bench

import (
	"encoding/binary"
	"fmt"
	"time"
)

// db_bench's merge benchmarks, mergerandom and readrandommergerandom, need
// a merge operator (--merge_operator): kvbench runs Vigil's two that mean
// what RocksDB's of the same name mean.

// The --merge_operator names kvbench runs, as RocksDB spells them.
const (
	mergeUint64Add = "uint64add" // vigil.Uint64AddMerger
	mergePut       = "put"       // vigil.PutMerger
)

// parseMergeOperator reads --merge_operator: RocksDB's names for its
// uint64add and put operators (MergeOperators::CreateFromStringId), which
// Vigil's built-in mergers match, into kvbench's name for them; "" is no
// operator.
func parseMergeOperator(name string) (string, error) {
	switch name {
	case "":
		return "", nil
	case mergeUint64Add, "UInt64AddOperator":
		return mergeUint64Add, nil
	case mergePut, "PutOperator", "put_v1":
		return mergePut, nil
	}
	return "", fmt.Errorf("%q: Vigil runs uint64add and put (also RocksDB's UInt64AddOperator, PutOperator and put_v1)", name)
}

// isMergeBenchmark reports whether benchmark name merges, and so needs
// --merge_operator.
func isMergeBenchmark(name string) bool {
	return name == "mergerandom" || name == "readrandommergerandom"
}

// checkMergeOperator refuses, before anything runs, a merge benchmark
// without --merge_operator (db_bench stops there too, with exit status 1).
func (r *Runner) checkMergeOperator(specs []Spec) error {
	for _, s := range specs {
		if isMergeBenchmark(s.Name) && r.cfg.Engine.MergeOperator == "" {
			return fmt.Errorf("kvbench: %s: --merge_operator must be specified (uint64add or put), as db_bench requires", s.Name)
		}
	}
	return nil
}

// uint64AddOne is the operand the merge benchmarks send with uint64add:
// 1, as the 8-byte little-endian number uint64add takes. db_bench sends a
// --value_size value, which RocksDB's uint64add logs as corrupt and adds
// as 0 unless it has 8 bytes; Vigil's refuses it, so kvbench counts
// instead. Engines copy operands, so the threads share it read-only.
var uint64AddOne = binary.LittleEndian.AppendUint64(nil, 1)

// mergeOperand is the next operand of a merge benchmark: db_bench's next
// value of --value_size, or with uint64add the counter increment 1.
func (r *Runner) mergeOperand(t *threadState) []byte {
	if r.uint64Add() {
		return uint64AddOne
	}
	return t.values.Next(r.cfg.ValueSize)
}

// uint64Add reports whether the merge operator is uint64add.
func (r *Runner) uint64Add() bool {
	op, _ := parseMergeOperator(r.cfg.Engine.MergeOperator)
	return op == mergeUint64Add
}

// mergeNote is the line runDB prints before a merge benchmark's result
// when its operands are not db_bench's ("" when they are).
func (r *Runner) mergeNote(name string) string {
	if !isMergeBenchmark(name) || !r.uint64Add() {
		return ""
	}
	return fmt.Sprintf("%s: --merge_operator=uint64add: each merge adds 1 (an 8-byte little-endian operand), not a --value_size=%d value", name, r.cfg.ValueSize)
}

// mergeKeys is db_bench's merge_keys_: the distinct keys the merge
// benchmarks use, --merge_keys or, when that is not positive, --num.
func (r *Runner) mergeKeys() int64 {
	if r.cfg.MergeKeys > 0 {
		return r.cfg.MergeKeys
	}
	return r.cfg.Num
}

// mergeEngine returns e's merges, or why it has none.
func mergeEngine(e Engine) (MergeEngine, error) {
	me, ok := e.(MergeEngine)
	if !ok {
		return nil, fmt.Errorf("the engine (%T) has no merge operator: it cannot run the merge benchmarks", e)
	}
	return me, nil
}

// mergeRandom is db_bench's MergeRandom: per merge one draw picks the DB
// and one the key, of --merge_keys keys; the operand is mergeOperand's.
// Key and operand bytes count, as in db_bench.
func mergeRandom(r *Runner, e Engine, t *threadState) error {
	me, err := mergeEngine(e)
	if err != nil {
		return err
	}
	lim := r.newLimiter(r.readWrites(), true)
	n := uint64(max(r.mergeKeys(), 1))
	timing := t.timing() || t.st != nil
	var start time.Time
	for !lim.done(1) {
		t.rng.Next()
		k := t.keys.KeyIn(t.rng.Next()%n, int64(n))
		v := r.mergeOperand(t)
		if timing {
			start = time.Now()
		}
		if err := me.Merge(k, v, r.cfg.Sync); err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		t.st.wrote(1, batchBytes(1, len(k), len(v)), start)
		t.bytes += int64(len(k) + len(v))
		t.merges++
		t.ops++
		t.tick(opMerge, start, 1)
	}
	return nil
}

// readRandomMergeRandom is db_bench's ReadRandomMergeRandom: per operation
// one draw picks the DB, one the key (of --merge_keys keys) and one
// whether it is a merge (--mergereadpercent percent are) or a Get. Reads
// found are hits; maxlength is the longest value read. No bytes count, as
// in db_bench.
func readRandomMergeRandom(r *Runner, e Engine, t *threadState) error {
	me, err := mergeEngine(e)
	if err != nil {
		return err
	}
	lim := r.newLimiter(r.readWrites(), true)
	n := uint64(max(r.mergeKeys(), 1))
	timing := t.timing() || t.st != nil
	var start time.Time
	for !lim.done(1) {
		t.rng.Next()
		k := t.keys.KeyIn(t.rng.Next()%n, int64(n))
		merge := int(t.rng.Next()%100) < r.cfg.MergeReadPercent
		if timing {
			start = time.Now()
		}
		if merge {
			v := r.mergeOperand(t)
			if err := me.Merge(k, v, r.cfg.Sync); err != nil {
				return fmt.Errorf("merge: %w", err)
			}
			t.st.wrote(1, batchBytes(1, len(k), len(v)), start)
			t.merges++
			t.ops++
			t.tick(opMerge, start, 1)
			continue
		}
		found, vlen, err := e.Get(k, &t.valBuf)
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		t.st.got(found, vlen, start)
		if found {
			t.found++
			t.maxLen = max(t.maxLen, vlen)
		}
		t.reads++
		t.ops++
		t.tick(opRead, start, 1)
	}
	return nil
}
