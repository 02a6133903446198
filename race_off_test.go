//go:build !race

package vigil

const raceEnabled = false
