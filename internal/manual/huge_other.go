//go:build unix && !linux

package manual

// adviseHuge does nothing here: other systems' huge page support, where it
// exists, is not asked for per mapping the same way.
func adviseHuge([]byte) {}
