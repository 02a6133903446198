package tests

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil"
)

func fillForCheckpoint(t *testing.T, db *vigil.DB, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := db.Put([]byte(fmt.Sprintf("k%05d", i)), []byte(fmt.Sprintf("v%d", i)), nil); err != nil {
			t.Fatal(err)
		}
		if i == n/2 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := db.DeleteRange([]byte("k00100"), []byte("k00200"), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A checkpoint opens as a DB holding exactly what the source held, in
// tables and in its WAL, and stays put while the source moves on.
func TestCheckpointOpensAsCopy(t *testing.T) {
	for _, disableWAL := range []bool{false, true} {
		t.Run(fmt.Sprintf("DisableWAL=%v", disableWAL), func(t *testing.T) {
			fs := vfs.NewMem()
			db, err := vigil.Open("db", &vigil.Options{FS: fs, WriteBufferSize: 256 << 10, DisableWAL: disableWAL})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			fillForCheckpoint(t, db, 5000)
			want, err := dump(db)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Checkpoint("ckpt"); err != nil {
				t.Fatal(err)
			}
			if err := db.Checkpoint("ckpt"); !errors.Is(err, vigil.ErrInvalidArgument) {
				t.Fatalf("Checkpoint into an existing directory = %v", err)
			}
			if err := db.Put([]byte("k00001"), []byte("later"), nil); err != nil {
				t.Fatal(err)
			}
			cp, err := vigil.Open("ckpt", &vigil.Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			defer cp.Close()
			got, err := dump(cp)
			if err != nil {
				t.Fatal(err)
			}
			if !equalMaps(got, want) {
				t.Fatalf("checkpoint holds %d keys, the source held %d (or values differ)", len(got), len(want))
			}
			if err := cp.Verify(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Checkpoints taken while a writer goes on hold a prefix of its writes.
func TestCheckpointWhileWriting(t *testing.T) {
	fs := vfs.NewMem()
	db, err := vigil.Open("db", &vigil.Options{FS: fs, WriteBufferSize: 128 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			if err := db.Put([]byte(fmt.Sprintf("k%07d", i)), []byte("v"), nil); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for c := 0; c < 5; c++ {
		name := fmt.Sprintf("ckpt%d", c)
		if err := db.Checkpoint(name); err != nil {
			t.Fatal(err)
		}
		cp, err := vigil.Open(name, &vigil.Options{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		got, err := dump(cp)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(got); i++ {
			if _, ok := got[fmt.Sprintf("k%07d", i)]; !ok {
				t.Fatalf("checkpoint %d holds %d keys but not k%07d: not a prefix of the writes", c, len(got), i)
			}
		}
		t.Logf("checkpoint %d: %d keys", c, len(got))
		cp.Close()
	}
	stop.Store(true)
	wg.Wait()
}

// A crash at any file-system write of a checkpoint leaves no checkpoint or
// a whole one, and the source intact.
func TestCrashDuringCheckpoint(t *testing.T) {
	for k := 0; ; k++ {
		pl := newPowerLoss(k, false)
		mem, fs, armed, crashed := pl.Mem, pl.FS, &pl.Armed, &pl.Crashed
		// Another DB named like the old temporary directory: no step of
		// the checkpoint may touch it.
		other := openOtherDB(t, fs, "ckpt.tmp")
		if err := other.Close(); err != nil {
			t.Fatal(err)
		}
		db, err := vigil.Open("db", &vigil.Options{FS: fs, WriteBufferSize: 256 << 10})
		if err != nil {
			t.Fatal(err)
		}
		fillForCheckpoint(t, db, 3000)
		if err := db.SyncWAL(); err != nil {
			t.Fatal(err)
		}
		want, err := dump(db)
		if err != nil {
			t.Fatal(err)
		}
		armed.Store(true)
		cerr := db.Checkpoint("ckpt")
		armed.Store(false)
		db.Close()
		if !crashed.Load() {
			if cerr != nil {
				t.Fatal(cerr)
			}
			checkOtherDB(t, "after Checkpoint", mem, "ckpt.tmp")
			t.Logf("a checkpoint takes %d write ops; crashed at each", k)
			return
		}
		mem.ResetToSyncedState()
		mem.SetIgnoreSyncs(false)
		checkOtherDB(t, fmt.Sprintf("k=%d: after a crash in Checkpoint", k), mem, "ckpt.tmp")
		checkOnlyTemps(t, fmt.Sprintf("k=%d", k), mem, "", "db", "ckpt", "ckpt.tmp")
		for _, dir := range []string{"db", "ckpt"} {
			if _, err := mem.Stat(dir); err != nil {
				continue // no checkpoint: fine
			}
			cp, err := vigil.Open(dir, &vigil.Options{FS: mem})
			if err != nil {
				t.Fatalf("k=%d: %s after a crash in Checkpoint: %v", k, dir, err)
			}
			got, err := dump(cp)
			cp.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !equalMaps(got, want) {
				t.Fatalf("k=%d: %s holds %d keys after a crash in Checkpoint, want %d", k, dir, len(got), len(want))
			}
		}
	}
}

// openOtherDB creates a DB at dir holding one key, "owner" = dir, synced:
// a bystander that Checkpoint and Restore must leave alone.
func openOtherDB(t *testing.T, fs vfs.FS, dir string) *vigil.DB {
	t.Helper()
	db, err := vigil.Open(dir, &vigil.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Put([]byte("owner"), []byte(dir), vigil.Sync); err != nil {
		t.Fatal(err)
	}
	return db
}

// checkOtherDB checks that the bystander openOtherDB made at dir is intact.
func checkOtherDB(t *testing.T, where string, fs vfs.FS, dir string) {
	t.Helper()
	db, err := vigil.Open(dir, &vigil.Options{FS: fs})
	if err != nil {
		t.Fatalf("%s: the DB at %s does not open: %v", where, dir, err)
	}
	defer db.Close()
	got, err := dump(db)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["owner"] != dir {
		t.Fatalf("%s: the DB at %s holds %v, want only owner=%s", where, dir, got, dir)
	}
}

// checkOnlyTemps fails unless dir holds only the names in keep (each may be
// missing) and temporary directories of Vigil's own (name + ".tmp-" + 16 hex
// digits, which a crash may leave).
func checkOnlyTemps(t *testing.T, where string, fs vfs.FS, dir string, keep ...string) {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if slices.Contains(keep, n) {
			continue
		}
		if i := strings.LastIndex(n, ".tmp-"); i >= 0 && len(n)-i-len(".tmp-") == 16 && slices.Contains(keep, n[:i]) {
			continue
		}
		t.Fatalf("%s: %s holds %q, not one of %v or their temporaries", where, dir, n, keep)
	}
}

// Checkpoint never touches what it did not create: a live DB named like
// its target plus ".tmp" keeps working and keeps its writes, and a target
// that exists (a file, a directory, a DB) is ErrInvalidArgument with
// nothing written.
func TestCheckpointLeavesOthersAlone(t *testing.T) {
	for _, real := range []bool{false, true} {
		t.Run(fmt.Sprintf("os=%v", real), func(t *testing.T) {
			fs, root := vfs.FS(vfs.NewMem()), ""
			if real {
				fs, root = vfs.Default, t.TempDir()
			}
			path := func(n string) string { return fs.PathJoin(root, n) }
			db, err := vigil.Open(path("db"), &vigil.Options{FS: fs, WriteBufferSize: 256 << 10})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			fillForCheckpoint(t, db, 2000)
			live := openOtherDB(t, fs, path("snap.tmp"))
			if err := db.Checkpoint(path("snap")); err != nil {
				t.Fatal(err)
			}
			if err := live.Put([]byte("after"), []byte("x"), vigil.Sync); err != nil {
				t.Fatalf("the live DB at snap.tmp after a Checkpoint to snap: %v", err)
			}
			if err := live.Delete([]byte("after"), vigil.Sync); err != nil {
				t.Fatal(err)
			}
			if err := live.Close(); err != nil {
				t.Fatal(err)
			}
			checkOtherDB(t, "after Checkpoint", fs, path("snap.tmp"))

			// Existing targets of every kind.
			if err := fs.MkdirAll(path("dir"), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := fs.Create(path("file"))
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			for _, target := range []string{"snap", "snap.tmp", "dir", "file"} {
				if err := db.Checkpoint(path(target)); !errors.Is(err, vigil.ErrInvalidArgument) {
					t.Fatalf("Checkpoint to the existing %s = %v, want ErrInvalidArgument", target, err)
				}
			}
			checkOtherDB(t, "after Checkpoints to existing targets", fs, path("snap.tmp"))
			if names, _ := fs.List(path("dir")); len(names) != 0 {
				t.Fatalf("dir holds %v after a refused Checkpoint", names)
			}
			checkOnlyTemps(t, "no temporaries left", fs, root, "db", "snap", "snap.tmp", "dir", "file")
			for _, n := range mustList(t, fs, root) {
				if strings.Contains(n, ".tmp-") {
					t.Fatalf("%s left behind", n)
				}
			}
		})
	}
}

func mustList(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// Of concurrent Checkpoints to one target exactly one succeeds, the others
// fail with ErrInvalidArgument, and the target opens with the source's
// digest.
func TestConcurrentCheckpointsToOneTarget(t *testing.T) {
	for _, real := range []bool{false, true} {
		t.Run(fmt.Sprintf("os=%v", real), func(t *testing.T) {
			fs, root := vfs.FS(vfs.NewMem()), ""
			if real {
				fs, root = vfs.Default, t.TempDir()
			}
			db, err := vigil.Open(fs.PathJoin(root, "db"), &vigil.Options{FS: fs, WriteBufferSize: 256 << 10})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			fillForCheckpoint(t, db, 2000)
			want, err := db.Digest(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			const rounds, callers = 20, 3
			for r := 0; r < rounds; r++ {
				target := fs.PathJoin(root, fmt.Sprintf("snap%d", r))
				errs := make([]error, callers)
				var wg sync.WaitGroup
				for c := range errs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs[c] = db.Checkpoint(target)
					}()
				}
				wg.Wait()
				ok := 0
				for _, err := range errs {
					switch {
					case err == nil:
						ok++
					case !errors.Is(err, vigil.ErrInvalidArgument):
						t.Fatalf("round %d: Checkpoint = %v", r, err)
					}
				}
				if ok != 1 {
					t.Fatalf("round %d: %d of %d concurrent Checkpoints succeeded: %v", r, ok, callers, errs)
				}
				cp, err := vigil.Open(target, &vigil.Options{FS: fs, ReadOnly: true})
				if err != nil {
					t.Fatalf("round %d: the checkpoint does not open: %v", r, err)
				}
				got, err := cp.Digest(nil, nil)
				cp.Close()
				if err != nil || got != want {
					t.Fatalf("round %d: the checkpoint's digest is %+v (%v), the DB's %+v", r, got, err, want)
				}
			}
			for _, n := range mustList(t, fs, root) {
				if strings.Contains(n, ".tmp-") {
					t.Fatalf("%s left behind", n)
				}
			}
		})
	}
}
