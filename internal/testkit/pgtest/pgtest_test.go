package pgtest_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func query(ctx context.Context, dsn, sql string) error {
	c, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, sql).ReadAll()
	return err
}

func TestSharedServerGivesFreshDatabases(t *testing.T) {
	srv := pgtest.Shared(t)
	if again := pgtest.Shared(t); again != srv {
		t.Fatal("Shared started a second server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, b := srv.NewDatabase(t), srv.NewDatabase(t)
	if a == b {
		t.Fatalf("two databases share the DSN %s", a)
	}
	if err := query(ctx, a, "CREATE TABLE x (id int)"); err != nil {
		t.Fatalf("create table in a: %v", err)
	}
	if err := query(ctx, b, "SELECT * FROM x"); err == nil {
		t.Fatal("table of database a is visible in database b")
	}
}

func TestStopStartPauseResume(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := query(ctx, dsn, "CREATE TABLE kept (id int); INSERT INTO kept VALUES (1)"); err != nil {
		t.Fatalf("setup: %v", err)
	}

	if err := srv.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := query(ctx, dsn, "SELECT 1"); err == nil {
		t.Fatal("query succeeded against a stopped server")
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("Start again: %v", err)
	}
	if err := query(ctx, dsn, "SELECT id FROM kept"); err != nil {
		t.Fatalf("data after restart: %v", err)
	}

	// Open a connection first: pausing must freeze existing backends too,
	// not only the postmaster.
	c, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer c.Close(context.Background())
	if err := srv.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = c.Exec(short, "SELECT 1").ReadAll()
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err) {
		t.Fatalf("query on an open connection to a paused server: err = %v, want a timeout", err)
	}
	if err := srv.Resume(); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if err := query(ctx, dsn, "SELECT 1"); err != nil {
		t.Fatalf("query after resume: %v", err)
	}
}
