// Package vfsutil holds the small durability steps every part of Vigil
// that writes files needs: syncing a directory's entries and a file's
// contents by name. One definition, so that none of them forgets to close
// the handle or to report the sync's error.
package vfsutil

import (
	"fmt"

	"github.com/cockroachdb/pebble/vfs"
)

// SyncDir makes the entries of directory dir durable (a file created,
// renamed or removed in it). Errors name the directory.
func SyncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("opening directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// SyncFile makes the contents of the file name durable, whoever wrote them
// (a hard link shares its data with a file its writer may never have
// synced). Errors name the file.
func SyncFile(fs vfs.FS, name string) error {
	f, err := fs.Open(name)
	if err != nil {
		return fmt.Errorf("opening %s: %w", name, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing %s: %w", name, err)
	}
	return nil
}
