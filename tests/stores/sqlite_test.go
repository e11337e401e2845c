package stores

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/sqlite"
	"github.com/hookonce/hookonce/proxy/proxytest"
)

// Two hookonce processes on one host share one SQLite file; two Store
// handles on that file stand for them: 10 events × 6 deliveries at once,
// spread over both proxies, run the site's handler exactly 10 times, every
// delivery gets a 2xx (proxytest.RunTwoReplicas).
func TestSQLiteTwoReplicas(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	proxytest.RunTwoReplicas(t, func(t *testing.T) dedupe.Store {
		s, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// A refused conflict accepted through the proxy runs once at the site
// (proxytest.RunAcceptConflict).
func TestSQLiteAcceptConflict(t *testing.T) {
	path := filepath.Join(t.TempDir(), "accept.db")
	proxytest.RunAcceptConflict(t, func(t *testing.T) dedupe.Store {
		s, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
