//go:build unix && !linux

package lockfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockFD takes an exclusive flock, which belongs to the open file
// description as an OFD lock does.
func lockFD(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) }
