// Package vfsutil holds the small durability steps every part of Vigil
// that writes files needs: syncing a directory's entries and a file's
// contents by name, writing a file synced, replacing one atomically
// (write a temporary, sync, rename, sync the directory), and building a
// directory under a temporary name of its own and publishing it without
// replacing anything (MkdirTemp, RenameNoReplace). One definition, so that
// none of them forgets to close a handle, to report a sync's error, or
// removes what it did not create.
//
// RenameNoReplace is exclusive in the kernel on Linux (renameat2 with
// RENAME_NOREPLACE); elsewhere, and on file systems other than
// vfs.Default, it checks and renames under one mutex, which is exclusive
// among the callers of one process (on POSIX systems a directory renamed
// onto a non-empty one fails in the OS as well).
package vfsutil

import (
	"fmt"

	"github.com/cockroachdb/pebble/vfs"
)

// SyncDir makes the entries of directory dir durable (a file created,
// renamed or removed in it). Errors name the directory.
func SyncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	return syncAndClose(d, err, "directory "+dir)
}

// SyncFile makes the contents of the file name durable, whoever wrote them
// (a hard link shares its data with a file its writer may never have
// synced). Errors name the file.
func SyncFile(fs vfs.FS, name string) error {
	f, err := fs.Open(name)
	return syncAndClose(f, err, name)
}

// syncAndClose syncs and closes f, just opened (with err) as what.
func syncAndClose(f vfs.File, err error, what string) error {
	if err != nil {
		return fmt.Errorf("opening %s: %w", what, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing %s: %w", what, err)
	}
	return nil
}

// SyncDataAsSync wraps fs so that every File.SyncData of a file it opens is
// a File.Sync. It is for file systems that see only one of the two:
// pebble's errorfs injects faults into Sync but passes SyncData straight
// through, so a fault injector over errorfs would never fail the WAL's
// data syncs (see wal.Writer.SetReserve) without it. On a file system
// whose SyncData is a full sync anyway (vfs.MemFS) nothing else changes.
func SyncDataAsSync(fs vfs.FS) vfs.FS { return syncDataFS{fs} }

type syncDataFS struct{ vfs.FS }

type syncDataFile struct{ vfs.File }

// SyncData makes the file's data durable through Sync.
func (f syncDataFile) SyncData() error { return f.File.Sync() }

func wrapFile(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return syncDataFile{f}, nil
}

func (fs syncDataFS) Create(name string) (vfs.File, error) { return wrapFile(fs.FS.Create(name)) }

func (fs syncDataFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return wrapFile(fs.FS.Open(name, opts...))
}

func (fs syncDataFS) OpenReadWrite(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return wrapFile(fs.FS.OpenReadWrite(name, opts...))
}

func (fs syncDataFS) OpenDir(name string) (vfs.File, error) { return wrapFile(fs.FS.OpenDir(name)) }

func (fs syncDataFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	return wrapFile(fs.FS.ReuseForWrite(oldname, newname))
}
