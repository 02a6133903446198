package vfsutil

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// osRenameNoReplace renames with renameat2(RENAME_NOREPLACE), which
// refuses an existing target in the kernel, whoever else is renaming. done
// is false where the kernel or the file system lacks it (ENOSYS, EINVAL):
// the caller falls back to its checked rename.
func osRenameNoReplace(from, to string) (done bool, err error) {
	err = unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EINVAL):
		return false, nil
	case errors.Is(err, unix.EEXIST):
		return true, os.ErrExist
	default:
		return true, &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
}
