//go:build race

package wal

// raceEnabled: the race detector slows byte-at-a-time code ~10x, so the
// sampled multi-block tests sample more sparsely under it.
const raceEnabled = true
