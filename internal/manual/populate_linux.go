//go:build linux

package manual

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// populateBroken is set once the kernel refused MADV_POPULATE_WRITE
// (before Linux 5.14): FaultAhead stops asking.
var populateBroken atomic.Bool

func populateSupported() bool { return !populateBroken.Load() }

// populate faults b's pages in writable without writing to them
// (madvise MADV_POPULATE_WRITE), huge pages where b's mapping asked for
// them.
func populate(b []byte) {
	if err := unix.Madvise(b, unix.MADV_POPULATE_WRITE); err == unix.EINVAL {
		populateBroken.Store(true)
	}
	// Other errors (ENOMEM when memory is short, EFAULT) only mean the
	// filler faults those pages itself.
}
