//go:build !invariants

package invariants

// Enabled reports a build with the invariants tag: extra checks that cost
// too much for production, such as poisoning freed manual memory so that a
// use after free faults (see package manual).
const Enabled = false
