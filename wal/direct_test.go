package wal

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/checksum"
)

// TestSyncDirect: a lone synced writer (WriteRecordToSync, then
// SyncToAfter) makes the round itself: the record is handed to the file
// before the work runs and synced after it, once, by the caller; the
// flusher is never woken. A failing write or sync in such a round fails the
// writer as the flusher's would, the work still running once.
func TestSyncDirect(t *testing.T) {
	fs := vfs.NewMem()
	f, _ := fs.Create("log")
	cf := &countingFile{File: f}
	w, _ := NewWriter(cf, "log", 3, checksum.XXH3)
	if err := w.Sync(); err != nil { // the header, by the flusher or not
		t.Fatal(err)
	}
	waitIdle(t, w)
	// The header's sync went either way; count the records' from here.
	st0 := w.Stats()
	var recs [][]byte
	for i := range 50 {
		rec := pattern(i, 1+i*997) // across block edges
		recs = append(recs, rec)
		end, err := w.WriteRecordToSync(rec)
		if err != nil {
			t.Fatal(err)
		}
		writes0, syncs0 := cf.counts()
		runs := 0
		err = w.SyncToAfter(end, func() {
			runs++
			writes, syncs := cf.counts()
			if writes == writes0 || syncs != syncs0 {
				t.Errorf("record %d: the work ran after %d writes and %d syncs, want the record written (%d before) and not yet synced (%d)", i, writes, syncs, writes0, syncs0)
			}
		})
		if _, syncs := cf.counts(); err != nil || runs != 1 || syncs != syncs0+1 {
			t.Fatalf("record %d: SyncToAfter: %v after %d runs of the work and %d syncs (%d before)", i, err, runs, syncs, syncs0)
		}
	}
	st := w.Stats()
	if st.DirectSyncs-st0.DirectSyncs != 50 || st.WaitedSyncs-st0.WaitedSyncs != 50 {
		t.Fatalf("stats %+v (before the records: %+v): want 50 direct syncs of 50 waited for", st, st0)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if res := readAll(t, readFile(t, fs, "log"), PointInTime); res.err != nil || !equalRecs(res.recs, recs) {
		t.Fatalf("read back: %v, records %v, want %v", res.err, describe(res.recs), describe(recs))
	}

	for _, fail := range []string{"write", "sync"} {
		t.Run(fail, func(t *testing.T) {
			f, _ := fs.Create("log-" + fail)
			cf := &countingFile{File: f}
			w, _ := NewWriter(cf, "log-"+fail, 4, checksum.XXH3)
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			waitIdle(t, w)
			cf.mu.Lock()
			if fail == "write" {
				cf.failWrite = errTestIO
			} else {
				cf.failSync = errTestIO
			}
			cf.mu.Unlock()
			end, _ := w.WriteRecordToSync(pattern(1, 40000))
			// The header's sync above may have been a direct one.
			direct0 := w.Stats().DirectSyncs
			runs := 0
			if err := w.SyncToAfter(end, func() { runs++ }); !errors.Is(err, errTestIO) || runs != 1 {
				t.Fatalf("SyncToAfter: %v after %d runs, want the injected error after 1", err, runs)
			}
			if w.Stats().DirectSyncs != direct0 && fail == "write" {
				t.Fatalf("a round whose write failed counted as a direct sync")
			}
			if _, err := w.WriteRecord([]byte("x")); !errors.Is(err, errTestIO) {
				t.Fatalf("WriteRecord after the failure: %v", err)
			}
			if err := w.Close(); !errors.Is(err, errTestIO) {
				t.Fatalf("Close: %v", err)
			}
		})
	}
}

// TestSyncDirectConcurrent: synced writers that may make their own rounds,
// writers that do not sync, and writers that sync through the flusher, all
// at once, then Close: every record whose sync returned nil is in the log,
// in the order of its appends, the flusher and the callers having shared the
// rounds (both kinds happen). Run it with -race.
func TestSyncDirectConcurrent(t *testing.T) {
	fs := vfs.NewMem()
	f, _ := fs.Create("log")
	w, _ := NewWriter(f, "log", 5, checksum.XXH3)
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	w.SetReserve(1 << 20)
	var mu sync.Mutex // the DB's commit mutex: append order is log order
	var order [][]byte
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := newRand(uint64(g))
			for i := range 300 {
				rec := []byte(fmt.Sprintf("g%d-%d-%s", g, i, pattern(g*1000+i, rng.IntN(3000))))
				kind := rng.IntN(3) // 0: own round if idle, 1: through the flusher, 2: no sync
				mu.Lock()
				var end int64
				var err error
				if kind == 0 {
					end, err = w.WriteRecordToSync(rec)
				} else {
					end, err = w.WriteRecord(rec)
				}
				if err == nil {
					order = append(order, rec)
				}
				mu.Unlock()
				if err == nil && kind < 2 {
					worked := false
					err = w.SyncToAfter(end, func() { worked = true })
					if err == nil && !worked {
						err = fmt.Errorf("g%d record %d: the work did not run", g, i)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := w.Stats()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if st.DirectSyncs == 0 || st.WaitedSyncs == st.DirectSyncs {
		t.Logf("stats %+v: only one kind of round ran", st)
	}
	if res := readAll(t, readFile(t, fs, "log"), PointInTime); res.err != nil || !equalRecs(res.recs, order) {
		t.Fatalf("read back: %v, %d records, want %d", res.err, len(res.recs), len(order))
	}
}

// waitIdle waits until w's flusher waits for work.
func waitIdle(t *testing.T, w *Writer) {
	t.Helper()
	for {
		w.mu.Lock()
		idle := w.idle
		w.mu.Unlock()
		if idle {
			return
		}
		runtime.Gosched()
	}
}
