//go:build !linux

package manual

// populateSupported: FaultAhead is for Linux's MADV_POPULATE_WRITE only.
func populateSupported() bool { return false }

func populate([]byte) {}
