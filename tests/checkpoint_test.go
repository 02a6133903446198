package tests

import (
	"errors"
	"fmt"
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
			t.Logf("a checkpoint takes %d write ops; crashed at each", k)
			return
		}
		mem.ResetToSyncedState()
		mem.SetIgnoreSyncs(false)
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
