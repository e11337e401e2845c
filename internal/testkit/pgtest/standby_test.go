package pgtest_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/jackc/pgx/v5/pgconn"
)

// rows answers the first column of sql's rows.
func rows(t *testing.T, dsn, sql string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	res, err := c.Exec(ctx, sql).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	var out []string
	for _, r := range res[len(res)-1].Rows {
		out = append(out, string(r[0]))
	}
	return out
}

// A synchronous standby behind a stalled link: what PostgreSQL does with a
// commit whose wait for the standby ends early, and what a client sees.
// This is the behaviour hookonce's PostgreSQL store guards against (#36):
//
//   - a client that gives up (its context ends: pgx closes the connection
//     and sends a cancel request) gets an error, but the server, on the
//     cancel, keeps the commit locally, visible to every other session on
//     the primary, with a WARNING nobody reads;
//   - a wait cancelled on the server (an operator's pg_cancel_backend)
//     answers the COMMIT as a success, the
//     WARNING its only sign;
//   - either commit is gone after kill -9 of the primary and promotion of
//     the standby.
func TestSynchronousStandbyStalled(t *testing.T) {
	primary := pgtest.Start(t)
	standby, link := pgtest.StartStandby(t, primary)
	if err := primary.SetSynchronousStandbys("*", 1); err != nil {
		t.Fatal(err)
	}
	dsn := primary.DSN("postgres")
	rows(t, dsn, `CREATE TABLE x (id text PRIMARY KEY)`)
	rows(t, dsn, `INSERT INTO x VALUES ('acked')`)

	link.Stall()
	var mu sync.Mutex
	var warnings []string
	ctx := context.Background()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		warnings = append(warnings, n.Severity+" "+n.Code+" "+n.Message)
		mu.Unlock()
	}

	// The client gives up.
	c1, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = c1.Exec(cctx, `INSERT INTO x VALUES ('client-cancelled')`).ReadAll()
	cancel()
	if err == nil {
		t.Fatal("insert with the standby stalled answered before its context ended")
	}
	// The cancel request reaches the server a moment later.
	deadline := time.Now().Add(5 * time.Second)
	for !contains(rows(t, dsn, `SELECT id FROM x`), "client-cancelled") {
		if time.Now().After(deadline) {
			t.Fatal("a commit cancelled by its client is not visible on the primary")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The server cancels the wait itself (an operator's pg_cancel_backend;
	// statement_timeout does not: it is disabled before the commit).
	c2, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c2.Exec(ctx, `INSERT INTO x VALUES ('server-cancelled')`).ReadAll()
		done <- err
	}()
	for {
		n := rows(t, dsn, `SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`)
		if n[0] != "0" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatalf("insert whose sync wait the server cancelled: %v (pgx answered an error; expected a success)", err)
	}
	mu.Lock()
	got := strings.Join(warnings, "\n")
	mu.Unlock()
	if !strings.Contains(got, "WARNING 01000 canceling wait for synchronous replication") {
		t.Fatalf("notices: %q", got)
	}
	t.Logf("a COMMIT whose sync wait the server cancelled is a success to pgx; notices:\n%s", got)

	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	link.Cut()
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	after := rows(t, standby.DSN("postgres"), `SELECT id FROM x ORDER BY id`)
	if strings.Join(after, ",") != "acked" {
		t.Fatalf("after promotion: %v, want only the acknowledged row", after)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
