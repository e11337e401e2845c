package stores

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/dedupe/redis"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/hookonce/hookonce/internal/testkit/redistest"
)

// TestMain shares one PostgreSQL and one redis-server among the tests
// (pgtest.Shared, redistest.Shared) and stops them at the end.
func TestMain(m *testing.M) {
	redistest.Main(runFunc(func() int { return pgtest.Main(m) }))
	os.Exit(0) // not reached: redistest.Main exits
}

type runFunc func() int

func (f runFunc) Run() int { return f() }

// slack is what a store call under a deadline may take past it.
const slack = 1500 * time.Millisecond

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// mustNew opens a migrated PostgreSQL store on dsn, closed with the test.
func mustNew(t testing.TB, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(ctxFor(t, 30*time.Second), dsn)
	if err != nil {
		t.Fatalf("postgres.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// mustOpen opens a Redis store on url, closed with the test.
func mustOpen(t testing.TB, url string) *redis.Store {
	t.Helper()
	s, err := redis.Open(ctxFor(t, 5*time.Second), url)
	if err != nil {
		t.Fatalf("redis.Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
