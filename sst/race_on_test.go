//go:build race

package sst

// raceEnabled lets exhaustive tests sample instead under the (much slower)
// race detector, keeping `go test -race` of the package short.
const raceEnabled = true
