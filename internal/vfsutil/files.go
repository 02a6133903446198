package vfsutil

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/cockroachdb/pebble/vfs"
)

// The steps below are the only way Vigil creates a file or directory that
// must appear whole or not at all. They follow one rule: no call removes
// what it did not create. A temporary name is unique per call and created
// exclusively, so that a file or directory someone else owns (a live DB
// that happens to be called "snap.tmp") is never mistaken for a leftover;
// and a rename onto a final name never replaces what is there.
//
// vfs.FS has no exclusive create and its Rename replaces its target (the
// OS's on Linux replaces an empty directory; Pebble's MemFS replaces
// anything), so exclusivity comes from two places: on vfs.Default, the
// OS's own primitives (mkdir(2), and renameat2(RENAME_NOREPLACE) where the
// kernel has it); on every file system, nameMu, which makes the check and
// the change one step for every caller in this process. Two processes on
// another vfs.FS (an in-memory one is only ever one process's) are beyond
// it.
var nameMu sync.Mutex

// WriteFile creates name (truncating a file of that name), writes data,
// syncs and closes it. The caller syncs the directory if the entry itself
// must be durable. Errors name the file.
func WriteFile(fs vfs.FS, name string, data []byte) error {
	return CopyToFile(fs, name, bytes.NewReader(data), int64(len(data)))
}

// CopyToFile is WriteFile of the next n bytes of r. If r ends first, the
// error wraps io.ErrUnexpectedEOF.
func CopyToFile(fs vfs.FS, name string, r io.Reader, n int64) error {
	f, err := fs.Create(name)
	if err != nil {
		return fmt.Errorf("creating %s: %w", name, err)
	}
	if _, err := io.CopyN(f, r, n); err != nil {
		f.Close()
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", name, err)
	}
	return nil
}

// ReplaceFile makes name hold data, atomically: data is written to tmp and
// synced, tmp is renamed over name, and the directory is synced (through
// dir when the caller holds it open, else opened by name). A crash leaves
// name as it was or holding data, and perhaps tmp. tmp must be a name only
// the caller can hold (a file number it allocated, say): it is created
// over whatever is there.
func ReplaceFile(fs vfs.FS, tmp, name string, data []byte, dir vfs.File) error {
	if err := WriteFile(fs, tmp, data); err != nil {
		return err
	}
	if err := fs.Rename(tmp, name); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", tmp, name, err)
	}
	if dir == nil {
		return SyncDir(fs, fs.PathDir(name))
	}
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("syncing directory of %s: %w", name, err)
	}
	return nil
}

// TempSuffix starts the suffix of every temporary directory MkdirTemp
// creates: target + TempSuffix + 16 hex digits.
const TempSuffix = ".tmp-"

// MkdirTemp creates a new, empty directory beside target, named target
// plus TempSuffix plus 16 random hex digits, and returns its name. It
// creates target's parent if missing, never reuses a directory that
// exists, and syncs nothing: the caller syncs what it writes and publishes
// it with RenameNoReplace, or removes the directory (only it created it).
func MkdirTemp(fs vfs.FS, target string) (string, error) {
	if err := fs.MkdirAll(fs.PathDir(target), 0o755); err != nil {
		return "", fmt.Errorf("creating the parent of %s: %w", target, err)
	}
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	name := target + TempSuffix + hex.EncodeToString(r[:])
	if err := MkdirExclusive(fs, name); err != nil {
		return "", err
	}
	return name, nil
}

// MkdirExclusive creates directory name, whose parent exists, failing
// (with an error wrapping os.ErrExist) if anything has that name: on
// vfs.Default mkdir(2) refuses it, elsewhere a check under nameMu does.
func MkdirExclusive(fs vfs.FS, name string) error {
	nameMu.Lock()
	defer nameMu.Unlock()
	if fs == vfs.Default {
		if err := os.Mkdir(name, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", name, err)
		}
		return nil
	}
	if _, err := fs.Stat(name); err == nil {
		return fmt.Errorf("creating %s: %w", name, os.ErrExist)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("creating %s: %w", name, err)
	}
	if err := fs.MkdirAll(name, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", name, err)
	}
	return nil
}

// MkdirAllSynced creates dir and its missing parents and makes the new
// path durable: it syncs the parent of every directory it created, from
// the top down, and the parent of dir in any case (a new DB's directory
// entry must survive a crash as its files do). A failed sync is an error.
func MkdirAllSynced(fs vfs.FS, dir string) error {
	var created []string
	for p := dir; ; {
		if _, err := fs.Stat(p); err == nil {
			break
		}
		created = append(created, p)
		parent := fs.PathDir(p)
		if parent == "" || parent == p {
			break
		}
		p = parent
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if len(created) == 0 {
		created = []string{dir}
	}
	for i := len(created) - 1; i >= 0; i-- {
		parent := fs.PathDir(created[i])
		if parent == "" || parent == created[i] {
			continue
		}
		if err := SyncDir(fs, parent); err != nil {
			return err
		}
	}
	return nil
}

// ErrExists is returned by RenameNoReplace when its target exists.
var ErrExists = errors.New("already exists")

// RenameNoReplace renames from to to unless to exists, in which case it
// returns an error wrapping ErrExists and changes nothing; then it syncs
// to's directory. It is how a directory built under a MkdirTemp name is
// published: two calls racing for one target cannot both succeed, and
// neither replaces the other's result.
func RenameNoReplace(fs vfs.FS, from, to string) error {
	if err := renameNoReplace(fs, from, to); err != nil {
		return err
	}
	return SyncDir(fs, fs.PathDir(to))
}

func renameNoReplace(fs vfs.FS, from, to string) error {
	nameMu.Lock()
	defer nameMu.Unlock()
	if fs == vfs.Default {
		if done, err := osRenameNoReplace(from, to); done {
			if errors.Is(err, os.ErrExist) {
				return fmt.Errorf("renaming %s: %s %w", from, to, ErrExists)
			}
			if err != nil {
				return fmt.Errorf("renaming %s to %s: %w", from, to, err)
			}
			return nil
		}
	}
	if _, err := fs.Stat(to); err == nil {
		return fmt.Errorf("renaming %s: %s %w", from, to, ErrExists)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("renaming %s to %s: %w", from, to, err)
	}
	if err := fs.Rename(from, to); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", from, to, err)
	}
	return nil
}
