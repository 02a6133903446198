// Package invariants holds build-time switches shared by Vigil's packages
// and tests, defined once: whether the race detector is on (tests sample
// their most expensive sweeps under it, and stress runs avoid flipping
// bytes that background goroutines read without a lock), and whether the
// invariants build tag is (go test -tags invariants: freed manual memory
// is poisoned and made inaccessible).
package invariants
