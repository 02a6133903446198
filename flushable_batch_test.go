package vigil

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
)

// bigBatch builds a batch of random puts, deletes and a range deletion over
// a small key space (so keys repeat within it) and applies the same
// operations to model.
func bigBatch(db *DB, rng *rand.Rand, n int, model map[string]string) *Batch {
	b := db.NewBatch()
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("k%05d", rng.IntN(n/2))
		switch r := rng.IntN(20); {
		case r == 0:
			b.Delete([]byte(k))
			delete(model, k)
		case r == 1 && i%97 == 0:
			end := fmt.Sprintf("k%05d", rng.IntN(n/2))
			if k < end {
				b.DeleteRange([]byte(k), []byte(end))
				for mk := range model {
					if mk >= k && mk < end {
						delete(model, mk)
					}
				}
			}
		default:
			v := fmt.Sprintf("v%d-%d", i, rng.IntN(1000))
			b.Put([]byte(k), []byte(v))
			model[k] = v
		}
	}
	return b
}

// flushAndCheck flushes db, checks it against model and verifies every
// table: the end of each flushable-batch model test.
func flushAndCheck(t *testing.T, db *DB, model map[string]string, n int) {
	t.Helper()
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	checkModel(t, db, model, n, "flushed")
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
}

func checkModel(t *testing.T, db interface {
	Get([]byte) ([]byte, error)
	NewIter(*IterOptions) (*Iterator, error)
}, model map[string]string, n int, when string) {
	t.Helper()
	for i := 0; i < n/2; i++ {
		k := fmt.Sprintf("k%05d", i)
		v, err := db.Get([]byte(k))
		want, ok := model[k]
		switch {
		case ok && (err != nil || string(v) != want):
			t.Fatalf("%s: Get(%s) = %q, %v; want %q", when, k, v, err, want)
		case !ok && !errors.Is(err, ErrNotFound):
			t.Fatalf("%s: Get(%s) = %q, %v; want not found", when, k, v, err)
		}
	}
	keys := make([]string, 0, len(model))
	for k := range model {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		if i >= len(keys) || string(it.Key()) != keys[i] || string(it.Value()) != model[keys[i]] {
			t.Fatalf("%s: forward step %d: %s=%s", when, i, it.Key(), it.Value())
		}
		i++
	}
	if i != len(keys) {
		t.Fatalf("%s: forward scan saw %d keys, want %d", when, i, len(keys))
	}
	for ok := it.Last(); ok; ok = it.Prev() {
		i--
		if i < 0 || string(it.Key()) != keys[i] {
			t.Fatalf("%s: backward step at %d: %s", when, i, it.Key())
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
}

// A batch over half the write buffer is applied as a flushable batch: reads,
// iterators and snapshots see exactly its effect, it survives a flush and a
// reopen, with paranoid checks and protection bytes.
func TestFlushableBatchModel(t *testing.T) {
	for _, o := range []Options{{}, {ParanoidMemoryChecks: true, MemtableProtectionBytesPerKey: 8}} {
		t.Run(fmt.Sprintf("paranoid=%v", o.ParanoidMemoryChecks), func(t *testing.T) {
			fs := vfs.NewMem()
			o.FS, o.WriteBufferSize = fs, 256<<10
			db, err := Open("db", &o)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			const n = 20000
			model := map[string]string{}
			// Some data in the memtable first, which the batch overwrites.
			for i := 0; i < 500; i++ {
				k := fmt.Sprintf("k%05d", i*7%(n/2))
				if err := db.Put([]byte(k), []byte("before"), nil); err != nil {
					t.Fatal(err)
				}
				model[k] = "before"
			}
			before := map[string]string{}
			for k, v := range model {
				before[k] = v
			}
			snap := db.NewSnapshot()
			b := bigBatch(db, rng, n, model)
			if b.memSize <= o.WriteBufferSize/flushableBatchFraction {
				t.Fatalf("batch of %d bytes is not large", b.memSize)
			}
			if err := db.Apply(b, Sync); err != nil {
				t.Fatal(err)
			}
			if got := db.Metrics().MemTable.Entries; got != 0 {
				t.Fatalf("the mutable memtable holds %d entries after a large batch: it was inserted entry by entry", got)
			}
			checkModel(t, db, model, n, "applied")
			checkModel(t, snap, before, n, "snapshot before the batch")
			snap.Close()
			// Writes after the batch go to the new memtable, above it.
			if err := db.Put([]byte("k00001"), []byte("after"), nil); err != nil {
				t.Fatal(err)
			}
			model["k00001"] = "after"
			checkModel(t, db, model, n, "write after")
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db, err = Open("db", &o)
			if err != nil {
				t.Fatal(err)
			}
			checkModel(t, db, model, n, "reopened (WAL replay)")
			flushAndCheck(t, db, model, n)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The flush of a flushable batch writes it to L0 and frees its memory.
func TestFlushableBatchFlush(t *testing.T) {
	db := openMem(t, vfs.NewMem(), &Options{WriteBufferSize: 256 << 10, DisableAutomaticCompactions: true})
	defer db.Close()
	model := map[string]string{}
	const n = 20000
	b := bigBatch(db, rand.New(rand.NewPCG(3, 4)), n, model)
	if err := db.Apply(b, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	m := db.Metrics()
	if m.Levels[0].NumFiles == 0 || m.MemTable.Count != 1 {
		t.Fatalf("after Flush: L0 %d files, %d memtables", m.Levels[0].NumFiles, m.MemTable.Count)
	}
	if want := int64(256<<10 + 256<<10/128); m.Memory.Memtables != want {
		t.Fatalf("memory after the flush: %+v, want one memtable and its filter, %d bytes (the batch's should be freed)", m.Memory, want)
	}
	checkModel(t, db, model, n, "flushed")
}

// A large batch ends its WAL: the writes after it go to the next WAL, so
// that once the batch is flushed its WAL, as large as the batch, is deleted
// rather than kept (and read through at every reopen) until the memtable
// after it is flushed too. With the mutable memtable empty or not when the
// batch comes, writes before it and after its flush keep their order, and
// the DB reopens to the same contents.
func TestFlushableBatchEndsItsWAL(t *testing.T) {
	for _, before := range []bool{false, true} {
		t.Run(fmt.Sprintf("write-before=%v", before), func(t *testing.T) {
			fs := vfs.NewMem()
			opts := &Options{WriteBufferSize: 256 << 10, DisableAutomaticCompactions: true}
			db := openMem(t, fs, opts)
			model := map[string]string{}
			const n = 20000
			if before {
				if err := db.Put([]byte("k00001"), []byte("before"), nil); err != nil {
					t.Fatal(err)
				}
				model["k00001"] = "before"
			}
			b := bigBatch(db, rand.New(rand.NewPCG(5, 6)), n, model)
			size := int64(len(b.data))
			if err := db.Apply(b, nil); err != nil {
				t.Fatal(err)
			}
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			// Written after the flush, into the mutable memtable, which
			// stays unflushed: these must not be in the batch's WAL.
			for _, k := range []string{"k00001", "k00002"} {
				if err := db.Put([]byte(k), []byte("after"), nil); err != nil {
					t.Fatal(err)
				}
				model[k] = "after"
			}
			checkModel(t, db, model, n, "flushed")
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			names, err := fs.List("db")
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range names {
				if !strings.HasSuffix(name, ".log") {
					continue
				}
				fi, err := fs.Stat(fs.PathJoin("db", name))
				if err != nil {
					t.Fatal(err)
				}
				if fi.Size() >= size {
					t.Errorf("WAL %s (%d bytes) outlived the flush of the %d-byte batch it holds", name, fi.Size(), size)
				}
			}
			db = openMem(t, fs, opts)
			defer db.Close()
			checkModel(t, db, model, n, "reopened")
		})
	}
}

// A write assigned to the empty mutable memtable but not yet inserted when
// a large batch arrives is neither dropped with that memtable nor flushed
// as an empty one: the memtable goes to the immutable list before the
// batch, and its flush waits for the write before deciding what to write.
// Afterwards the batch's WAL is deleted, so only the table can hold it.
func TestFlushableBatchPendingWrite(t *testing.T) {
	fs := vfs.NewMem()
	opts := &Options{WriteBufferSize: 256 << 10, DisableAutomaticCompactions: true}
	db := openMem(t, fs, opts)
	assigned, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	db.testingHooks = &testingHooks{beforeApply: func() {
		once.Do(func() {
			close(assigned)
			<-release
		})
	}}
	put := make(chan error, 1)
	go func() { put <- db.Put([]byte("pending"), []byte("v"), nil) }()
	<-assigned
	model := map[string]string{}
	b := bigBatch(db, rand.New(rand.NewPCG(7, 8)), 20000, model)
	// The batch is published after the pending write, so its Apply
	// returns only once that write is in.
	applied := make(chan error, 1)
	go func() { applied <- db.Apply(b, nil) }()
	// Let the flush of the memtable the write is assigned to begin (and,
	// before the fix, judge it empty) before the write goes in.
	waitFor(t, "the flush to start", db.flushing.Load)
	close(release)
	if err := <-put; err != nil {
		t.Fatal(err)
	}
	if err := <-applied; err != nil {
		t.Fatal(err)
	}
	model["pending"] = "v"
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	mustGet(t, db, "pending", "v")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openMem(t, fs, opts)
	defer db.Close()
	mustGet(t, db, "pending", "v")
}

// With protection bytes a flip in a flushable batch's bytes is reported by
// the read that meets it, and by the flush, which refuses to write it.
func TestFlushableBatchProtection(t *testing.T) {
	db := openMem(t, vfs.NewMem(), &Options{WriteBufferSize: 256 << 10, MemtableProtectionBytesPerKey: 8, DisableAutomaticCompactions: true})
	defer db.Close()
	b := db.NewBatch()
	for i := 0; i < 10000; i++ {
		b.Put([]byte(fmt.Sprintf("k%05d", i)), bytes.Repeat([]byte{'v'}, 20))
	}
	if err := db.Apply(b, nil); err != nil {
		t.Fatal(err)
	}
	rs := db.loadReadState()
	fb := rs.imms[0].t.(*flushableBatch)
	e := &fb.entries[fb.seekGE([]byte("k04242"))]
	fb.data[fb.valueOffset(e)] ^= 1
	rs.unref()
	if _, err := db.Get([]byte("k04242")); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Get of a flipped value = %v, want ErrCorruption", err)
	}
	if _, err := db.Get([]byte("k04243")); err != nil {
		t.Fatalf("Get of an intact neighbour: %v", err)
	}
	if err := db.Flush(); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Flush of a flipped batch = %v, want ErrCorruption", err)
	}
}

// A large batch lends its buffer to the DB instead of being copied; what the
// caller does with the Batch afterwards (append to it, Apply it again, Reset
// and refill it, read it) never changes what the DB committed, before the
// flush, after it, and after a reopen.
func TestFlushableBatchLentBuffer(t *testing.T) {
	for _, o := range []Options{{}, {ParanoidMemoryChecks: true, MemtableProtectionBytesPerKey: 8}} {
		t.Run(fmt.Sprintf("paranoid=%v", o.ParanoidMemoryChecks), func(t *testing.T) {
			fs := vfs.NewMem()
			o.FS, o.WriteBufferSize, o.MaxImmutableMemtables, o.DisableAutomaticCompactions = fs, 256<<10, 4, true
			db, err := Open("db", &o)
			if err != nil {
				t.Fatal(err)
			}
			// No flush until the caller has done its worst: the batches
			// stay in the DB's memtable list, over the lent buffers.
			block := make(chan struct{})
			db.testingHooks = &testingHooks{beforeFlush: func(flushable) { <-block }}
			model := map[string]string{}
			const n = 20000
			b := bigBatch(db, rand.New(rand.NewPCG(5, 6)), n, model)
			if err := db.Apply(b, nil); err != nil {
				t.Fatal(err)
			}
			rs := db.loadReadState()
			fb, ok := rs.imms[len(rs.imms)-1].t.(*flushableBatch)
			if !ok || unsafe.SliceData(fb.data) != unsafe.SliceData(b.data) {
				t.Fatalf("the batch was not queued over its own buffer (flushable %v)", ok)
			}
			rs.unref()
			count := b.Count()
			if got := b.Reader(); got.Error() != nil {
				t.Fatal(got.Error())
			}
			// Appending to the applied batch and applying it again: the
			// second Apply commits all of it, at new seqnums.
			b.Put([]byte("k00000"), []byte("appended"))
			if b.Count() != count+1 {
				t.Fatalf("count %d after one more put, was %d", b.Count(), count)
			}
			checkModel(t, db, model, n, "after appending to the applied batch")
			if err := db.Apply(b, nil); err != nil {
				t.Fatal(err)
			}
			model["k00000"] = "appended"
			checkModel(t, db, model, n, "after applying it again")
			// Reset and refill it over its old bytes: nothing the DB holds
			// may change.
			b.Reset()
			for i := 0; i < n; i++ {
				b.Put([]byte(fmt.Sprintf("k%05d", i%(n/2))), []byte("overwritten-in-the-caller"))
			}
			checkModel(t, db, model, n, "after the caller refilled the batch")
			if got := db.Metrics().MemTable.Count; got != 3 {
				t.Fatalf("%d memtables before the flush, want the mutable one and both batches", got)
			}
			close(block)
			flushAndCheck(t, db, model, n)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if db, err = Open("db", &o); err != nil {
				t.Fatal(err)
			}
			checkModel(t, db, model, n, "reopened")
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The tombstone iterator seeks like every InternalIterator (it panicked on
// SeekGE and SeekLT), and a key outside the batch's buffer has no offset.
func TestFlushableBatchTombIterSeek(t *testing.T) {
	b := new(Batch)
	for _, r := range [][2]string{{"b", "c"}, {"d", "f"}, {"d", "e"}, {"m", "p"}} {
		b.DeleteRange([]byte(r[0]), []byte(r[1]))
	}
	b.Put([]byte("x"), []byte("y"))
	fb, err := newFlushableBatch(DefaultComparer, b, checksum.XXH3, false, false)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Release()
	fb.setSeq(100)
	it := fb.NewRangeDelIter()
	for _, c := range []struct {
		key    string
		ge, lt string // the start found, "" for none
		geEnd  string
	}{
		{"a", "b", "", "c"}, {"b", "b", "", "c"}, {"c", "d", "b", ""}, {"d", "d", "b", ""},
		{"e", "m", "d", "p"}, {"m", "m", "d", "p"}, {"z", "", "m", ""},
	} {
		got := ""
		if it.SeekGE([]byte(c.key)) {
			got = string(it.Key().UserKey)
			if c.geEnd != "" && string(it.Value()) != c.geEnd {
				t.Errorf("SeekGE(%s): end %s, want %s", c.key, it.Value(), c.geEnd)
			}
		}
		if got != c.ge {
			t.Errorf("SeekGE(%s) = %q, want %q", c.key, got, c.ge)
		}
		got = ""
		if it.SeekLT([]byte(c.key)) {
			got = string(it.Key().UserKey)
		}
		if got != c.lt {
			t.Errorf("SeekLT(%s) = %q, want %q", c.key, got, c.lt)
		}
	}
	// Two tombstones start at d: SeekGE lands on the newer, Next on the older.
	if !it.SeekGE([]byte("d")) || it.Key().SeqNum() <= 100 || !it.Next() || string(it.Key().UserKey) != "d" {
		t.Fatal("SeekGE(d) then Next: not both tombstones at d, newest first")
	}
	if _, ok := fb.offset([]byte("elsewhere")); ok {
		t.Fatal("offset of a slice outside the batch's buffer reported ok")
	}
	if off, ok := fb.offset(fb.data[5:9]); !ok || off != 5 {
		t.Fatalf("offset of data[5:9] = %d, %v", off, ok)
	}
}
