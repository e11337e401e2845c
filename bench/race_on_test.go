//go:build race

package bench_test

// raceEnabled: the race detector allocates on its own behalf, so
// allocation budgets are held by a run without it.
const raceEnabled = true
