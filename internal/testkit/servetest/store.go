package servetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/dedupe/redis"
	"github.com/hookonce/hookonce/dedupe/sqlite"
)

// OpenStore opens, in the test process, the store a serve under test is
// pointed at (its --store: sqlite:PATH, postgres://…, redis://…), to look
// at its records; it is closed when the test ends.
func OpenStore(t testing.TB, dsn string) dedupe.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var s dedupe.Store
	var err error
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		s, err = sqlite.Open(ctx, strings.TrimPrefix(dsn, "sqlite:"))
	case strings.HasPrefix(dsn, "postgres://"):
		s, err = postgres.Open(ctx, dsn)
	case strings.HasPrefix(dsn, "redis://"):
		s, err = redis.Open(ctx, dsn)
	default:
		t.Fatalf("servetest.OpenStore: unknown store %q", dsn)
	}
	if err != nil {
		t.Fatalf("open store %s: %v", dsn, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
