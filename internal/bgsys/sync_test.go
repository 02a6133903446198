package bgsys

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/cockroachdb/pebble/vfs/errorfs"
)

// TestSyncOSFile syncs files and a directory of the OS's file system: the
// calls succeed and, where AIO exists, every one takes the asynchronous
// path.
func TestSyncOSFile(t *testing.T) {
	dir := t.TempDir()
	f, err := vfs.Default.Create(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := vfs.Default.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	before := AsyncSyncs()
	for i := range 3 {
		if _, err := f.Write([]byte("some bytes to make durable")); err != nil {
			t.Fatal(err)
		}
		if err := Sync(f); err != nil {
			t.Fatalf("Sync #%d: %v", i, err)
		}
		if err := SyncData(f); err != nil {
			t.Fatalf("SyncData #%d: %v", i, err)
		}
	}
	if err := Sync(d); err != nil {
		t.Fatalf("Sync of the directory: %v", err)
	}
	got := AsyncSyncs() - before
	if !asyncAvailable() {
		t.Logf("no asynchronous syncs here: %d taken", got)
		if got != 0 {
			t.Errorf("%d asynchronous syncs without AIO", got)
		}
		return
	}
	if got != 7 {
		t.Errorf("%d of 7 syncs asynchronous, want all", got)
	}
}

// TestSyncWrappedFileDirect: a file of another file system (here errorfs
// over the OS's) must see the call itself, so that injected faults and
// wrappers' bookkeeping happen: its error is Sync's, and nothing goes
// around it.
func TestSyncWrappedFileDirect(t *testing.T) {
	dir := t.TempDir()
	injected := errors.New("injected sync fault")
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if op == errorfs.OpFileSync {
			return injected
		}
		return nil
	}))
	f, err := fs.Create(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := AsyncSyncs()
	if err := Sync(f); !errors.Is(err, injected) {
		t.Errorf("Sync: %v, want the injected fault", err)
	}
	// errorfs v1.1.5 does not inject into SyncData; the call must still
	// be the file's own.
	if err := SyncData(f); err != nil && !errors.Is(err, injected) {
		t.Errorf("SyncData: %v", err)
	}
	if n := AsyncSyncs() - before; n != 0 {
		t.Errorf("%d syncs of a wrapped file went around it", n)
	}
}

// TestSyncUnsupported: a file whose file system has no fsync (/dev/null)
// cannot be submitted; the direct call reports the kernel's EINVAL, the
// same error fsync(2) gives.
func TestSyncUnsupported(t *testing.T) {
	f, err := vfs.Default.Open(os.DevNull)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	if err := f.Sync(); !errors.Is(err, syscall.EINVAL) {
		t.Skipf("fsync of %s: %v here, not EINVAL", os.DevNull, err)
	}
	before := AsyncSyncs()
	if err := Sync(f); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Sync of %s: %v, want EINVAL", os.DevNull, err)
	}
	if n := AsyncSyncs() - before; n != 0 {
		t.Errorf("%d asynchronous syncs of a file without fsync", n)
	}
}

// TestSyncConcurrent runs more syncs at once than the AIO context holds
// (those beyond it, if they meet, take the direct path): every one
// succeeds, and where AIO exists some, and no more than were made, went
// through it.
func TestSyncConcurrent(t *testing.T) {
	dir := t.TempDir()
	const n = 2*aioDepthForTest + 8
	before := AsyncSyncs()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := vfs.Default.Create(filepath.Join(dir, fmt.Sprint(i)))
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			for j := range 4 {
				if _, err := f.Write([]byte{byte(j)}); err != nil {
					errs <- err
					return
				}
				sync := Sync
				if j%2 == 1 {
					sync = SyncData
				}
				if err := sync(f); err != nil {
					errs <- fmt.Errorf("file %d, sync %d: %w", i, j, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := AsyncSyncs() - before
	if got > 4*n {
		t.Errorf("%d asynchronous syncs counted for %d made", got, 4*n)
	}
	if asyncAvailable() && got == 0 {
		t.Errorf("no sync of %d went through AIO", 4*n)
	}
}
