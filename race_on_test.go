//go:build race

package vigil

// raceEnabled: under the race detector sync.Pool drops a quarter of what
// it is given, so allocation counts that rely on a pool are not checked.
const raceEnabled = true
