package tests

// Regression tests for the recovery, locking and write-validation defects
// of issue 12 ("no acknowledged write lost"). Each fails on the code before
// the fix (adfaf4b).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

// A bad range in a Batch is refused at Apply (inverted) or ignored (empty),
// before it reaches the WAL; the DB stays writable, flushes and reopens.
func TestBatchBadRangeIsRefusedBeforeTheWAL(t *testing.T) {
	fs := vfs.NewMem()
	db, err := vigil.Open("db", &vigil.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	b.Put([]byte("a"), []byte("1"))
	b.DeleteRange([]byte("z"), []byte("b")) // inverted
	if err := db.Apply(b, vigil.Sync); !errors.Is(err, vigil.ErrInvalidArgument) {
		t.Fatalf("Apply of an inverted range = %v, want ErrInvalidArgument", err)
	}
	if _, err := db.Get([]byte("a")); !errors.Is(err, vigil.ErrNotFound) {
		t.Fatalf("the refused batch's Put is visible: %v", err)
	}
	b = db.NewBatch()
	b.Put([]byte("k"), []byte("v"))
	b.DeleteRange([]byte("k"), []byte("k")) // empty: a no-op
	if b.Count() != 1 {
		t.Fatalf("empty range was recorded: batch count %d", b.Count())
	}
	if err := db.Apply(b, vigil.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteRange([]byte("k"), []byte("k"), vigil.Sync); err != nil {
		t.Fatalf("DB.DeleteRange of an empty range = %v, want a no-op", err)
	}
	if err := db.DeleteRange([]byte("q"), []byte("p"), nil); !errors.Is(err, vigil.ErrInvalidArgument) {
		t.Fatalf("DB.DeleteRange inverted = %v", err)
	}
	if err := db.Flush(); err != nil {
		t.Fatalf("Flush after bad ranges: %v", err)
	}
	if err := db.Put([]byte("after"), []byte("x"), vigil.Sync); err != nil {
		t.Fatalf("DB not writable after bad ranges: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = vigil.Open("db", &vigil.Options{FS: fs})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	for _, k := range []string{"k", "after"} {
		if _, err := db.Get([]byte(k)); err != nil {
			t.Fatalf("Get(%s) after reopen: %v", k, err)
		}
	}
}

// Sync with DisableWAL would acknowledge a write nothing made durable.
func TestSyncWithoutWALIsInvalid(t *testing.T) {
	db, err := vigil.Open("db", &vigil.Options{FS: vfs.NewMem(), DisableWAL: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Put([]byte("k"), []byte("v"), vigil.Sync); !errors.Is(err, vigil.ErrInvalidArgument) {
		t.Fatalf("synced Put with DisableWAL = %v, want ErrInvalidArgument", err)
	}
	if err := db.Put([]byte("k"), []byte("v"), nil); err != nil {
		t.Fatalf("unsynced Put with DisableWAL: %v", err)
	}
}

// A writer stalled at L0StopWritesTrigger (automatic compactions off) must
// not hold the commit lock: a manual Compact clears the stall, and Close
// returns.
func TestStalledWriterDoesNotHangCompactOrClose(t *testing.T) {
	for _, then := range []string{"compact", "close"} {
		t.Run(then, func(t *testing.T) {
			db, err := vigil.Open("db", &vigil.Options{
				FS: vfs.NewMem(), WriteBufferSize: 64 << 10, DisableAutomaticCompactions: true,
				L0CompactionTrigger: 2, L0StopWritesTrigger: 2, MaxImmutableMemtables: 1,
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				if err := db.Put([]byte(fmt.Sprintf("k%d", i)), []byte("v"), nil); err != nil {
					t.Fatal(err)
				}
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			// L0 is at the stop trigger: a writer that fills the memtable
			// stalls.
			writerDone := make(chan error, 1)
			go func() {
				val := make([]byte, 1024)
				for i := 0; ; i++ {
					if err := db.Put([]byte(fmt.Sprintf("w%06d", i)), val, nil); err != nil {
						writerDone <- err
						return
					}
					if i == 100 { // a memtable and a half: one stall
						writerDone <- nil
						return
					}
				}
			}()
			deadline := time.Now().Add(10 * time.Second)
			for db.Metrics().Stall.Waiting == 0 && len(writerDone) == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the writer never stalled")
				}
				time.Sleep(time.Millisecond)
			}
			if len(writerDone) > 0 {
				t.Fatalf("the writer finished without stalling: %v", <-writerDone)
			}
			// Give the writer time to block in the stall.
			time.Sleep(20 * time.Millisecond)
			done := make(chan error, 1)
			go func() {
				if then == "compact" {
					done <- db.Compact(nil, nil)
				} else {
					done <- db.Close()
				}
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%s: %v", then, err)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s hangs behind a stalled writer", then)
			}
			select {
			case err := <-writerDone:
				if then == "compact" && err != nil {
					t.Fatalf("writer after the compaction cleared the stall: %v", err)
				}
				if then == "close" && err != nil && !errors.Is(err, vigil.ErrClosed) {
					t.Fatalf("stalled writer at Close: %v, want nil or ErrClosed", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the stalled writer never returned")
			}
			if then == "compact" {
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// A batch bigger than the memtable but within the limit is applied, lands
// in a memtable of its own, and survives a reopen.
func TestBatchBiggerThanMemtable(t *testing.T) {
	fs := vfs.NewMem()
	opts := &vigil.Options{FS: fs, WriteBufferSize: 256 << 10}
	db, err := vigil.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	val := make([]byte, 1000)
	for i := 0; i < 2000; i++ { // ~2 MB, 8x the write buffer
		b.Put([]byte(fmt.Sprintf("big%06d", i)), val)
	}
	if err := db.Apply(b, vigil.Sync); err != nil {
		t.Fatalf("Apply of a batch 8x the write buffer: %v", err)
	}
	if err := db.Put([]byte("after"), []byte("x"), vigil.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = vigil.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, k := range []string{"big000000", "big001999", "after"} {
		if _, err := db.Get([]byte(k)); err != nil {
			t.Fatalf("Get(%s): %v", k, err)
		}
	}
}

// An iterator that outlives DB.Close stops with ErrClosed, and Close says
// how many iterators were left open.
func TestIteratorsStopAtClose(t *testing.T) {
	fs := vfs.NewMem()
	db, err := vigil.Open("db", &vigil.Options{FS: fs, WriteBufferSize: 64 << 10, MaxOpenFiles: 70})
	if err != nil {
		t.Fatal(err)
	}
	val := make([]byte, 100)
	for i := 0; i < 5000; i++ {
		if err := db.Put([]byte(fmt.Sprintf("k%06d", i)), val, nil); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !it.First() {
		t.Fatal("empty iterator")
	}
	err = db.Close()
	if err == nil {
		t.Fatal("Close with an open iterator returned nil, want an error naming the leaked iterator")
	}
	t.Logf("Close: %v", err)
	steps := 0
	for it.Next() {
		steps++
	}
	if steps > 0 || !errors.Is(it.Error(), vigil.ErrClosed) {
		t.Fatalf("after Close the iterator stepped %d times, error %v; want no step and ErrClosed", steps, it.Error())
	}
	if it.SeekGE([]byte("k004000")) {
		t.Fatal("SeekGE after Close positioned the iterator")
	}
	_ = it.Close()
}

// blockingSyncFS blocks the Sync of files whose name ends in suffix while
// armed, and can make it fail. With a marker, only files into which the
// marker bytes were written are blocked: the WAL that holds the test's
// write, not a spare WAL that the DB prepares in the background (blocking
// that one would stall the next rotation, whenever it happens to run).
type blockingSyncFS struct {
	vfs.FS
	suffix  string
	marker  []byte
	armed   atomic.Bool
	failing atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (fs *blockingSyncFS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	if err != nil || len(name) < len(fs.suffix) || name[len(name)-len(fs.suffix):] != fs.suffix {
		return f, err
	}
	return &blockingSyncFile{File: f, fs: fs}, nil
}

type blockingSyncFile struct {
	vfs.File
	fs  *blockingSyncFS
	hit atomic.Bool // the marker was written into this file
}

func (f *blockingSyncFile) Write(p []byte) (int, error) {
	if f.fs.marker != nil && bytes.Contains(p, f.fs.marker) {
		f.hit.Store(true)
	}
	return f.File.Write(p)
}

func (f *blockingSyncFile) Sync() error {
	if f.fs.armed.Load() && (f.fs.marker == nil || f.hit.Load()) {
		select {
		case f.fs.entered <- struct{}{}:
		default:
		}
		<-f.fs.release
		if f.fs.failing.Load() {
			return errors.New("injected fsync failure")
		}
	}
	return f.File.Sync()
}

// SyncData blocks as Sync does: the WAL's syncs into its zero reserve are
// SyncData calls.
func (f *blockingSyncFile) SyncData() error { return f.Sync() }

// A synced write becomes visible only after its WAL fsync; if the fsync
// fails it never becomes visible.
func TestSyncedWriteVisibleOnlyAfterFsync(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fsyncFails=%v", fail), func(t *testing.T) {
			fs := &blockingSyncFS{FS: vfs.NewMem(), suffix: ".log", marker: []byte("v-awaiting-fsync"), entered: make(chan struct{}, 1), release: make(chan struct{})}
			db, err := vigil.Open("db", &vigil.Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var releaseOnce sync.Once
			release := func() {
				releaseOnce.Do(func() {
					fs.armed.Store(false)
					close(fs.release)
				})
			}
			defer release() // before Close: a failed check must not hang it
			fs.failing.Store(fail)
			fs.armed.Store(true)
			putDone := make(chan error, 1)
			go func() { putDone <- db.Put([]byte("k"), []byte("v-awaiting-fsync"), vigil.Sync) }()
			<-fs.entered // the WAL fsync is in progress
			// An unsynced write behind it must not become visible either:
			// visibility is a prefix of the commit order.
			otherDone := make(chan error, 1)
			go func() { otherDone <- db.Put([]byte("k2"), []byte("v2"), nil) }()
			time.Sleep(20 * time.Millisecond)
			if _, err := db.Get([]byte("k")); !errors.Is(err, vigil.ErrNotFound) {
				t.Fatalf("synced write visible before its fsync completed (Get = %v)", err)
			}
			if _, err := db.Get([]byte("k2")); !errors.Is(err, vigil.ErrNotFound) {
				t.Fatalf("a later write visible before the earlier synced one (Get = %v)", err)
			}
			release()
			err = <-putDone
			err2 := <-otherDone
			if fail {
				if err == nil {
					t.Fatal("synced Put whose fsync failed returned nil")
				}
				if err2 == nil {
					t.Fatal("the write behind a failed fsync returned nil but can never be visible")
				}
				for _, k := range []string{"k", "k2"} {
					if _, err := db.Get([]byte(k)); !errors.Is(err, vigil.ErrNotFound) {
						t.Fatalf("write %s visible after its WAL fsync failed (Get = %v)", k, err)
					}
				}
				return
			}
			if err != nil || err2 != nil {
				t.Fatalf("Put: %v, %v", err, err2)
			}
			for _, k := range []string{"k", "k2"} {
				if _, err := db.Get([]byte(k)); err != nil {
					t.Fatalf("Get(%s) after fsync: %v", k, err)
				}
			}
		})
	}
}

// A CURRENT that names a missing MANIFEST is corruption, and so is a
// MANIFEST whose header number disagrees with its name.
func TestCurrentAndManifestNames(t *testing.T) {
	fs := vfs.NewMem()
	db, err := vigil.Open("db", &vigil.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Put([]byte("k"), []byte("v"), vigil.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	current := readFile(t, fs, "db/CURRENT")
	manifest := current[:len(current)-1]

	t.Run("missing", func(t *testing.T) {
		c := cloneFS(t, fs)
		if err := c.Remove("db/" + manifest); err != nil {
			t.Fatal(err)
		}
		if _, err := vigil.Open("db", &vigil.Options{FS: c}); !errors.Is(err, vigil.ErrCorruption) {
			t.Fatalf("Open with CURRENT naming a missing MANIFEST = %v, want ErrCorruption", err)
		}
	})
	t.Run("renamed", func(t *testing.T) {
		c := cloneFS(t, fs)
		if err := c.Rename("db/"+manifest, "db/MANIFEST-999999"); err != nil {
			t.Fatal(err)
		}
		writeFile(t, c, "db/CURRENT", "MANIFEST-999999\n")
		if _, err := vigil.Open("db", &vigil.Options{FS: c}); !errors.Is(err, vigil.ErrCorruption) {
			t.Fatalf("Open of a MANIFEST whose header names another number = %v, want ErrCorruption", err)
		}
	})
}

func writeFile(t *testing.T, fs vfs.FS, name, content string) {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(f, content); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// corruptOnCloseFS flips a byte of every new table when its writer closes
// the file: a write that reached the disk wrong after the writer's own
// checks. The table must be re-read before an edit names it.
type corruptOnCloseFS struct {
	vfs.FS
	on atomic.Bool
}

func (fs *corruptOnCloseFS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	if err != nil || !fs.on.Load() || len(name) < 4 || name[len(name)-4:] != ".sst" {
		return f, err
	}
	return &corruptOnCloseFile{File: f, fs: fs.FS, name: name}, nil
}

type corruptOnCloseFile struct {
	vfs.File
	fs   vfs.FS
	name string
	once sync.Once
}

func (f *corruptOnCloseFile) Close() error {
	err := f.File.Close()
	f.once.Do(func() {
		rf, rerr := f.fs.OpenReadWrite(f.name)
		if rerr != nil {
			return
		}
		defer rf.Close()
		st, _ := rf.Stat()
		// A byte inside the index block region, near the end of the file.
		off := st.Size() - 70
		b := make([]byte, 1)
		if _, rerr := rf.ReadAt(b, off); rerr == nil {
			b[0] ^= 0x10
			_, _ = rf.WriteAt(b, off)
			_ = rf.Sync()
		}
	})
	return err
}

// A flush whose table reads back wrong fails before any MANIFEST edit
// names the table: the data stays in the WAL, nothing is lost.
func TestNewTableIsReadBackBeforeTheEdit(t *testing.T) {
	fs := &corruptOnCloseFS{FS: vfs.NewMem()}
	db, err := vigil.Open("db", &vigil.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 500; i++ {
		if err := db.Put([]byte(fmt.Sprintf("k%04d", i)), []byte("value"), vigil.Sync); err != nil {
			t.Fatal(err)
		}
	}
	fs.on.Store(true)
	if err := db.Flush(); !errors.Is(err, vigil.ErrCorruption) {
		t.Fatalf("Flush of a table that reads back corrupt = %v, want ErrCorruption", err)
	}
	_ = db.Close()
	fs.on.Store(false)
	db, err = vigil.Open("db", &vigil.Options{FS: fs})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	for i := 0; i < 500; i++ {
		if _, err := db.Get([]byte(fmt.Sprintf("k%04d", i))); err != nil {
			t.Fatalf("k%04d after reopen: %v", i, err)
		}
	}
}

// A compaction must not let a version that is applied but not yet visible
// (a synced write waiting for its fsync) shadow the version readers still
// see: the current visible seqnum counts as a snapshot. Found by the stress
// runner (seed 753592020, inprocess) once synced writes were published only
// after their fsync.
func TestCompactionKeepsVersionReadersSee(t *testing.T) {
	fs := &blockingSyncFS{FS: vfs.NewMem(), suffix: ".log", marker: []byte("v2-awaiting-fsync"), entered: make(chan struct{}, 1), release: make(chan struct{})}
	db, err := vigil.Open("db", &vigil.Options{FS: fs, DisableAutomaticCompactions: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { fs.armed.Store(false); close(fs.release) }) }
	defer release()
	if err := db.Put([]byte("k"), []byte("v1"), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	fs.armed.Store(true)
	done := make(chan error, 1)
	go func() { done <- db.Put([]byte("k"), []byte("v2-awaiting-fsync"), vigil.Sync) }()
	<-fs.entered // v2 is in the memtable, its fsync blocked: not visible
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	if v, err := db.Get([]byte("k")); err != nil || string(v) != "v1" {
		t.Fatalf("while v2 waits for its fsync, Get = %q, %v; want the visible v1", v, err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v, err := db.Get([]byte("k")); err != nil || string(v) != "v2-awaiting-fsync" {
		t.Fatalf("after the fsync, Get = %q, %v; want v2", v, err)
	}
}
