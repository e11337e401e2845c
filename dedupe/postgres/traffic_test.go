package postgres_test

import (
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/dedupetest"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
)

func TestTrafficConformance(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	dedupetest.RunTrafficConformance(t, func(t *testing.T) dedupe.Store { return mustNew(t, dsn) },
		func(t *testing.T) dedupe.Store {
			s, err := postgres.OpenReadOnly(ctxFor(t, 30*time.Second), dsn)
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
}
