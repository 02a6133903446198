//go:build !linux

package manual

// populateSupported: FaultAhead is for Linux's transparent huge pages
// only; elsewhere a page is 4 KiB and its fault costs microseconds.
func populateSupported() bool { return false }

func populate([]byte) {}
