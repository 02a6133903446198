package vigil

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

func openTxnDB(t testing.TB) *DB {
	t.Helper()
	db, err := Open("db", &Options{FS: vfs.NewMem(), WriteBufferSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestTxnConflicts: each way another commit can change what a transaction
// read makes its Commit fail with ErrConflict, writing nothing; writes it
// did not read do not.
func TestTxnConflicts(t *testing.T) {
	type step func(t *testing.T, db *DB)
	put := func(k string) step {
		return func(t *testing.T, db *DB) {
			if err := db.Put([]byte(k), []byte("other"), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name     string
		read     func(tx *Txn) error
		other    step
		conflict bool
	}{
		{"read key rewritten", func(tx *Txn) error { _, err := tx.Get([]byte("b")); return err }, put("b"), true},
		{"absent key written", func(tx *Txn) error { _, err := tx.Get([]byte("zz")); return ignoreNotFound(err) }, put("zz"), true},
		{"read key deleted", func(tx *Txn) error { _, err := tx.Get([]byte("b")); return err },
			func(t *testing.T, db *DB) { db.Delete([]byte("b"), nil) }, true},
		{"read key range-deleted", func(tx *Txn) error { _, err := tx.Get([]byte("b")); return err },
			func(t *testing.T, db *DB) { db.DeleteRange([]byte("a"), []byte("c"), nil) }, true},
		{"other key written", func(tx *Txn) error { _, err := tx.Get([]byte("b")); return err }, put("c"), false},
		{"iterated range written", iterate("a", "c"), put("bb"), true},
		{"iterated range range-deleted", iterate("a", "c"), func(t *testing.T, db *DB) { db.DeleteRange([]byte("bz"), []byte("d"), nil) }, true},
		{"write beside the range", iterate("a", "c"), put("c"), false},
		{"unbounded iteration", iterate("", ""), put("q"), true},
		{"written after flush", func(tx *Txn) error { _, err := tx.Get([]byte("b")); return err },
			func(t *testing.T, db *DB) { put("b")(t, db); db.Flush() }, true},
		{"blind write", func(tx *Txn) error { return nil }, put("b"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := openTxnDB(t)
			defer db.Close()
			for _, k := range []string{"a", "b", "c"} {
				db.Put([]byte(k), []byte("v0"), nil)
			}
			tx := db.NewTxn()
			if err := c.read(tx); err != nil {
				t.Fatal(err)
			}
			tx.Put([]byte("out"), []byte("1"))
			c.other(t, db)
			err := tx.Commit(nil)
			if c.conflict != errors.Is(err, ErrConflict) || (!c.conflict && err != nil) {
				t.Fatalf("Commit: %v, want conflict %v", err, c.conflict)
			}
			_, gerr := db.Get([]byte("out"))
			if c.conflict != errors.Is(gerr, ErrNotFound) {
				t.Fatalf("after Commit (%v): Get(out) %v", err, gerr)
			}
		})
	}
}

func ignoreNotFound(err error) error {
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

func iterate(lo, hi string) func(tx *Txn) error {
	return func(tx *Txn) error {
		o := &IterOptions{}
		if lo != "" {
			o.LowerBound, o.UpperBound = []byte(lo), []byte(hi)
		}
		it, err := tx.NewIter(o)
		if err != nil {
			return err
		}
		for ok := it.First(); ok; ok = it.Next() {
		}
		return it.Close()
	}
}

// TestTxnOwnWritesAndView: a transaction reads its own writes, a key its
// own writes answer is not a conflict, and View refuses writes.
func TestTxnOwnWritesAndView(t *testing.T) {
	db := openTxnDB(t)
	defer db.Close()
	db.Put([]byte("k"), []byte("old"), nil)
	tx := db.NewTxn()
	tx.Put([]byte("k"), []byte("mine"))
	if v, err := tx.Get([]byte("k")); err != nil || string(v) != "mine" {
		t.Fatalf("own write: %q %v", v, err)
	}
	tx.DeleteRange([]byte("a"), []byte("z"))
	if _, err := tx.Get([]byte("k")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("own range deletion: %v", err)
	}
	db.Put([]byte("k"), []byte("other"), nil) // not read from the snapshot
	if err := tx.Commit(nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Put([]byte("x"), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after Commit: %v", err)
	}
	err := db.View(func(tx *Txn) error { return tx.Put([]byte("x"), nil) })
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("write in View: %v", err)
	}
}

// txnRecord is one committed transfer or audit: what it read, what it
// wrote, and its commit seqnum.
type txnRecord struct {
	seq    uint64
	reads  map[string]string // key -> value read ("" absent)
	writes map[string]string
	sum    int // for audits: the total the scan saw; -1 otherwise
}

// TestTxnSerializable runs transfers between accounts (read two balances,
// move an amount) and audits (scan every account, sum them, write the sum
// to an audit key) on several goroutines, retrying on ErrConflict, with a
// plain writer busy on other keys. The total is conserved, every audit saw
// the total, and replaying the committed transactions one at a time in
// commit order on a map reproduces every value each one read, and the
// DB's final state.
func TestTxnSerializable(t *testing.T) {
	db := openTxnDB(t)
	defer db.Close()
	const accounts, workers, perWorker, initial = 12, 4, 150, 100
	acct := func(i int) string { return fmt.Sprintf("acct%02d", i) }
	start := map[string]string{}
	for i := range accounts {
		start[acct(i)] = strconv.Itoa(initial)
		db.Put([]byte(acct(i)), []byte(strconv.Itoa(initial)), nil)
	}
	var mu sync.Mutex
	var log []txnRecord
	var conflicts int
	stop := make(chan struct{})
	var plain sync.WaitGroup
	plain.Add(1)
	go func() { // unrelated writes: no false conflicts expected from them
		defer plain.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			db.Put([]byte(fmt.Sprintf("zz%04d", i%500)), []byte("x"), nil)
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range perWorker {
				for {
					rec, err := runOne(db, rng, accounts, acct)
					if errors.Is(err, ErrConflict) {
						mu.Lock()
						conflicts++
						mu.Unlock()
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					log = append(log, rec)
					mu.Unlock()
					break
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	plain.Wait()
	sort.Slice(log, func(i, j int) bool { return log[i].seq < log[j].seq })
	model := start
	for i, rec := range log {
		for k, v := range rec.reads {
			if model[k] != v {
				t.Fatalf("transaction %d of %d (seq %d) read %s=%q, the serial order has %q", i, len(log), rec.seq, k, v, model[k])
			}
		}
		if rec.sum >= 0 && rec.sum != accounts*initial {
			t.Fatalf("audit at seq %d saw a total of %d", rec.seq, rec.sum)
		}
		for k, v := range rec.writes {
			model[k] = v
		}
	}
	total := 0
	for i := range accounts {
		v, err := db.Get([]byte(acct(i)))
		if err != nil || string(v) != model[acct(i)] {
			t.Fatalf("final %s = %q, %v; serial replay %q", acct(i), v, err, model[acct(i)])
		}
		n, _ := strconv.Atoi(string(v))
		total += n
	}
	if total != accounts*initial {
		t.Fatalf("total %d, want %d", total, accounts*initial)
	}
	t.Logf("%d transactions committed, %d conflicts retried", len(log), conflicts)
}

// runOne runs one random transfer (or, one time in five, an audit) and
// returns its record.
func runOne(db *DB, rng *rand.Rand, accounts int, acct func(int) string) (txnRecord, error) {
	rec := txnRecord{reads: map[string]string{}, writes: map[string]string{}, sum: -1}
	tx := db.NewTxn()
	defer tx.Discard()
	if rng.IntN(5) == 0 {
		it, err := tx.NewIter(&IterOptions{LowerBound: []byte("acct"), UpperBound: []byte("acct~")})
		if err != nil {
			return rec, err
		}
		rec.sum = 0
		for ok := it.First(); ok; ok = it.Next() {
			rec.reads[string(it.Key())] = string(it.Value())
			n, _ := strconv.Atoi(string(it.Value()))
			rec.sum += n
		}
		if err := it.Close(); err != nil {
			return rec, err
		}
		rec.writes["audit"] = strconv.Itoa(rec.sum)
		tx.Put([]byte("audit"), []byte(rec.writes["audit"]))
	} else {
		a, b := acct(rng.IntN(accounts)), acct(rng.IntN(accounts))
		if a == b {
			return runOne(db, rng, accounts, acct)
		}
		va, err := tx.Get([]byte(a))
		if err != nil {
			return rec, err
		}
		vb, err := tx.Get([]byte(b))
		if err != nil {
			return rec, err
		}
		rec.reads[a], rec.reads[b] = string(va), string(vb)
		na, _ := strconv.Atoi(string(va))
		nb, _ := strconv.Atoi(string(vb))
		amt := rng.IntN(na + 1)
		rec.writes[a], rec.writes[b] = strconv.Itoa(na-amt), strconv.Itoa(nb+amt)
		tx.Put([]byte(a), []byte(rec.writes[a]))
		tx.Put([]byte(b), []byte(rec.writes[b]))
	}
	if err := tx.Commit(nil); err != nil {
		return rec, err
	}
	rec.seq = tx.seq
	return rec, nil
}

// BenchmarkTxnUpdate: a transaction that reads and writes one key
// (read-modify-write) or only writes it (blind), on 1, 2 and 8 goroutines
// sharing the key (so they contend: conflicts are retried and reported per
// op), beside a plain Apply of the same write.
func BenchmarkTxnUpdate(b *testing.B) {
	key := []byte("counter")
	rmw := func(tx *Txn) error {
		if _, err := tx.Get(key); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		return tx.Put(key, []byte("v"))
	}
	blind := func(tx *Txn) error { return tx.Put(key, []byte("v")) }
	for _, c := range []struct {
		name string
		fn   func(*Txn) error
	}{{"rmw", rmw}, {"blind", blind}} {
		for _, g := range []int{1, 2, 8} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", c.name, g), func(b *testing.B) {
				db := openTxnDB(b)
				defer db.Close()
				var conflicts atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				for w := range g {
					n := b.N / g
					if w == 0 {
						n += b.N % g
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range n {
							for {
								err := db.Update(c.fn)
								if errors.Is(err, ErrConflict) {
									conflicts.Add(1)
									continue
								}
								if err != nil {
									b.Error(err)
									return
								}
								break
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(conflicts.Load())/float64(b.N), "conflicts/op")
			})
		}
	}
	b.Run("apply", func(b *testing.B) {
		db := openTxnDB(b)
		defer db.Close()
		batch := db.NewBatch()
		for b.Loop() {
			batch.Reset()
			batch.Put(key, []byte("v"))
			if err := db.Apply(batch, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestUpdateCommittedByFn: an Update whose fn commits the transaction
// itself returns nil (a retry would apply it twice).
func TestUpdateCommittedByFn(t *testing.T) {
	db := openTxnDB(t)
	defer db.Close()
	err := db.Update(func(tx *Txn) error {
		tx.Put([]byte("k"), []byte("v"))
		return tx.Commit(nil)
	})
	if v, gerr := db.Get([]byte("k")); err != nil || gerr != nil || string(v) != "v" {
		t.Fatalf("Update: %v; Get: %q %v", err, v, gerr)
	}
}

// TestTxnLargeBatch: a transaction whose writes make a batch too large for
// the memtable (committed as a flushable batch) is checked the same way.
func TestTxnLargeBatch(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), WriteBufferSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.Put([]byte("guard"), []byte("0"), nil)
	write := func(tx *Txn, tag string) {
		for i := range 1000 {
			tx.Put(fmt.Appendf(nil, "big%04d", i), []byte(strings.Repeat(tag, 100)))
		}
	}
	tx := db.NewTxn()
	if _, err := tx.Get([]byte("guard")); err != nil {
		t.Fatal(err)
	}
	write(tx, "a")
	db.Put([]byte("guard"), []byte("1"), nil)
	if err := tx.Commit(nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("large conflicting commit: %v", err)
	}
	if _, err := db.Get([]byte("big0000")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused large commit wrote: %v", err)
	}
	err = db.Update(func(tx *Txn) error {
		if _, err := tx.Get([]byte("guard")); err != nil {
			return err
		}
		write(tx, "b")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := db.Get([]byte("big0999")); err != nil || string(v) != strings.Repeat("b", 100) {
		t.Fatalf("large commit: %q %v", v, err)
	}
}
