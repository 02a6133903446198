//go:build unix && !linux

package manual

// sparePut keeps nothing where DONTNEED may leave a page's old contents
// (see spares in spare_linux.go): Free unmaps.
func sparePut([]byte) bool { return false }

// spareGet has nothing to hand out where sparePut keeps nothing.
func spareGet(int) []byte { return nil }
