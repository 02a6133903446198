//go:build race

package skiplist

// raceEnabled scales long tests down under the race detector, which slows
// the lock-free paths by an order of magnitude.
const raceEnabled = true
