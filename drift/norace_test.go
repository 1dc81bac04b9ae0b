//go:build !race

package drift

// raceEnabled: timing and allocation tests skip under the race detector.
const raceEnabled = false
