package backup

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/cockroachdb/pebble/vfs/errorfs"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/internal/vfsutil"
)

var errCrash = errors.New("injected crash")

// crasher makes the file system "crash" at the at-th write operation under
// prefix (links count too, since a checkpoint links from the DB directory):
// that operation and every later one under prefix fail, as if the process
// had died there. Disarmed it passes everything.
type crasher struct {
	prefix  string
	armed   atomic.Bool
	at, n   atomic.Int64
	crashed atomic.Bool
}

func (c *crasher) MaybeError(op errorfs.Op, path string) error {
	if !c.armed.Load() || !(strings.HasPrefix(path, c.prefix) || op == errorfs.OpLink) {
		return nil
	}
	if c.crashed.Load() {
		return errCrash
	}
	if op.OpKind() != errorfs.OpKindWrite {
		return nil
	}
	if c.n.Add(1)-1 == c.at.Load() {
		c.crashed.Store(true)
		return errCrash
	}
	return nil
}

// TestCrashDuringCreate crashes the second Create at each of its
// file-system writes in turn (a strict in-memory file system, reset to what
// was synced), and checks that the backup directory is usable: every listed
// backup verifies and restores to what it held, the next Create succeeds,
// and what the crash left behind is gone after it.
func TestCrashDuringCreate(t *testing.T) {
	crashes := 0
	for at := int64(0); ; at++ {
		if !crashOnce(t, at) {
			t.Logf("Create does %d file-system writes; crashed at each", at)
			break
		}
		crashes++
		if t.Failed() {
			break
		}
	}
	if crashes < 20 {
		t.Fatalf("only %d crash points", crashes)
	}
}

