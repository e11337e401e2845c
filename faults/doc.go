// Package faults is hookonce's fault suite (issue "Faults and abuse"); it
// holds tests only. Each scenario writes its expected counts down before it
// runs and counts executions at a real upstream (an httptest server that
// records every call per event id), never only the statuses a sender saw
// (trap 18 in ARCHITECTURE.md):
//
//   - kill_test.go: kill -9 of a real `hookonce serve` after the claim,
//     while the site holds the request, and after the site answered, on
//     SQLite, PostgreSQL and Redis; restart, retry, count.
//   - dbfaults_test.go: PostgreSQL restarted and frozen, Redis restarted
//     with and without AOF, and connections cut mid-transaction by a TCP
//     proxy (internal/testkit/faultproxy), all under a mixed load.
//   - diskfull_test.go: SQLite on a full tmpfs (a filler, and one so small
//     that the WAL fills it), recovery without restart; an unreadable or
//     corrupt database at start (startup_test.go: refused, or, damaged past
//     its first pages, failing closed with /readyz saying so).
//   - leaks: TestMain fails the package when goroutines outlive the tests
//     (go.uber.org/goleak).
//   - flood_test.go: an unsigned flood of made-up field names and paths
//     from 8 connections against a real serve on SQLite and on a maxmemory
//     Redis, with genuine signed deliveries during and after it and a
//     restart: bounded counters, RSS, store growth and log lines, every
//     genuine delivery run once (HOOKONCE_FLOOD=full: 60 s).
//   - soak_test.go: HOOKONCE_SOAK=2m runs minutes of mixed traffic with
//     periodic database restarts and reports duplicates, lost events and
//     RSS over time.
//
// The short forms take 20–30 s under -race on two cores: the scenarios
// mostly wait (leases, restarts, a 5 s freeze), so TestMain runs them with
// -parallel 8 unless -parallel is given. The long form is behind
// HOOKONCE_SOAK.
package faults
