package postgres_test

import (
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/dedupetest"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
)

// execModes are the values of pgx's default_query_exec_mode other than
// the default (cache_statement: named server-side prepared statements,
// which every other test of the package runs in), each of which an
// operator may put in the DSN (docs/stores.md, "PgBouncer"): unnamed
// statements with cached or fresh descriptions, no description at all
// (parameter types inferred by the server from the SQL), and the simple
// protocol (parameters interpolated by the client). The store's
// parameters must mean the same in every one.
var execModes = []string{"cache_describe", "describe_exec", "exec", "simple_protocol"}

// The conformance suites, directly against PostgreSQL, in every other exec
// mode. Where the server infers the parameter types (exec,
// simple_protocol), the records and pending suites run a second time with
// each statement alone (the path a statement takes when its batch aborted,
// with statements of its own).
func TestConformanceExecModes(t *testing.T) {
	srv := pgtest.Shared(t)
	for _, mode := range execModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel() // most of the suites' time is waiting for leases to end
			// A database for each suite: some list every sender's records.
			db := func(t *testing.T) string { return srv.NewDatabase(t) + "&default_query_exec_mode=" + mode }
			t.Run("batched", func(t *testing.T) {
				dsn := db(t)
				dedupetest.RunConformance(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) })
			})
			if mode == "exec" || mode == "simple_protocol" {
				t.Run("alone", func(t *testing.T) {
					dsn := db(t)
					dedupetest.RunConformance(t, func(t *testing.T) dedupe.Store {
						s := mustNew(t, dsn)
						postgres.SetClaimBatching(s, false)
						return s
					})
				})
				t.Run("pending alone", func(t *testing.T) {
					dsn := db(t)
					dedupetest.RunPendingConformance(t, func(t *testing.T) dedupe.Store {
						s := mustNew(t, dsn)
						postgres.SetClaimBatching(s, false)
						return s
					})
				})
			}
			t.Run("objects", func(t *testing.T) {
				dsn := db(t)
				dedupetest.RunObjectConformance(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) })
			})
			t.Run("pending", func(t *testing.T) {
				dsn := db(t)
				dedupetest.RunPendingConformance(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) })
			})
			t.Run("summary", func(t *testing.T) {
				dsn := db(t)
				dedupetest.RunSummaryConformance(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) })
			})
			t.Run("traffic", func(t *testing.T) {
				dsn := db(t)
				dedupetest.RunTrafficConformance(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) }, openReadOnly(dsn))
			})
		})
	}
}

// openReadOnly is dedupetest's OpenReadOnly on dsn.
func openReadOnly(dsn string) dedupetest.OpenReadOnly {
	return func(t *testing.T) dedupe.Store {
		s, err := postgres.OpenReadOnly(ctxFor(t, 30*time.Second), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}
