package vigil

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/wal"
)

// TestWALRecycle: with WALRecycleFiles the DB writes its next WALs over
// obsolete ones, and after a crash (everything not synced lost) every
// synced write is there, every unsynced one is there or not, and the
// recycled WALs' older bytes are not taken for damage.
func TestWALRecycle(t *testing.T) {
	for _, mode := range []WALRecoveryMode{WALRecoverPointInTime, WALSkipAnyCorrupted} {
		t.Run(mode.String(), func(t *testing.T) {
			mem := vfs.NewStrictMem()
			opts := &Options{FS: mem, WriteBufferSize: minWriteBufferSize, WALRecycleFiles: 2, WALRecoveryMode: mode}
			db, err := Open("db", opts)
			if err != nil {
				t.Fatal(err)
			}
			synced := map[string]string{}
			val := make([]byte, 300)
			for round := range 12 {
				for i := range 400 {
					k := fmt.Sprintf("k%04d", (round*131+i)%1500)
					v := fmt.Sprintf("%d-%d-%s", round, i, val[:i%300])
					if err := db.Put([]byte(k), []byte(v), Sync); err != nil {
						t.Fatal(err)
					}
					synced[k] = v
				}
			}
			if n := db.Metrics().WAL.Recycled; n == 0 {
				t.Fatalf("no WAL recycled in %d flushes", db.Metrics().Flush.Count)
			} else {
				t.Logf("%d WALs recycled in %d flushes", n, db.Metrics().Flush.Count)
			}
			for i := range 50 { // not synced: may be lost
				if err := db.Put([]byte(fmt.Sprintf("u%03d", i)), []byte("maybe"), nil); err != nil {
					t.Fatal(err)
				}
			}
			mem.SetIgnoreSyncs(true) // crash
			db.Close()
			mem.ResetToSyncedState()
			mem.SetIgnoreSyncs(false)
			if db, err = Open("db", opts); err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for k, v := range synced {
				if got, err := db.Get([]byte(k)); err != nil || string(got) != v {
					t.Fatalf("after the crash: Get(%s) = %q, %v; want %q", k, got, err, v)
				}
			}
			for i := range 50 {
				if got, err := db.Get([]byte(fmt.Sprintf("u%03d", i))); err != nil && !errors.Is(err, ErrNotFound) || err == nil && string(got) != "maybe" {
					t.Fatalf("unsynced u%03d: %q, %v", i, got, err)
				}
			}
			m := db.Metrics()
			if m.Recovery.Skipped != 0 || m.Recovery.DroppedRecords > 1 {
				t.Fatalf("recovery of recycled WALs: %+v", m.Recovery)
			}
			t.Logf("recovery: %+v", m.Recovery)
			if err := db.Verify(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestWALRecycleOptions: recycling needs checksums and a recovery mode that
// takes the end of a recycled WAL for its end.
func TestWALRecycleOptions(t *testing.T) {
	for _, o := range []Options{
		{WALRecycleFiles: -1},
		{WALRecycleFiles: 1, ChecksumType: ChecksumNone},
		{WALRecycleFiles: 1, WALRecoveryMode: WALAbsoluteConsistency},
		{WALRecycleFiles: 1, WALRecoveryMode: WALTolerateCorruptedTail},
	} {
		o.FS = vfs.NewMem()
		if _, err := Open("db", &o); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// TestWALRecycleCheckpoint: a checkpoint of a DB whose WALs are recycled
// (read to their ends, older bytes after them) holds every write of them,
// and opens in every recovery mode, the strict ones included.
func TestWALRecycleCheckpoint(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("db", &Options{FS: fs, WriteBufferSize: minWriteBufferSize, WALRecycleFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	val := make([]byte, 300)
	fill := func(n int) {
		for i := range n {
			if err := db.Put([]byte(fmt.Sprintf("k%05d", i%2000)), val[:i%300], Sync); err != nil {
				t.Fatal(err)
			}
		}
	}
	fill(6000)
	if db.Metrics().WAL.Recycled == 0 {
		t.Fatal("no WAL recycled")
	}
	// A rotation recycles a WAL only if the flush that made one obsolete
	// has finished by then; on a loaded machine the live WAL may be a new
	// one. Rotate again until some WAL holds older bytes (a few tries).
	for try := 0; ; try++ {
		for i := range 30 { // in the live WAL only
			if err := db.Put([]byte(fmt.Sprintf("z%03d", i)), []byte("v"), nil); err != nil {
				t.Fatal(err)
			}
		}
		if staleWALBytes(t, fs, "db", db.liveWALNum()) > 0 {
			break
		}
		if try == 10 {
			t.Fatal("the DB holds no recycled WAL with older bytes after 10 rotations: the test tests nothing")
		}
		fill(2000)
	}
	// The checkpoint copies the batches of the DB's WALs, read to their
	// ends, into a WAL of its own.
	if err := db.Checkpoint("ck"); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []WALRecoveryMode{WALRecoverPointInTime, WALAbsoluteConsistency, WALTolerateCorruptedTail, WALSkipAnyCorrupted} {
		c, err := Open("ck", &Options{FS: fs, ReadOnly: true, WALRecoveryMode: mode})
		if err != nil {
			t.Fatalf("%v: %v", mode, err)
		}
		for i := range 30 {
			if _, err := c.Get([]byte(fmt.Sprintf("z%03d", i))); err != nil {
				t.Fatalf("%v: z%03d: %v", mode, i, err)
			}
		}
		if m := c.Metrics(); m.Recovery.DroppedRecords != 0 || m.Recovery.Skipped != 0 {
			t.Fatalf("%v: recovery %+v", mode, m.Recovery)
		}
		if err := c.Verify(); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
}

// staleWALBytes reads every WAL in dir and sums the older logs' bytes
// after their ends (wal.ReaderStats.StaleBytes). The DB's background work
// goes on meanwhile: an obsolete WAL may be deleted, or renamed and given a
// new header to be written over (WALRecycleFiles), as it is read, so a WAL
// other than the live one that cannot be read is left out.
func staleWALBytes(t *testing.T, fs vfs.FS, dir string, live uint64) int64 {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var stale int64
	for _, n := range names {
		ft, num, ok := parseFilename(n)
		if !ok || ft != fileTypeLog {
			continue
		}
		b, err := readStale(fs, fs.PathJoin(dir, n))
		if err != nil && num == live {
			t.Fatal(err)
		}
		stale += b
	}
	return stale
}

// readStale reads the WAL at path to its end and returns its stale bytes.
func readStale(fs vfs.FS, path string) (int64, error) {
	f, err := fs.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r, err := wal.NewReader(f, path, wal.PointInTime)
	if err != nil {
		return 0, err
	}
	for {
		if _, err := r.Next(); err != nil {
			break
		}
	}
	return r.Stats().StaleBytes, nil
}

// TestWALSpareWaitsForRecyclable: with recycling on, the WAL prepared at a
// new store's first rotation is not created fresh (and filled with a WAL's
// worth of zeros ahead): it waits for the flush that frees the first WAL,
// and writes over that one.
func TestWALSpareWaitsForRecyclable(t *testing.T) {
	db, unblock := openFlushBlocked(t, &Options{WriteBufferSize: minWriteBufferSize, WALRecycleFiles: 2})
	writeUntilRotation(t, db, Sync)
	db.mu.Lock()
	spare, preparing := db.wal.spare, db.wal.preparing
	db.mu.Unlock()
	if spare != nil || preparing {
		t.Fatalf("a spare WAL was made while the first WAL awaited its flush (spare %v, preparing %v)", spare != nil, preparing)
	}
	unblock()
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the spare WAL", func() bool {
		db.mu.Lock()
		defer db.mu.Unlock()
		return db.wal.spare != nil
	})
	if n := db.Metrics().WAL.Recycled; n != 1 {
		t.Fatalf("the spare after the first flush: %d WALs recycled, want 1", n)
	}
}

// TestWALSpareNoWaitBelowFlushThreshold: the first memtables after Open
// wait in memory below the flush threshold (flushDueLocked), so no flush
// is coming to free the first WAL: the next WAL is made at once, not left
// to the rotation to create while the writer waits.
func TestWALSpareNoWaitBelowFlushThreshold(t *testing.T) {
	db, _ := openFlushBlocked(t, &Options{WriteBufferSize: 1 << 20, WALRecycleFiles: 2})
	writeUntilRotation(t, db, Sync) // the first memtable, 256 KiB, waits
	db.mu.Lock()
	made := db.wal.spare != nil || db.wal.preparing
	imm := len(db.imm)
	db.mu.Unlock()
	if imm != 1 || !made {
		t.Fatalf("after the first rotation: %d immutable memtables, next WAL made %v; want 1, true", imm, made)
	}
}

// TestWALSpareNoWaitUnsynced: after unsynced writes a new WAL writes no
// zeros ahead, so the next WAL is made at the rotation as without
// recycling, whether or not a flush has freed a WAL to write over.
func TestWALSpareNoWaitUnsynced(t *testing.T) {
	// 1 MiB: a WAL of minWriteBufferSize counts Open's one sync as synced
	// writes throughout (aheadReserve).
	db, _ := openFlushBlocked(t, &Options{WriteBufferSize: 1 << 20, WALRecycleFiles: 2})
	writeUntilRotation(t, db, nil)
	db.mu.Lock()
	made := db.wal.spare != nil || db.wal.preparing
	db.mu.Unlock()
	if !made {
		t.Fatal("after unsynced writes the next WAL waited for a flush to free one")
	}
}

// TestWALSpareWaitNeverStalls: a rotation that finds no spare, because the
// flush that would free a WAL to recycle has not ended, makes a new WAL
// rather than waiting for that flush. With the wait not cut short there,
// the writes stall until the flushes go on, and the test fails at its
// deadline instead of hanging.
func TestWALSpareWaitNeverStalls(t *testing.T) {
	db, _ := openFlushBlocked(t, &Options{WriteBufferSize: minWriteBufferSize, WALRecycleFiles: 2, MaxImmutableMemtables: 4})
	done := make(chan error, 1)
	go func() {
		seen := map[uint64]bool{db.liveWALNum(): true}
		val := make([]byte, 1000)
		for i := 0; len(seen) < 3; i++ {
			if err := db.Put(fmt.Appendf(nil, "k%06d", i), val, Sync); err != nil {
				done <- err
				return
			}
			seen[db.liveWALNum()] = true
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writes stalled at a rotation while the flush that frees a WAL to recycle was blocked")
	}
}

// openFlushBlocked opens a DB with o in a new directory, every flush of
// which waits until unblock is called. The test's cleanup calls unblock,
// then closes the DB (which waits for its flushes), and a writer stalled
// behind a blocked flush can end.
func openFlushBlocked(t *testing.T, o *Options) (db *DB, unblock func()) {
	t.Helper()
	db, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	block := make(chan struct{})
	var once sync.Once
	unblock = func() { once.Do(func() { close(block) }) }
	t.Cleanup(func() { db.Close() })
	t.Cleanup(unblock) // cleanups run last first: before the Close
	db.testingHooks = &testingHooks{beforeFlush: func(flushable) { <-block }}
	return db, unblock
}

// writeUntilRotation puts 1000-byte values with wo until the DB moves to
// its next WAL.
func writeUntilRotation(t *testing.T, db *DB, wo *WriteOptions) {
	t.Helper()
	first := db.liveWALNum()
	val := make([]byte, 1000)
	for i := 0; db.liveWALNum() == first; i++ {
		if err := db.Put(fmt.Appendf(nil, "k%06d", i), val, wo); err != nil {
			t.Fatal(err)
		}
	}
}

// liveWALNum returns the live WAL's number (for tests).
func (d *DB) liveWALNum() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.wal.liveNum
}

// waitFor polls cond for up to ten seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
