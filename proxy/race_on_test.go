//go:build race

package proxy_test

// raceEnabled: the race detector's shadow memory inflates RSS several
// times, so RSS bounds are looser under it (Go heap bounds are not).
const raceEnabled = true
