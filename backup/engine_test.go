package backup

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

// TestModel writes, backs up, writes, deletes and compacts, backs up again,
// and restores each backup, comparing it key by key with what had been
// written when it was taken.
// Each seed uses another checksum type for the DB's files (with None the
// MANIFEST has no file checksums to check copies against).
func TestModel(t *testing.T) {
	types := []vigil.ChecksumType{vigil.ChecksumDefault, vigil.ChecksumNone, vigil.ChecksumCRC32c, vigil.ChecksumCRC64}
	for i, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			fs := vfs.NewMem()
			db := openDB(t, fs, "/db", func(o *vigil.Options) { o.ChecksumType = types[i] })
			defer db.Close()
			w := newWriter(t, db, seed)
			e, err := Open("/backups", &Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()

			// Backup 1: three tables and a WAL tail.
			for range 3 {
				w.puts(150, 400)
				w.flush()
			}
			w.puts(60, 400)
			want1 := w.m.clone()
			info1, st1, err := e.Create(db)
			if err != nil {
				t.Fatal(err)
			}
			if st1.SharedCopied != 3 || st1.SharedReused != 0 || st1.PrivateFiles < 3 {
				t.Fatalf("backup 1 stats %+v", st1)
			}

			// Backup 2: deletes, a range deletion, a compaction, more writes.
			w.puts(100, 400)
			w.deletes(40, 400)
			w.flush()
			if err := db.Compact(nil, nil); err != nil {
				t.Fatal(err)
			}
			w.puts(120, 600)
			w.flush()
			w.deletes(10, 600)
			want2 := w.m.clone()
			info2, _, err := e.Create(db)
			if err != nil {
				t.Fatal(err)
			}
			if info1.ID != 1 || info2.ID != 2 || info2.Seq <= info1.Seq {
				t.Fatalf("ids %d %d, seqs %d %d", info1.ID, info2.ID, info1.Seq, info2.Seq)
			}
			if g, err := db.Digest(nil, nil); err != nil || g != info2.Digest {
				t.Fatalf("DB digest %+v (%v), backup 2 recorded %+v", g, err, info2.Digest)
			}

			list, err := e.List()
			if err != nil || len(list) != 2 || list[0].ID != 1 || list[1].ID != 2 {
				t.Fatalf("List = %+v, %v", list, err)
			}
			for i, want := range []model{want1, want2} {
				id := uint64(i + 1)
				if err := e.Verify(id); err != nil {
					t.Fatal(err)
				}
				target := fmt.Sprintf("/restore%d", id)
				if err := e.Restore(id, target); err != nil {
					t.Fatal(err)
				}
				if d := diffModels(restoredContents(t, fs, target), want); d != "" {
					t.Fatalf("backup %d restored:\n%s", id, d)
				}
				if err := e.Restore(id, target); !errors.Is(err, vigil.ErrInvalidArgument) {
					t.Fatalf("restore over an existing dir: %v", err)
				}
			}
			// The restored DB opens read-write and takes writes.
			rdb := openDB(t, fs, "/restore2")
			if err := rdb.Put([]byte("after"), []byte("restore"), vigil.Sync); err != nil {
				t.Fatal(err)
			}
			if d := diffModels(contents(t, rdb), func() model { m := want2.clone(); m["after"] = "restore"; return m }()); d != "" {
				t.Fatalf("restored DB after a write:\n%s", d)
			}
			rdb.Close()

			// Delete 1: backup 2 still verifies and restores, shared/ holds
			// exactly what backup 2 lists.
			if err := e.Delete(1); err != nil {
				t.Fatal(err)
			}
			if err := e.Delete(1); !errors.Is(err, vigil.ErrNotFound) {
				t.Fatalf("second delete: %v", err)
			}
			if err := e.Verify(1); !errors.Is(err, vigil.ErrNotFound) {
				t.Fatalf("verify of a deleted backup: %v", err)
			}
			list, err = e.List()
			if err != nil || len(list) != 1 || list[0].ID != 2 {
				t.Fatalf("List = %+v, %v", list, err)
			}
			if got, want := sharedNames(t, e), referenced(list); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("shared/ = %v, backup 2 lists %v", got, want)
			}
			if err := e.Restore(2, "/restore2b"); err != nil {
				t.Fatal(err)
			}
			if d := diffModels(restoredContents(t, fs, "/restore2b"), want2); d != "" {
				t.Fatalf("backup 2 restored after deleting 1:\n%s", d)
			}
		})
	}
}

// countingFS counts the bytes written to files whose path contains sub.
type countingFS struct {
	vfs.FS
	sub string
	n   atomic.Int64
}

type countingFile struct {
	vfs.File
	n *atomic.Int64
}

func (f countingFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.n.Add(int64(n))
	return n, err
}

func (c *countingFS) Create(name string) (vfs.File, error) {
	f, err := c.FS.Create(name)
	if err != nil || !strings.Contains(name, c.sub) {
		return f, err
	}
	return countingFile{File: f, n: &c.n}, nil
}

