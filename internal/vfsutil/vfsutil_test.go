package vfsutil

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
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
