//go:build !unix

package lockfile

import (
	"io"
	"os"

	"github.com/cockroachdb/pebble/vfs"
)

// lockOS falls back to the vfs lock where neither OFD locks nor flock exist.
func lockOS(name string) (io.Closer, error) { return vfs.Default.Lock(name) }

func devIno(os.FileInfo) (dev, ino uint64, ok bool) { return 0, 0, false }