// crashOnce runs the scenario with a crash at write at; it reports whether
// the crash happened (false: Create did fewer writes).
func crashOnce(t *testing.T, at int64) bool {
	t.Helper()
	mem := vfs.NewStrictMem()
	inj := &crasher{prefix: "/backups"}
	fs := vfsutil.SyncDataAsSync(errorfs.Wrap(mem, inj))
	db := openDB(t, fs, "/db")
	w := newWriter(t, db, uint64(at))
	w.puts(80, 200)
	w.flush()
	w.puts(20, 200)
	want := map[uint64]model{1: w.m.clone()}
	e, err := Open("/backups", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Create(db); err != nil {
		t.Fatal(err)
	}
	w.puts(80, 200)
	w.flush()
	w.puts(80, 200)
	w.flush()
	w.deletes(5, 200)
	want[2] = w.m.clone()

	inj.at.Store(at)
	inj.armed.Store(true)
	_, _, err = e.Create(db)
	inj.armed.Store(false)
	if !inj.crashed.Load() {
		if err != nil {
			t.Fatal(err)
		}
		e.Close()
		db.Close()
		return false
	}
	// Create fails, or (a crash in its last clean-up, after the commit
	// point) succeeds, and then the backup must survive.
	committed := err == nil
	if err != nil && !errors.Is(err, errCrash) {
		t.Fatalf("crash at write %d: Create returned %v", at, err)
	}
	e.Close()
	// The DB is closed before the reset, which MemFS does not support under
	// open files, and reopened after it; every write it took was synced.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	mem.ResetToSyncedState()
	db = openDB(t, mem, "/db")
	defer db.Close()

	// After the crash.
	where := fmt.Sprintf("crash at write %d", at)
	e, err = Open("/backups", &Options{FS: mem})
	if err != nil {
		t.Fatalf("%s: Open: %v", where, err)
	}
	defer e.Close()
	list, err := e.List()
	if err != nil {
		t.Fatalf("%s: List: %v", where, err)
	}
	if len(list) == 0 || list[0].ID != 1 || len(list) > 2 || committed && len(list) != 2 {
		t.Fatalf("%s (Create returned %v): List = %v", where, err, list)
	}
	for _, in := range list {
		checkBackup(t, where, e, mem, in.ID, want[in.ID])
	}
	// The next Create works and cleans up.
	info, _, err := e.Create(db)
	if err != nil {
		t.Fatalf("%s: next Create: %v", where, err)
	}
	checkBackup(t, where+", next Create", e, mem, info.ID, want[2])
	if list, err = e.List(); err != nil {
		t.Fatal(err)
	}
	checkClean(t, where, e, list)
	return true
}

// checkBackup verifies backup id and restores it, comparing with want.
func checkBackup(t *testing.T, where string, e *Engine, fs vfs.FS, id uint64, want model) {
	t.Helper()
	if err := e.Verify(id); err != nil {
		t.Fatalf("%s: verify %d: %v", where, id, err)
	}
	target := fmt.Sprintf("/restore-%d", id)
	_ = fs.RemoveAll(target)
	if err := e.Restore(id, target); err != nil {
		t.Fatalf("%s: restore %d: %v", where, id, err)
	}
	if d := diffModels(restoredContents(t, fs, target), want); d != "" {
		t.Fatalf("%s: backup %d restored:\n%s", where, id, d)
	}
}

// checkClean: the backup directory holds exactly what the listed backups
// need (and its LOCK).
func checkClean(t *testing.T, where string, e *Engine, list []Info) {
	t.Helper()
	if got, want := sharedNames(t, e), referenced(list); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("%s: shared/ = %v, the backups list %v", where, got, want)
	}
	var ids []string
	for _, in := range list {
		ids = append(ids, fmt.Sprint(in.ID))
	}
	for _, sub := range []string{privateDir, metaDir} {
		names, err := e.fs.List(e.path(sub))
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(names)
		if strings.Join(names, " ") != strings.Join(ids, " ") {
			t.Fatalf("%s: %s/ = %v, want %v", where, sub, names, ids)
		}
	}
	top, err := e.fs.List(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(top)
	if strings.Join(top, " ") != "LOCK meta private shared" {
		t.Fatalf("%s: %s holds %v", where, e.dir, top)
	}
}

// TestCrashDuringDelete crashes Delete at each of its writes: afterwards
// the backup is either whole (and verifies) or gone, the other one
// verifies, and a GC leaves exactly what the listed backups need.
func TestCrashDuringDelete(t *testing.T) {
	for at := int64(0); ; at++ {
		mem := vfs.NewStrictMem()
		inj := &crasher{prefix: "/backups"}
		fs := vfsutil.SyncDataAsSync(errorfs.Wrap(mem, inj))
		db := openDB(t, fs, "/db")
		w := newWriter(t, db, 3)
		e, err := Open("/backups", &Options{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		want := map[uint64]model{}
		for id := uint64(1); id <= 2; id++ {
			w.puts(60, 300)
			w.flush()
			w.puts(60, 300)
			w.flush()
			if id == 2 { // backup 1's tables are backup 1's alone
				if err := db.Compact(nil, nil); err != nil {
					t.Fatal(err)
				}
			}
			want[id] = w.m.clone()
			if _, _, err := e.Create(db); err != nil {
				t.Fatal(err)
			}
		}
		inj.at.Store(at)
		inj.armed.Store(true)
		err = e.Delete(1)
		inj.armed.Store(false)
		e.Close()
		if cerr := db.Close(); cerr != nil {
			t.Fatal(cerr)
		}
		if !inj.crashed.Load() {
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("Delete does %d file-system writes; crashed at each", at)
			return
		}
		mem.ResetToSyncedState()
		where := fmt.Sprintf("crash at write %d of Delete", at)
		e, err = Open("/backups", &Options{FS: mem})
		if err != nil {
			t.Fatal(err)
		}
		list, err := e.List()
		if err != nil || len(list) == 0 || list[len(list)-1].ID != 2 {
			t.Fatalf("%s: List = %v, %v", where, list, err)
		}
		for _, in := range list {
			checkBackup(t, where, e, mem, in.ID, want[in.ID])
		}
		if _, err := e.GC(); err != nil {
			t.Fatalf("%s: GC: %v", where, err)
		}
		checkClean(t, where, e, list)
		e.Close()
	}
}

// TestCrashDuringRestore crashes Restore at each of its file-system writes
// with a DB of someone else's at the target plus ".tmp" (the name the
// temporary directory once had): afterwards that DB is intact, the target
// is missing or holds the whole backup, and nothing but Restore's own
// temporary directory is left. Restores onto an existing target of any
// kind are refused before anything is written.
func TestCrashDuringRestore(t *testing.T) {
	for at := int64(0); ; at++ {
		mem := vfs.NewStrictMem()
		inj := &crasher{prefix: "/restore"}
		fs := vfsutil.SyncDataAsSync(errorfs.Wrap(mem, inj))
		db := openDB(t, fs, "/db")
		w := newWriter(t, db, 7)
		w.puts(80, 200)
		w.flush()
		w.puts(20, 200)
		want := w.m.clone()
		e, err := Open("/backups", &Options{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		info, _, err := e.Create(db)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		other := openDB(t, fs, "/restore.tmp")
		if err := other.Put([]byte("owner"), []byte("someone else"), vigil.Sync); err != nil {
			t.Fatal(err)
		}
		if err := other.Close(); err != nil {
			t.Fatal(err)
		}
		if at == 0 {
			for _, target := range []string{"/restore.tmp", "/db", "/backups"} {
				if err := e.Restore(info.ID, target); !errors.Is(err, vigil.ErrInvalidArgument) {
					t.Fatalf("Restore to the existing %s = %v", target, err)
				}
			}
		}

		inj.at.Store(at)
		inj.armed.Store(true)
		err = e.Restore(info.ID, "/restore")
		inj.armed.Store(false)
		e.Close()
		crashed := inj.crashed.Load()
		if !crashed && err != nil {
			t.Fatal(err)
		}
		mem.ResetToSyncedState()
		where := fmt.Sprintf("crash at write %d of Restore", at)
		if got := restoredContents(t, mem, "/restore.tmp"); len(got) != 1 || got["owner"] != "someone else" {
			t.Fatalf("%s: /restore.tmp holds %v", where, got)
		}
		if exists(mem, "/restore") {
			if d := diffModels(restoredContents(t, mem, "/restore"), want); d != "" {
				t.Fatalf("%s: /restore:\n%s", where, d)
			}
		} else if !crashed {
			t.Fatalf("%s: Restore succeeded and left no /restore", where)
		}
		names, err := mem.List("/")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			switch {
			case n == "db" || n == "backups" || n == "restore" || n == "restore.tmp":
			case crashed && strings.HasPrefix(n, "restore"+vfsutil.TempSuffix):
			default:
				t.Fatalf("%s: / holds %q", where, n)
			}
		}
		if !crashed {
			t.Logf("Restore does %d file-system writes; crashed at each", at)
			return
		}
	}
}
