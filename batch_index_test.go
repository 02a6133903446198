package vigil

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

// writer is what randomWrite writes to: a Batch, or a DB (dbWriter).
type writer interface {
	Put(k, v []byte)
	Delete(k []byte)
	DeleteRange(s, e []byte)
	Merge(k, v []byte)
}

// randomWrite applies one random write (a put, a merge with AppendMerger,
// a delete or a range deletion over 200 keys) to w and to the model m.
func randomWrite(rng *rand.Rand, m map[string]string, w writer, tag string) {
	k := fmt.Sprintf("k%03d", rng.IntN(200))
	switch r := rng.IntN(24); {
	case r >= 20:
		v := fmt.Sprintf("+%s%d", tag, rng.IntN(100))
		w.Merge([]byte(k), []byte(v))
		m[k] += v
	case r < 13:
		v := fmt.Sprintf("%s-%d", tag, rng.IntN(1000))
		w.Put([]byte(k), []byte(v))
		m[k] = v
	case r < 18:
		w.Delete([]byte(k))
		delete(m, k)
	default:
		e := fmt.Sprintf("k%03d", rng.IntN(200))
		if e < k {
			k, e = e, k
		}
		w.DeleteRange([]byte(k), []byte(e))
		for mk := range m {
			if mk >= k && mk < e {
				delete(m, mk)
			}
		}
	}
}

// dbWriter writes straight to a DB.
type dbWriter struct {
	t  *testing.T
	db *DB
}

