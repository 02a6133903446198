//go:build linux

package manual

import "golang.org/x/sys/unix"

// adviseHuge asks for transparent huge pages for b. Best effort: a kernel
// without them says no, and b works the same with small pages.
func adviseHuge(b []byte) { _ = unix.Madvise(b, unix.MADV_HUGEPAGE) }