// TestIncremental checks that a second backup copies only the tables the
// first does not hold, counting the bytes written into shared/.
func TestIncremental(t *testing.T) {
	mem := vfs.NewMem()
	db := openDB(t, mem, "/db")
	defer db.Close()
	w := newWriter(t, db, 7)
	cfs := &countingFS{FS: mem, sub: "/backups/shared/"}
	e, err := Open("/backups", &Options{FS: cfs})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for range 4 {
		w.puts(200, 1000)
		w.flush()
	}
	info1, st1, err := e.Create(db)
	if err != nil {
		t.Fatal(err)
	}
	if st1.SharedCopied != 4 || cfs.n.Load() != int64(st1.SharedBytesCopied) {
		t.Fatalf("backup 1: %+v, %d bytes written to shared/", st1, cfs.n.Load())
	}
	old := map[string]bool{}
	for _, f := range info1.Files {
		old[f.Name] = f.Shared
	}

	w.puts(50, 1000)
	w.flush()
	w.puts(10, 1000) // WAL only
	cfs.n.Store(0)
	info2, st2, err := e.Create(db)
	if err != nil {
		t.Fatal(err)
	}
	var newBytes uint64
	newFiles := 0
	for _, f := range info2.Files {
		if f.Shared && !old[f.Name] {
			newBytes += f.Size
			newFiles++
		}
	}
	if newFiles != 1 || st2.SharedCopied != 1 || st2.SharedReused != 4 || st2.SharedBytesCopied != newBytes || cfs.n.Load() != int64(newBytes) {
		t.Fatalf("backup 2: %+v; %d new tables of %d bytes; %d bytes written to shared/", st2, newFiles, newBytes, cfs.n.Load())
	}
	t.Logf("backup 2 copied %d bytes of tables (1 new), reused %d bytes (4 tables)", cfs.n.Load(), st2.SharedBytesReused)

	// Nothing new: nothing copied.
	cfs.n.Store(0)
	_, st3, err := e.Create(db)
	if err != nil {
		t.Fatal(err)
	}
	if st3.SharedCopied != 0 || cfs.n.Load() != 0 {
		t.Fatalf("backup 3: %+v, %d bytes written to shared/", st3, cfs.n.Load())
	}
	for id := uint64(1); id <= 3; id++ {
		if err := e.Verify(id); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCreateWhileWriting backs up while a writer goes on: each backup
// restores to exactly a prefix of the writer's sequence of writes.
func TestCreateWhileWriting(t *testing.T) {
	fs := vfs.NewMem()
	db := openDB(t, fs, "/db")
	defer db.Close()
	e, err := Open("/backups", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	key := func(i int) string { return fmt.Sprintf("k%06d", i) }
	val := func(i int) string { return fmt.Sprintf("value of %d", i) }
	var written atomic.Int64
	stop, started := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := db.Put([]byte(key(i)), []byte(val(i)), nil); err != nil {
				t.Error(err)
				return
			}
			written.Store(int64(i + 1))
			if i == 499 {
				close(started)
			}
			if i%700 == 699 {
				if err := db.Flush(); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	<-started
	var before [3]int64
	for i := range before {
		before[i] = written.Load()
		if _, _, err := e.Create(db); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	for i, b := range before {
		id := uint64(i + 1)
		target := fmt.Sprintf("/r%d", id)
		if err := e.Restore(id, target); err != nil {
			t.Fatal(err)
		}
		got := restoredContents(t, fs, target)
		if int64(len(got)) < b {
			t.Fatalf("backup %d holds %d writes; %d had returned before Create", id, len(got), b)
		}
		for j := range len(got) {
			if got[key(j)] != val(j) {
				t.Fatalf("backup %d of %d keys is not a prefix: %s = %q", id, len(got), key(j), got[key(j)])
			}
		}
	}
}

// TestLock: one Engine per backup directory.
func TestLock(t *testing.T) {
	fs := vfs.NewMem()
	e, err := Open("/b", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open("/b", &Options{FS: fs}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.List(); !errors.Is(err, vigil.ErrClosed) {
		t.Fatalf("List after Close: %v", err)
	}
	e2, err := Open("/b", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	e2.Close()
}

// TestEmptyDB backs up and restores a DB without tables or keys, then one
// whose keys are all in the WAL.
func TestEmptyDB(t *testing.T) {
	fs := vfs.NewMem()
	db := openDB(t, fs, "/db")
	defer db.Close()
	e, err := Open("/backups", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	info, st, err := e.Create(db)
	if err != nil {
		t.Fatal(err)
	}
	if info.Digest.Keys != 0 || st.SharedCopied+st.SharedReused != 0 {
		t.Fatalf("empty DB: %+v %+v", info, st)
	}
	if err := e.Restore(info.ID, "/r1"); err != nil {
		t.Fatal(err)
	}
	if m := restoredContents(t, fs, "/r1"); len(m) != 0 {
		t.Fatalf("restored empty DB holds %d keys", len(m))
	}
	w := newWriter(t, db, 9)
	w.puts(50, 100)
	info, _, err = e.Create(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Restore(info.ID, "/r2"); err != nil {
		t.Fatal(err)
	}
	if d := diffModels(restoredContents(t, fs, "/r2"), w.m); d != "" {
		t.Fatal(d)
	}
}
