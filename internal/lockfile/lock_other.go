//go:build !unix && !windows

package lockfile

import (
	"io"
	"os"

	"github.com/cockroachdb/pebble/vfs"
)

// lockOS falls back to the vfs lock where the system offers no lock owned
// by a file handle.
func lockOS(name string) (io.Closer, error) { return vfs.Default.Lock(name) }

func devIno(string, os.FileInfo) (dev, ino uint64, ok bool) { return 0, 0, false }
