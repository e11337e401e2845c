package pgbouncertest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/pgbouncertest"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// A PgBouncer in transaction pooling mode forwards to the server behind
// it, and two clients at once share its one server connection.
func TestStart(t *testing.T) {
	srv := pgtest.Shared(t)
	b := pgbouncertest.Start(t, srv, pgbouncertest.Options{PoolSize: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dsn := b.Via(srv.NewDatabase(t))
	pids := map[string]bool{}
	for range 2 {
		c, err := pgconn.Connect(ctx, dsn)
		if err != nil {
			t.Fatalf("connect through pgbouncer: %v\n%s", err, b.LogTail())
		}
		defer c.Close(context.Background())
		res, err := c.Exec(ctx, "SELECT pg_backend_pid()").ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		pids[string(res[0].Rows[0][0])] = true
	}
	if len(pids) != 1 {
		t.Fatalf("two clients had backends %v, want one shared", pids)
	}
	pools, err := b.Show(ctx, "POOLS")
	if err != nil {
		t.Fatal(err)
	}
	var mode string
	for _, p := range pools {
		if p["database"] != "pgbouncer" {
			mode = p["pool_mode"]
		}
	}
	if mode != "transaction" {
		t.Fatalf("SHOW POOLS: %v, want pool_mode transaction", pools)
	}
}
