//go:build unix && !linux

package manual

// hugeMin: see huge_linux.go. Other systems get no advice: their huge page
// support, where it exists, is not asked for per mapping the same way.
const hugeMin = 4 << 20

func adviseHuge([]byte) {}
