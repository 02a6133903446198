//go:build race

package stress

// raceEnabled reports a race-detector build: flips in memory that
// background goroutines read without a lock the runner can take are then
// avoided, since the detector would report them (they race by design).
const raceEnabled = true
