//go:build !linux

package manual

// Warm pages need Linux's mremap (see warm_linux.go); elsewhere a freed
// buffer goes back to the system at once.

// WarmBytes returns the memory kept warm: none here.
func WarmBytes() int64 { return 0 }

func keepFilled([]byte, int) bool { return false }

func takeWarm([]byte) bool { return false }

func releaseWarm(int) {}

func creditWarm(int) {}

func warmKept() bool { return false }

func makeSpare() {}
