//go:build windows

package lockfile

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// lockOS opens name with no sharing at all (share mode 0): while the
// handle is open, every other open of the file fails with a sharing
// violation, in this process or another, and only closing this handle
// releases it. That is what an OFD lock gives on Linux, and what Pebble's
// and RocksDB's Windows locks do, so the three exclude one another.
func lockOS(name string) (*os.File, error) {
	p, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, fmt.Errorf("lockfile: %w", err)
	}
	h, err := windows.CreateFile(p, windows.GENERIC_READ|windows.GENERIC_WRITE, 0, nil,
		windows.OPEN_ALWAYS, windows.FILE_ATTRIBUTE_NORMAL, 0)
	if err != nil {
		if errors.Is(err, windows.ERROR_SHARING_VIOLATION) || errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
			return nil, fmt.Errorf("%w: %s is locked by another process or handle: %v", ErrLocked, name, err)
		}
		return nil, fmt.Errorf("lockfile: locking %s: %w", name, &os.PathError{Op: "open", Path: name, Err: err})
	}
	return os.NewFile(uintptr(h), name), nil
}

// devIno returns the volume serial number and file index of directory
// dir: what identifies it however its path is spelled (Windows paths are
// case-insensitive, and junctions, symlinks and short 8.3 names alias
// them), as os.SameFile compares them.
func devIno(dir string, _ os.FileInfo) (dev, ino uint64, ok bool) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, 0, false
	}
	// No access rights asked for beyond the attributes, full sharing, and
	// backup semantics, which a directory needs to be opened at all.
	h, err := windows.CreateFile(p, windows.FILE_READ_ATTRIBUTES,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return 0, 0, false
	}
	defer windows.CloseHandle(h)
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		return 0, 0, false
	}
	return uint64(info.VolumeSerialNumber), uint64(info.FileIndexHigh)<<32 | uint64(info.FileIndexLow), true
}
