// Package lockfile holds a DB directory's LOCK for exactly one DB handle.
//
// Two DB handles writing one directory lose acknowledged writes, so the
// lock must hold however the directory is spelled, and closing one handle
// must never release another's lock. Neither holds for POSIX record locks
// (fcntl F_SETLK), which belong to the process: a second lock request from
// the same process succeeds, and closing any descriptor of the file drops
// the process's lock. So this package combines two things:
//
//   - an in-process table of locked directories, keyed by what identifies
//     the directory rather than how its path is spelled: device and inode
//     for the operating system's file system (a symlink, a relative path,
//     a trailing slash or a bind mount all name the same key; on Windows
//     the volume serial number and file index, so letter case, junctions
//     and short names do too), and the file system value plus the cleaned
//     path for others (in-memory file systems in tests);
//   - on the operating system's file system, a lock owned by the open file
//     description: an OFD lock (F_OFD_SETLK) on Linux, flock elsewhere on
//     Unix (macOS, the BSDs: it belongs to the open file description as
//     well), and on Windows the LOCK file opened with no sharing (share
//     mode 0), which no other handle can open until ours is closed. Another
//     process is kept out, and so is this process through any other
//     descriptor; only closing our own descriptor releases it. On Linux
//     OFD locks conflict with classic POSIX locks, so a tool that locks
//     LOCK the RocksDB way is kept out too; on Windows RocksDB and Pebble
//     open LOCK with no sharing as well, so the same holds there. Other
//     file systems use their FS.Lock, as does the operating system's on
//     platforms without any of these (js/wasm, plan9).
//
// So exclusivity is the same on every supported platform: one handle per
// directory, across processes, released only by that handle's Close.
//
// Concurrency: Acquire and Lock.Close are safe for concurrent use.
package lockfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sync"

	"github.com/cockroachdb/pebble/vfs"
)

// ErrLocked is returned when the directory is locked by another DB handle
// of this process or by another process.
var ErrLocked = errors.New("lockfile: the directory is locked by another DB handle")

// registry maps a directory's identity to the path it was locked under.
var registry struct {
	sync.Mutex
	held map[any]string
}

// Lock is a held directory lock.
type Lock struct {
	key  any
	file io.Closer
	once sync.Once
	err  error
}

// diskKey identifies a directory of the operating system's file system.
type diskKey struct{ dev, ino uint64 }

// fsKey identifies a directory of another file system.
type fsKey struct {
	fs   any
	path string
}

// Acquire locks dir (which must exist) for one DB handle, creating the
// file name (normally dir/LOCK) if needed. It fails with an error wrapping
// ErrLocked if a handle in this process or another process holds it.
func Acquire(fs vfs.FS, dir, name string) (*Lock, error) {
	root := vfs.Root(fs)
	disk := root == vfs.Default
	key, err := identify(root, disk, dir)
	if err != nil {
		return nil, err
	}
	if key != nil {
		registry.Lock()
		if holder, ok := registry.held[key]; ok {
			registry.Unlock()
			return nil, fmt.Errorf("%w: %s is the directory already open as %s in this process", ErrLocked, dir, holder)
		}
		if registry.held == nil {
			registry.held = make(map[any]string)
		}
		registry.held[key] = dir
		registry.Unlock()
	}
	var f io.Closer
	if disk {
		f, err = lockOS(name)
	} else {
		f, err = fs.Lock(name)
	}
	if err != nil {
		release(key)
		return nil, err
	}
	return &Lock{key: key, file: f}, nil
}

// identify returns the registry key of dir, or nil when the file system
// value cannot be a map key.
func identify(root vfs.FS, disk bool, dir string) (any, error) {
	if disk {
		st, err := os.Stat(dir)
		if err != nil {
			return nil, fmt.Errorf("lockfile: %w", err)
		}
		dev, ino, ok := devIno(dir, st)
		if ok {
			return diskKey{dev, ino}, nil
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("lockfile: %w", err)
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		return fsKey{fs: "disk", path: abs}, nil
	}
	if root == nil || !reflect.TypeOf(root).Comparable() {
		return nil, nil
	}
	return fsKey{fs: root, path: filepath.Clean(dir)}, nil
}

func release(key any) {
	if key == nil {
		return
	}
	registry.Lock()
	delete(registry.held, key)
	registry.Unlock()
}

// Close releases the lock. Later calls return the first call's result.
func (l *Lock) Close() error {
	l.once.Do(func() {
		l.err = l.file.Close()
		release(l.key)
	})
	return l.err
}
