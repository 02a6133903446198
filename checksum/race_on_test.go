//go:build race

package checksum

const raceEnabled = true
