package vigil

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

func u64(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }

// getOrAbsent returns key's value, failing the test on any error but
// ErrNotFound (returned as "<absent>").
func getOrAbsent(t *testing.T, get func([]byte) ([]byte, error), key string) string {
	t.Helper()
	v, err := get([]byte(key))
	if errors.Is(err, ErrNotFound) {
		return "<absent>"
	}
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	return string(v)
}

// scanBoth returns the DB's keys and values forward and checks that the
// backward scan agrees.
func scanBoth(t *testing.T, newIter func(*IterOptions) (*Iterator, error)) string {
	t.Helper()
	it, err := newIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var fwd, bwd []string
	for ok := it.First(); ok; ok = it.Next() {
		fwd = append(fwd, fmt.Sprintf("%s=%s", it.Key(), it.Value()))
	}
	for ok := it.Last(); ok; ok = it.Prev() {
		bwd = append([]string{fmt.Sprintf("%s=%s", it.Key(), it.Value())}, bwd...)
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	if f, b := strings.Join(fwd, " "), strings.Join(bwd, " "); f != b {
		t.Fatalf("forward scan %q, backward %q", f, b)
	}
	return strings.Join(fwd, " ")
}

// TestMergeChains: operands combine with a Set, a Delete, a range deletion
// or nothing below, whether they sit in the memtable, L0 or the bottom,
// for Get, both scan directions and snapshots.
func TestMergeChains(t *testing.T) {
	for _, stage := range []string{"memtable", "flushed", "compacted"} {
		t.Run(stage, func(t *testing.T) {
			db, err := Open("db", &Options{FS: vfs.NewMem(), Merger: AppendMerger})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			w := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			w(db.Put([]byte("a"), []byte("A"), nil))
			w(db.Merge([]byte("a"), []byte("1"), nil))
			w(db.Merge([]byte("b"), []byte("1"), nil)) // over nothing
			w(db.Put([]byte("c"), []byte("C"), nil))
			w(db.Delete([]byte("c"), nil))
			w(db.Merge([]byte("c"), []byte("1"), nil)) // over a deletion
			w(db.Put([]byte("d"), []byte("D"), nil))
			w(db.DeleteRange([]byte("d"), []byte("e"), nil))
			w(db.Merge([]byte("d"), []byte("1"), nil)) // over a range deletion
			snap := db.NewSnapshot()
			defer snap.Close()
			w(db.Merge([]byte("a"), []byte("2"), nil))
			w(db.Merge([]byte("b"), []byte("2"), nil))
			w(db.Merge([]byte("e"), []byte("x"), nil))
			w(db.DeleteRange([]byte("e"), []byte("f"), nil)) // deletes an operand
			switch stage {
			case "flushed":
				w(db.Flush())
			case "compacted":
				w(db.Flush())
				w(db.Compact(nil, nil))
			}
			want := "a=A12 b=12 c=1 d=1"
			if got := scanBoth(t, db.NewIter); got != want {
				t.Errorf("scan: %q, want %q", got, want)
			}
			for _, kv := range strings.Fields(want) {
				k, v, _ := strings.Cut(kv, "=")
				if got := getOrAbsent(t, db.Get, k); got != v {
					t.Errorf("Get(%s) = %q, want %q", k, got, v)
				}
			}
			if got := getOrAbsent(t, db.Get, "e"); got != "<absent>" {
				t.Errorf("Get(e) = %q after its range deletion", got)
			}
			if got, want := scanBoth(t, snap.NewIter), "a=A1 b=1 c=1 d=1"; got != want {
				t.Errorf("snapshot scan: %q, want %q", got, want)
			}
			if got := getOrAbsent(t, snap.Get, "a"); got != "A1" {
				t.Errorf("snapshot Get(a) = %q, want A1", got)
			}
		})
	}
}

// TestMergeCounterAcrossLevels: a counter's operands spread over the
// memtable, L0 and lower levels add up, before and after a full
// compaction, and a reopen.
func TestMergeCounterAcrossLevels(t *testing.T) {
	fs := vfs.NewMem()
	opts := &Options{FS: fs, Merger: Uint64AddMerger, WriteBufferSize: minWriteBufferSize}
	db, err := Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	const keys, rounds = 50, 40
	for r := range rounds {
		for k := range keys {
			if err := db.Merge([]byte(fmt.Sprintf("k%03d", k)), u64(uint64(k+1)), nil); err != nil {
				t.Fatal(err)
			}
		}
		if r%7 == 6 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if r == 20 {
			if err := db.Compact(nil, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(what string) {
		t.Helper()
		for k := range keys {
			v, err := db.Get([]byte(fmt.Sprintf("k%03d", k)))
			if err != nil || binary.LittleEndian.Uint64(v) != uint64(rounds*(k+1)) {
				t.Fatalf("%s: k%03d = %x, %v; want %d", what, k, v, err, rounds*(k+1))
			}
		}
	}
	check("spread")
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	check("compacted")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open("db", &Options{FS: fs}); err != nil { // the recorded built-in merger
		t.Fatal(err)
	}
	defer db.Close()
	check("reopened without Options.Merger")
}

// TestMergeRefusals: merges need a Merger; a DB keeps the merger it
// recorded; a Merger needs format version 2.
func TestMergeRefusals(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Merge([]byte("k"), []byte("v"), nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Merge without a Merger: %v", err)
	}
	b := db.NewBatch()
	b.Put([]byte("p"), []byte("v"))
	b.Merge([]byte("k"), []byte("v"))
	if err := db.Apply(b, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("batch with a merge without a Merger: %v", err)
	}
	if _, err := db.Get([]byte("p")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the refused batch's put is visible: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	custom := &Merger{Name: "mine", Merge: AppendMerger.Merge}
	if db, err = Open("db", &Options{FS: fs, Merger: custom}); err != nil {
		t.Fatal(err)
	}
	if err := db.Merge([]byte("k"), []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open("db", &Options{FS: fs, Merger: AppendMerger}); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), `"mine"`) {
		t.Fatalf("open with another merger: %v", err)
	}
	// Without one, the DB opens; reads of operands fail, others work.
	if db, err = Open("db", &Options{FS: fs}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Get([]byte("k")); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Get of an operand without its merger: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open("db2", &Options{FS: fs, Merger: AppendMerger, FormatVersion: 1}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a Merger with format version 1: %v", err)
	}
	if _, err := Open("db2", &Options{FS: fs, Merger: &Merger{Name: "no func"}}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a Merger without Merge: %v", err)
	}
}

// TestMergeRaisesFormatVersion: a format-1 DB opened with a Merger is
// raised to format 2, which a build of format 1 would refuse.
func TestMergeRaisesFormatVersion(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs, FormatVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Put([]byte("k"), u64(5), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open("db", &Options{FS: fs, Merger: Uint64AddMerger}); err != nil {
		t.Fatal(err)
	}
	if got := db.vs.formatVersion; got != 2 {
		t.Fatalf("format version %d after opening with a Merger, want 2", got)
	}
	if err := db.Merge([]byte("k"), u64(2), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open("db", &Options{FS: fs}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.vs.formatVersion != 2 || db.vs.merger != "uint64add" {
		t.Fatalf("reopened: format version %d, merger %q", db.vs.formatVersion, db.vs.merger)
	}
	if v, err := db.Get([]byte("k")); err != nil || binary.LittleEndian.Uint64(v) != 7 {
		t.Fatalf("k = %x, %v; want 7", v, err)
	}
}

// TestMergeErrors: an operand the merger cannot read fails the reads that
// need it, is kept through flushes and compactions, and a Put ends it.
func TestMergeErrors(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), Merger: Uint64AddMerger})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Merge([]byte("bad"), []byte("three bytes? no, more"), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Merge([]byte("bad"), u64(1), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Merge([]byte("good"), u64(1), nil); err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"memtable", "flush", "compact"} {
		switch step {
		case "flush":
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		case "compact":
			if err := db.Compact(nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Get([]byte("bad")); !errors.Is(err, ErrMergeOperand) {
			t.Fatalf("%s: Get(bad) = %v, want ErrMergeOperand", step, err)
		}
		for _, backward := range []bool{false, true} {
			it, err := db.NewIter(nil)
			if err != nil {
				t.Fatal(err)
			}
			if backward {
				it.Last() // good
				it.Prev()
			} else {
				it.First()
			}
			if err := it.Error(); !errors.Is(err, ErrMergeOperand) {
				t.Fatalf("%s: iterator (backward %v) error %v, want ErrMergeOperand", step, backward, err)
			}
			it.Close()
		}
		if v, err := db.Get([]byte("good")); err != nil || binary.LittleEndian.Uint64(v) != 1 {
			t.Fatalf("%s: Get(good) = %x, %v", step, v, err)
		}
	}
	if err := db.Put([]byte("bad"), u64(10), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Merge([]byte("bad"), u64(1), nil); err != nil {
		t.Fatal(err)
	}
	if v, err := db.Get([]byte("bad")); err != nil || binary.LittleEndian.Uint64(v) != 11 {
		t.Fatalf("after a Put: Get(bad) = %x, %v; want 11", v, err)
	}
}

// replayLog records Replay's calls.
type replayLog struct{ calls []string }

func (r *replayLog) Put(k, v []byte) error { r.calls = append(r.calls, "put "+string(k)); return nil }
func (r *replayLog) Delete(k []byte) error { r.calls = append(r.calls, "del "+string(k)); return nil }
func (r *replayLog) DeleteRange(s, e []byte) error {
	r.calls = append(r.calls, "delrange "+string(s))
	return nil
}

type mergeReplayLog struct{ replayLog }

func (r *mergeReplayLog) Merge(k, v []byte) error {
	r.calls = append(r.calls, "merge "+string(k)+"="+string(v))
	return nil
}

// TestMergeReplay: Replay hands merges to a BatchMergeHandler and refuses
// a handler without Merge.
func TestMergeReplay(t *testing.T) {
	var b Batch
	b.Put([]byte("a"), nil)
	b.Merge([]byte("b"), []byte("op"))
	var m mergeReplayLog
	if err := b.Replay(&m); err != nil || strings.Join(m.calls, ",") != "put a,merge b=op" {
		t.Fatalf("Replay: %v, %q", err, m.calls)
	}
	var p replayLog
	if err := b.Replay(&p); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Replay to a handler without Merge: %v", err)
	}
	if k, _, _, _ := b.Reader().Next(); k != BatchPut {
		t.Fatal("first record not a put")
	}
}

// TestMergeTxn: a transaction's operands go onto its snapshot's value for
// its own reads, and onto the DB's at commit.
func TestMergeTxn(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), Merger: Uint64AddMerger})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Put([]byte("n"), u64(10), nil); err != nil {
		t.Fatal(err)
	}
	txn := db.NewTxn()
	if err := txn.Merge([]byte("n"), u64(5)); err != nil {
		t.Fatal(err)
	}
	if err := txn.Merge([]byte("m"), u64(2)); err != nil {
		t.Fatal(err)
	}
	if err := db.Merge([]byte("n"), u64(100), nil); err != nil { // after the snapshot
		t.Fatal(err)
	}
	for k, want := range map[string]uint64{"n": 15, "m": 2} {
		if v, err := txn.Get([]byte(k)); err != nil || binary.LittleEndian.Uint64(v) != want {
			t.Fatalf("txn Get(%s) = %x, %v; want %d", k, v, err, want)
		}
	}
	it, err := txn.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for ok := it.Last(); ok; ok = it.Prev() {
		got = append(got, fmt.Sprintf("%s=%d", it.Key(), binary.LittleEndian.Uint64(it.Value())))
	}
	it.Close()
	if strings.Join(got, " ") != "n=15 m=2" {
		t.Fatalf("txn scan backward: %q", got)
	}
	// It read n, which a commit after its snapshot wrote: a conflict.
	if err := txn.Commit(nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("commit after reading a key written since: %v", err)
	}
	// Blind merges conflict with nothing.
	txn = db.NewTxn()
	if err := txn.Merge([]byte("n"), u64(5)); err != nil {
		t.Fatal(err)
	}
	if err := db.Merge([]byte("n"), u64(1000), nil); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(nil); err != nil {
		t.Fatal(err)
	}
	if v, err := db.Get([]byte("n")); err != nil || binary.LittleEndian.Uint64(v) != 1115 {
		t.Fatalf("n = %x, %v; want 1115", v, err)
	}
}

// TestMergeLargeBatch: a batch too large for the memtable (applied as a
// flushable batch of its own) holding several operands of a key, over a
// value in the memtable, reads and flushes as one would expect.
func TestMergeLargeBatch(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), Merger: AppendMerger, WriteBufferSize: minWriteBufferSize})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Put([]byte("k"), []byte("base"), nil); err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	pad := strings.Repeat("p", 1000)
	for i := range 200 {
		b.Put([]byte(fmt.Sprintf("pad%04d", i)), []byte(pad))
		if i%50 == 0 {
			b.Merge([]byte("k"), []byte(fmt.Sprintf("+%d", i)))
		}
	}
	if b.memSize <= minWriteBufferSize/flushableBatchFraction {
		t.Fatalf("batch of %d memtable bytes is not large", b.memSize)
	}
	if err := db.Apply(b, nil); err != nil {
		t.Fatal(err)
	}
	want := "base+0+50+100+150"
	for _, step := range []string{"applied", "flushed"} {
		if step == "flushed" {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if got := getOrAbsent(t, db.Get, "k"); got != want {
			t.Fatalf("%s: Get(k) = %q, want %q", step, got, want)
		}
		if got := scanBoth(t, func(o *IterOptions) (*Iterator, error) {
			return db.NewIter(&IterOptions{LowerBound: []byte("k"), UpperBound: []byte("l")})
		}); got != "k="+want {
			t.Fatalf("%s: scan %q", step, got)
		}
	}
}

// BenchmarkMerge times DB.Merge of 8-byte counter operands over 10,000
// keys, against a Put of the same bytes: a merge is a write like any
// other.
func BenchmarkMerge(b *testing.B) {
	for _, op := range []string{"merge", "put"} {
		b.Run(op, func(b *testing.B) {
			db := openBenchDB(b, 0, func(o *Options) { o.Merger = Uint64AddMerger }, false)
			defer db.Close()
			key, one := make([]byte, 16), u64(1)
			b.ReportAllocs()
			for i := uint64(0); b.Loop(); i++ {
				k := benchKey(key, i*7919%10_000)
				var err error
				if op == "merge" {
					err = db.Merge(k, one, nil)
				} else {
					err = db.Put(k, one, nil)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGetMerged times Gets of counters made of n operands each, in
// the memtable and, after a compaction folded them, on disk.
func BenchmarkGetMerged(b *testing.B) {
	const keys = 10_000
	for _, n := range []int{1, 10} {
		for _, where := range []string{"memtable", "disk"} {
			b.Run(fmt.Sprintf("operands=%d/%s", n, where), func(b *testing.B) {
				db := openBenchDB(b, 0, func(o *Options) { o.Merger = Uint64AddMerger }, false)
				defer db.Close()
				key, one := make([]byte, 16), u64(1)
				for range n {
					for i := range uint64(keys) {
						if err := db.Merge(benchKey(key, i), one, nil); err != nil {
							b.Fatal(err)
						}
					}
				}
				if where == "disk" {
					if err := db.Compact(nil, nil); err != nil {
						b.Fatal(err)
					}
				}
				benchGets(b, db, keys, nil)
			})
		}
	}
}
