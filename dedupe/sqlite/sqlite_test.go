package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/dedupetest"
	"github.com/hookonce/hookonce/dedupe/sqlite"
)

// Every case runs its statements as prepared at Open (stmts.go): a
// statement of the write path or of the readers left out of the lists is
// parsed again on every run, which is what made claims slow.
func TestConformance(t *testing.T) {
	dedupetest.RunConformance(t, openPrepared)
}

// openPrepared opens a new store in t's directory and, when t ends, fails
// t if any statement ran unprepared.
func openPrepared(t *testing.T) dedupe.Store {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hookonce.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		if n := s.Unprepared(); n != 0 {
			t.Errorf("%d statements ran unprepared", n)
		}
	})
	return s
}

// Two Store values on one file stand for two processes on one host (serve
// and a CLI, or two serve processes): claims still have one winner.
// The durable deliveries' suite runs there too: each case's store is
// another handle on a file the other cases have written to.
func TestConformanceTwoHandlesOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	var n int
	newStore := func(t *testing.T) dedupe.Store {
		s, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		n++
		t.Cleanup(func() { s.Close() })
		return s
	}
	dedupetest.RunConformance(t, newStore)
	t.Run("Pending", func(t *testing.T) { dedupetest.RunPendingConformance(t, newStore) })
	if n == 0 {
		t.Fatal("suite opened no store")
	}
}

func TestSummaryConformance(t *testing.T) {
	dedupetest.RunSummaryConformance(t, openPrepared)
}
