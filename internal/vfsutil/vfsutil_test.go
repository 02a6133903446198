package vfsutil

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/cockroachdb/pebble/vfs/errorfs"
)

// TestSyncMakesDurable: on a strict in-memory FS a file and its directory
// entry survive a simulated crash only once SyncFile and SyncDir ran.
func TestSyncMakesDurable(t *testing.T) {
	for _, synced := range []bool{false, true} {
		fs := vfs.NewStrictMem()
		if err := fs.MkdirAll("d", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := SyncDir(fs, ""); err != nil {
			t.Fatal(err)
		}
		f, err := fs.Create("d/f")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("data")); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if synced {
			if err := SyncFile(fs, "d/f"); err != nil {
				t.Fatal(err)
			}
			if err := SyncDir(fs, "d"); err != nil {
				t.Fatal(err)
			}
		}
		fs.ResetToSyncedState()
		_, err = fs.Stat("d/f")
		if synced && err != nil {
			t.Fatalf("synced file lost in a crash: %v", err)
		}
		if !synced && err == nil {
			t.Fatal("an unsynced directory entry survived the crash: the test cannot tell syncing from not")
		}
	}
}

func TestSyncErrorsNameThePath(t *testing.T) {
	fs := vfs.NewMem()
	if err := SyncFile(fs, "missing"); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("SyncFile of a missing file: %v", err)
	}
	if err := SyncDir(fs, "nodir"); err == nil || !strings.Contains(err.Error(), "nodir") {
		t.Fatalf("SyncDir of a missing directory: %v", err)
	}
}

// TestSyncDataAsSync: errorfs fails Sync but not SyncData; through the
// wrapper a SyncData fails too, for every way of opening a file.
func TestSyncDataAsSync(t *testing.T) {
	mem := vfs.NewMem()
	efs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if op == errorfs.OpFileSync {
			return errorfs.ErrInjected
		}
		return nil
	}))
	f, err := efs.Create("a")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SyncData(); err != nil {
		t.Fatalf("errorfs itself does not inject into SyncData, got %v; the wrapper may be unneeded", err)
	}
	f.Close()
	fs := SyncDataAsSync(efs)
	opens := map[string]func() (vfs.File, error){
		"Create":        func() (vfs.File, error) { return fs.Create("b") },
		"Open":          func() (vfs.File, error) { return fs.Open("a") },
		"OpenReadWrite": func() (vfs.File, error) { return fs.OpenReadWrite("a") },
		"OpenDir":       func() (vfs.File, error) { return fs.OpenDir("") },
	}
	// (ReuseForWrite is wrapped too, but errorfs v1.1.5 returns its files
	// unwrapped, so not even their Sync is injected.)
	for _, name := range []string{"Create", "Open", "OpenReadWrite", "OpenDir"} {
		f, err := opens[name]()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := f.SyncData(); !errors.Is(err, errorfs.ErrInjected) {
			t.Errorf("%s: SyncData through the wrapper: %v, want the injected error", name, err)
		}
		f.Close()
	}
	if _, err := fs.Open("missing"); err == nil {
		t.Fatal("opening a missing file succeeded")
	}
}
