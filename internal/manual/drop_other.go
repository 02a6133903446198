//go:build !linux

package manual

// dropPages does nothing where DONTNEED may keep a page's old contents
// (macOS) or leave it unusable (Windows' decommit): a dropping allocator
// there is an ordinary one (see NewDroppingAllocator). It returns 0, the
// bytes dropped.
func dropPages([]byte) int { return 0 }
