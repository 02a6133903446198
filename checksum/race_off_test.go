//go:build !race

package checksum

const raceEnabled = false
