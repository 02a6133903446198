//go:build race

package memtable

// raceEnabled scales long tests down under the race detector.
const raceEnabled = true
