//go:build race

package backup

// raceEnabled: the race detector makes the sweeps several times slower, so
// they sample bytes instead of flipping every one.
const raceEnabled = true
