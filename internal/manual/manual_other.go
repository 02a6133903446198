//go:build !unix && !windows

package manual

import "github.com/vigildb/vigil/internal/invariants"

// osAlloc has no memory outside the Go heap to offer here: Alloc falls back
// to the Go heap (see the package doc's Platforms).
func osAlloc(int) []byte { return nil }

// osFree leaves b to the collector; invariants builds poison it, so that a
// use after free reads Poison rather than plausible data.
func osFree(b []byte) {
	if invariants.Enabled {
		for i := range b {
			b[i] = Poison
		}
	}
}
