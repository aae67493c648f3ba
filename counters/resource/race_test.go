//go:build race

package resource_test

// raceEnabled: the race detector multiplies the memory of the process.
const raceEnabled = true
