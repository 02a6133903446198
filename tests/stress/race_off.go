//go:build !race

package stress

const raceEnabled = false
