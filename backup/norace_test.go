//go:build !race

package backup

const raceEnabled = false