func (w dbWriter) Put(k, v []byte) {
	if err := w.db.Put(k, v, nil); err != nil {
		w.t.Fatal(err)
	}
}
func (w dbWriter) Merge(k, v []byte) {
	if err := w.db.Merge(k, v, nil); err != nil {
		w.t.Fatal(err)
	}
}
func (w dbWriter) Delete(k []byte) {
	if err := w.db.Delete(k, nil); err != nil {
		w.t.Fatal(err)
	}
}
func (w dbWriter) DeleteRange(s, e []byte) {
	if err := w.db.DeleteRange(s, e, nil); err != nil {
		w.t.Fatal(err)
	}
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// checkView compares Get and an iterator driven at random (both
// directions, seeks, bounds) with the model.
func checkView(t *testing.T, rng *rand.Rand, what string, get func([]byte) ([]byte, error), newIter func(*IterOptions) (*Iterator, error), m map[string]string) {
	t.Helper()
	for i := range 200 {
		k := fmt.Sprintf("k%03d", i)
		v, err := get([]byte(k))
		want, ok := m[k]
		if ok != (err == nil) || (ok && string(v) != want) || (err != nil && !errors.Is(err, ErrNotFound)) {
			t.Fatalf("%s: Get(%s) = %q, %v; want %q (present %v)", what, k, v, err, want, ok)
		}
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for round := range 20 {
		o := &IterOptions{}
		lo, hi := "", "\xff"
		if round%3 == 1 {
			lo, hi = fmt.Sprintf("k%03d", rng.IntN(100)), fmt.Sprintf("k%03d", 100+rng.IntN(100))
			o.LowerBound, o.UpperBound = []byte(lo), []byte(hi)
		}
		var in []string
		for _, k := range keys {
			if k >= lo && k < hi {
				in = append(in, k)
			}
		}
		it, err := newIter(o)
		if err != nil {
			t.Fatal(err)
		}
		pos := -1 // index in `in` of the expected position; -1 or len: invalid
		for step := range 60 {
			var ok bool
			switch op := rng.IntN(6); {
			case op == 0 || step == 0:
				ok, pos = it.First(), 0
			case op == 1:
				ok, pos = it.Last(), len(in)-1
			case op == 2:
				s := fmt.Sprintf("k%03d", rng.IntN(200))
				ok = it.SeekGE([]byte(s))
				pos, _ = slices.BinarySearch(in, s)
			case op == 3:
				s := fmt.Sprintf("k%03d", rng.IntN(200))
				ok = it.SeekLT([]byte(s))
				pos, _ = slices.BinarySearch(in, s)
				pos--
			case op == 4:
				if pos < 0 || pos >= len(in) {
					continue
				}
				ok, pos = it.Next(), pos+1
			default:
				if pos < 0 || pos >= len(in) {
					continue
				}
				ok, pos = it.Prev(), pos-1
			}
			valid := pos >= 0 && pos < len(in)
			if ok != valid || it.Valid() != valid {
				t.Fatalf("%s: round %d step %d: valid %v, want %v (pos %d of %d)", what, round, step, ok, valid, pos, len(in))
			}
			if valid && (string(it.Key()) != in[pos] || string(it.Value()) != m[in[pos]]) {
				t.Fatalf("%s: round %d step %d: at %s=%s, want %s=%s", what, round, step, it.Key(), it.Value(), in[pos], m[in[pos]])
			}
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIndexedBatchModel: an indexed batch's Get and iterators show the
// batch laid over the DB (flushed tables, memtable, range deletions on
// both sides), at the DB's state and at a snapshot; applied, the DB is the
// model.
func TestIndexedBatchModel(t *testing.T) {
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 99))
		db, err := Open("db", &Options{FS: vfs.NewMem(), WriteBufferSize: 64 << 10, Merger: AppendMerger})
		if err != nil {
			t.Fatal(err)
		}
		dbm := map[string]string{}
		for i := range 600 {
			randomWrite(rng, dbm, dbWriter{t, db}, "db")
			if i == 300 {
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		snap := db.NewSnapshot()
		snapm := cloneMap(dbm)
		b := db.NewIndexedBatch()
		sb := snap.NewIndexedBatch()
		bm := cloneMap(dbm)
		sbm := cloneMap(snapm)
		for round := range 4 {
			for range 80 {
				sv := rng.Uint64()
				randomWrite(rand.New(rand.NewPCG(seed, sv)), bm, b, "b")
				randomWrite(rand.New(rand.NewPCG(seed, sv)), sbm, sb, "b")
			}
			// The DB moves on: the batch reads its current state, the
			// snapshot's batch does not.
			for range 30 {
				k := fmt.Sprintf("k%03d", rng.IntN(200))
				if err := db.Put([]byte(k), []byte("late"), nil); err != nil {
					t.Fatal(err)
				}
				dbm[k] = "late"
			}
			// Recompute the batch's model over the DB's new state.
			bm = overlay(t, dbm, b)
			what := fmt.Sprintf("seed %d round %d", seed, round)
			checkView(t, rng, what+" (DB)", b.Get, b.NewIter, bm)
			checkView(t, rng, what+" (snapshot)", sb.Get, sb.NewIter, sbm)
		}
		if err := db.Apply(b, nil); err != nil {
			t.Fatal(err)
		}
		checkView(t, rng, "applied", db.Get, db.NewIter, bm)
		snap.Close()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// overlay is the model of batch b over the DB state m: b's records replayed
// on a copy of m.
func overlay(t *testing.T, m map[string]string, b *Batch) map[string]string {
	t.Helper()
	out := cloneMap(m)
	r := b.Reader()
	for {
		kind, k, v, ok := r.Next()
		if !ok {
			break
		}
		switch kind {
		case BatchPut:
			out[string(k)] = string(v)
		case BatchDelete:
			delete(out, string(k))
		case BatchMerge:
			out[string(k)] += string(v)
		case BatchDeleteRange:
			for mk := range out {
				if mk >= string(k) && mk < string(v) {
					delete(out, mk)
				}
			}
		}
	}
	if err := r.Error(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestIndexedBatchNotIndexed: Get and NewIter of a plain batch are
// ErrInvalidArgument.
func TestIndexedBatchNotIndexed(t *testing.T) {
	b := &Batch{}
	if _, err := b.Get([]byte("a")); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
	if _, err := b.NewIter(nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
	if b.Indexed() {
		t.Fatal("a plain batch says it is indexed")
	}
}

// TestIndexedBatchIteratorIsolated: an iterator sees the batch as it was
// when it was made.
func TestIndexedBatchIteratorIsolated(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := db.NewIndexedBatch()
	b.Put([]byte("a"), []byte("1"))
	it, err := b.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		b.Put(fmt.Appendf(nil, "b%03d", i), []byte("x"))
	}
	var got [][]byte
	for ok := it.First(); ok; ok = it.Next() {
		got = append(got, bytes.Clone(it.Key()))
	}
	if err := it.Close(); err != nil || len(got) != 1 || string(got[0]) != "a" {
		t.Fatalf("got %q, %v", got, err)
	}
}

// TestIndexedBatchIteratorDBError: an error on the DB side stops the
// indexed batch's iterator with that error; it does not go on with the
// batch's keys as if the DB had ended.
func TestIndexedBatchIteratorDBError(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs, BlockCacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 200 {
		db.Put(fmt.Appendf(nil, "k%03d", i), bytes.Repeat([]byte("v"), 40), nil)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	db.mu.Lock()
	f := db.vs.current.Levels[0][0]
	db.mu.Unlock()
	flipTableByte(t, fs, f.FileNum) // in the first data block
	b := db.NewIndexedBatch()
	b.Put([]byte("z"), []byte("batch"))
	it, err := b.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if err := it.Close(); !errors.Is(err, ErrCorruption) || n != 0 {
		t.Fatalf("%d keys, then %v; want none and the corruption", n, err)
	}
	// Backward the DB side is fine until the damaged first block.
	it, _ = b.NewIter(nil)
	n = 0
	for ok := it.Last(); ok; ok = it.Prev() {
		n++
	}
	if err := it.Close(); !errors.Is(err, ErrCorruption) || n == 0 || n >= 201 {
		t.Fatalf("backward: %d keys, then %v", n, err)
	}
}
