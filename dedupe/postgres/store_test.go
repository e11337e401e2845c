package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/dedupetest"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
)

var ownerN atomic.Int64

func newOwner() string { return fmt.Sprintf("o-%d-%d", time.Now().UnixNano(), ownerN.Add(1)) }

// testAttempt is an attempt as the proxy would record it.
func testAttempt(outcome string) dedupe.Attempt {
	return dedupe.Attempt{At: time.Now(), By: dedupe.AttemptBySender, Outcome: outcome, Status: 200,
		Duration: 10 * time.Millisecond, Replica: "test"}
}

func claimReq(key, hash string) dedupe.ClaimRequest {
	return dedupe.ClaimRequest{Sender: "s", Key: key, PayloadHash: hash, Owner: newOwner(), Lease: time.Minute, TTL: time.Hour}
}

// Replicas starting at the same moment on an empty database each migrate;
// the advisory lock makes them apply the schema once, and all start.
func TestConcurrentMigrate(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	stores := make([]*postgres.Store, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = postgres.Open(ctxFor(t, 30*time.Second), dsn)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: New: %v", i, err)
		}
		defer stores[i].Close()
	}
	var versions, applied int
	err := stores[0].Pool().QueryRow(ctxFor(t, 5*time.Second),
		`SELECT count(*), count(DISTINCT version) FROM hookonce_schema_migrations`).Scan(&applied, &versions)
	if err != nil {
		t.Fatal(err)
	}
	if applied != versions || versions != len(migrationFiles(t)) {
		t.Fatalf("schema_migrations holds %d rows for %d versions, want one for each of %d migrations",
			applied, versions, len(migrationFiles(t)))
	}
	// Every migration's tables are there (the latest included).
	for _, table := range []string{"hookonce_records", "hookonce_conflicts", "hookonce_objects"} {
		var ok bool
		if err := stores[0].Pool().QueryRow(ctxFor(t, 5*time.Second),
			`SELECT to_regclass($1) IS NOT NULL`, table).Scan(&ok); err != nil || !ok {
			t.Fatalf("table %s after migrating: %v, %v", table, ok, err)
		}
	}
	for i, s := range stores {
		if err := s.Ping(ctxFor(t, 5*time.Second)); err != nil {
			t.Errorf("replica %d: Ping: %v", i, err)
		}
	}
}

func TestPingNeedsMigration(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	// OpenReadOnly pings and migrates nothing: on an unmigrated database
	// its Ping fails, and not as an outage.
	if ro, err := postgres.OpenReadOnly(ctxFor(t, 10*time.Second), dsn); err == nil {
		ro.Close()
		t.Fatal("Ping on an unmigrated database succeeded")
	} else if errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("Ping on an unmigrated database says unavailable: %v", err)
	}
	s, err := postgres.Open(ctxFor(t, 10*time.Second), dsn)
	if err != nil {
		t.Fatalf("Open (migrates): %v", err)
	}
	defer s.Close()
	for range 2 { // a current schema: nothing to do, however often
		if err := s.Migrate(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatalf("Migrate after Open: %v", err)
		}
	}
	var applied int
	if err := s.Pool().QueryRow(ctxFor(t, 5*time.Second),
		`SELECT count(*) FROM hookonce_schema_migrations`).Scan(&applied); err != nil || applied != len(migrationFiles(t)) {
		t.Fatalf("after migrating three times: %d migrations recorded (%v), want %d", applied, err, len(migrationFiles(t)))
	}
	if err := s.Ping(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatalf("Ping after Open: %v", err)
	}
}

func TestInvalidDSNHidesPassword(t *testing.T) {
	for _, dsn := range []string{
		"postgres://u:s3cret@127.0.0.1:notaport/db",
		"postgres://u:s3cret@127.0.0.1:5432/db?connect_timeout=soon",
		"postgresql://u:s3cret@[::1/db",
		"postgres://u:s3cret@127.0.0.1/db?pool_max_conns=0",
		"postgres://u@127.0.0.1:notaport/db?password=s3cret",
		"postgres://u@127.0.0.1/db?sslpassword=s3cret&connect_timeout=soon",
		"postgres://u:s3cret@127.0.0.1/db?password=s3cret&sslmode=bogus",
	} {
		_, err := postgres.Open(context.Background(), dsn)
		if err == nil {
			t.Errorf("Open accepted %q", dsn)
			continue
		}
		if got := err.Error(); strings.Contains(got, "s3cret") {
			t.Errorf("error shows the password: %s", got)
		} else {
			t.Logf("%s", got)
		}
	}
}

// A duplicate, an in-progress and a conflicting delivery are answered from
// a read: the row is neither updated nor locked (a lock would set xmax).
func TestAnswersFromAReadWriteNothing(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	s := mustNew(t, dsn)
	ctx := ctxFor(t, 10*time.Second)
	rowVersion := func(key string) string {
		t.Helper()
		var v string
		if err := s.Pool().QueryRow(ctx, `SELECT xmin::text || '/' || xmax::text FROM hookonce_records WHERE key = $1`, key).Scan(&v); err != nil {
			t.Fatalf("row version of %s: %v", key, err)
		}
		return v
	}
	cases := []struct {
		name string
		hash string
		done bool
		want dedupe.Found
	}{
		{"duplicate", "h", true, dedupe.Duplicate},
		{"conflict", "other", true, dedupe.Conflicting},
		{"in progress", "h", false, dedupe.InProgress},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := fmt.Sprintf("k%d", i)
			first := claimReq(key, "h")
			if _, err := s.Claim(ctx, first); err != nil {
				t.Fatal(err)
			}
			if tc.done {
				if err := s.Complete(ctx, "s", key, first.Owner, dedupe.Response{Status: 200}, testAttempt("processed")); err != nil {
					t.Fatal(err)
				}
			}
			before := rowVersion(key)
			for range 5 {
				res, err := s.Claim(ctx, claimReq(key, tc.hash))
				if err != nil || res.Found != tc.want {
					t.Fatalf("Claim = %v, %v; want %v", res.Found, err, tc.want)
				}
			}
			if after := rowVersion(key); after != before || after[len(after)-2:] != "/0" {
				t.Fatalf("row version (xmin/xmax) went from %s to %s: the answer wrote or locked", before, after)
			}
		})
	}
}

// Many goroutines on two stores (two pools, as two replicas) claim and
// release a handful of keys over and over: at no moment do two of them hold
// the same key. This drives the paths where the row vanishes or changes
// between the claim statement and the follow-up read.
func TestChurnNeverTwoHolders(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	stores := []*postgres.Store{mustNew(t, dsn), mustNew(t, dsn)}
	const keys, workers, rounds = 3, 12, 40
	var holders [keys]atomic.Int32
	var claims, contention atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[w%2]
			for i := range rounds {
				k := (w + i) % keys
				r := claimReq(fmt.Sprintf("churn%d", k), "h")
				res, err := s.Claim(context.Background(), r)
				if errors.Is(err, dedupe.ErrUnavailable) {
					// The row changed under every one of the claim's
					// bounded attempts: a 503 for the sender, who retries.
					contention.Add(1)
					continue
				}
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				if res.Found != dedupe.Claimed {
					continue
				}
				claims.Add(1)
				if n := holders[k].Add(1); n != 1 {
					t.Errorf("key %d held by %d owners at once", k, n)
				}
				time.Sleep(time.Millisecond)
				holders[k].Add(-1)
				if err := s.Release(context.Background(), "s", r.Key, r.Owner, testAttempt("released")); err != nil {
					t.Errorf("Release by the holder: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if claims.Load() < keys {
		t.Fatalf("only %d claims won in %d attempts", claims.Load(), workers*rounds)
	}
	if n := contention.Load(); n > workers*rounds/10 {
		t.Fatalf("%d of %d claims gave up on contention", n, workers*rounds)
	}
}

// Many events, each delivered many times at once through two stores:
// exactly one claim per event.
func TestTwoStoresOneWinnerPerEvent(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	stores := []*postgres.Store{mustNew(t, dsn), mustNew(t, dsn)}
	const events, deliveries = 20, 12
	var won [events]atomic.Int32
	start := make(chan struct{})
	var wg sync.WaitGroup
	for e := range events {
		for d := range deliveries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := stores[d%2].Claim(context.Background(), claimReq(fmt.Sprintf("evt%d", e), "h"))
				switch {
				case err != nil:
					t.Errorf("Claim: %v", err)
				case res.Found == dedupe.Claimed:
					won[e].Add(1)
				case res.Found != dedupe.InProgress:
					t.Errorf("event %d: outcome %v", e, res.Found)
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	for e := range events {
		if n := won[e].Load(); n != 1 {
			t.Errorf("event %d claimed %d times, want 1", e, n)
		}
	}
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	s, err := postgres.Open(ctxFor(t, 30*time.Second), pgtest.Shared(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.Claim(ctxFor(t, 5*time.Second), claimReq("k", "h")); !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("Claim on a closed store: err = %v, want ErrUnavailable", err)
	}
}

// serve migrates on start; on a database already migrated by a stronger
// role, a role that may only read and write the tables starts and claims.
func TestLeastPrivilegeRoleServesMigratedDatabase(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.NewDatabase(t)
	owner := mustNew(t, dsn)
	ctx := ctxFor(t, 10*time.Second)
	role := fmt.Sprintf("limited_%d", ownerN.Add(1))
	for _, q := range []string{
		`CREATE ROLE ` + role + ` LOGIN`,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON hookonce_records, hookonce_conflicts, hookonce_objects TO ` + role,
		`GRANT SELECT ON hookonce_schema_migrations TO ` + role,
	} {
		if _, err := owner.Pool().Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	limitedDSN := strings.Replace(dsn, "postgres://postgres@", "postgres://"+role+"@", 1)
	s := mustNew(t, limitedDSN)
	r := claimReq("k", "h")
	if res, err := s.Claim(ctx, r); err != nil || res.Found != dedupe.Claimed {
		t.Fatalf("Claim as %s: %v, %v", role, res.Found, err)
	}
	if err := s.Complete(ctx, "s", "k", r.Owner, dedupe.Response{Status: 200}, testAttempt("processed")); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordConflict(ctx, dedupe.Conflict{Sender: "s", Key: "k", StoredHash: "h", ReceivedHash: "x"}); err != nil {
		t.Fatalf("RecordConflict as %s: %v", role, err)
	}
	lockOwner := newOwner()
	if ok, err := s.LockObject(ctx, "scope", "o", lockOwner, time.Minute); err != nil || !ok {
		t.Fatalf("LockObject as %s: %v, %v", role, ok, err)
	}
	if err := s.RenewObject(ctx, "scope", "o", lockOwner, time.Minute); err != nil {
		t.Fatalf("RenewObject as %s: %v", role, err)
	}
	if err := s.UnlockObject(ctx, "scope", "o", lockOwner); err != nil {
		t.Fatalf("UnlockObject as %s: %v", role, err)
	}
	if _, err := s.Purge(ctx, dedupe.PurgeRequest{}); err != nil {
		t.Fatalf("Purge as %s: %v", role, err)
	}
	if _, err := s.Pool().Exec(ctx, `CREATE TABLE probe (id int)`); err == nil {
		t.Fatalf("role %s may create tables: the test proves nothing", role)
	}
}

// OpenReadOnly migrates nothing: on a database never migrated it fails
// saying so and leaves no table behind. On a migrated one it reads what a
// writable store wrote, refuses writes, and its sessions are read-only on
// the server as well.
func TestOpenReadOnly(t *testing.T) {
	srv := pgtest.Shared(t)
	tables := func(t *testing.T, dsn string) int {
		t.Helper()
		c, err := pgx.Connect(ctxFor(t, 10*time.Second), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		var n int
		if err := c.QueryRow(ctxFor(t, 5*time.Second), `SELECT count(*) FROM pg_tables WHERE tablename LIKE 'hookonce%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("never migrated", func(t *testing.T) {
		dsn := srv.NewDatabase(t)
		_, err := postgres.OpenReadOnly(ctxFor(t, 10*time.Second), dsn)
		if err == nil || !strings.Contains(err.Error(), "hookonce migrate") {
			t.Fatalf("OpenReadOnly on an unmigrated database: %v, want it to say to migrate", err)
		}
		if n := tables(t, dsn); n != 0 {
			t.Fatalf("OpenReadOnly left %d hookonce tables", n)
		}
	})

	t.Run("migrated", func(t *testing.T) {
		dsn := srv.NewDatabase(t)
		rw := mustNew(t, dsn)
		dedupetest.RunReadOnly(t, rw, func(t *testing.T) dedupe.Store {
			s, err := postgres.OpenReadOnly(ctxFor(t, 10*time.Second), dsn)
			if err != nil {
				t.Fatalf("OpenReadOnly: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		})
	})

	t.Run("on serve's failover DSN", func(t *testing.T) {
		// host1,host2 with target_session_attrs=read-write, as replicas
		// in front of a primary and its standby are configured: the
		// read-only commands open the same DSN (here both hosts are the
		// one server).
		dsn := srv.NewDatabase(t)
		rw := mustNew(t, dsn)
		if _, err := rw.Claim(ctxFor(t, 5*time.Second), dedupe.ClaimRequest{Sender: "s", Key: "k", PayloadHash: "h", Owner: "o", Lease: time.Minute, TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		hostPort := fmt.Sprintf("127.0.0.1:%d", srv.Port())
		failover := strings.Replace(dsn, hostPort, hostPort+","+hostPort, 1) + "&target_session_attrs=read-write"
		s, err := postgres.OpenReadOnly(ctxFor(t, 10*time.Second), failover)
		if err != nil {
			t.Fatalf("OpenReadOnly on %s: %v", failover, err)
		}
		defer s.Close()
		if rec, err := s.Get(ctxFor(t, 5*time.Second), "s", "k"); err != nil || rec.Key != "k" {
			t.Fatalf("Get through the failover DSN: %+v %v", rec, err)
		}
	})

	t.Run("transactions are read-only on the server", func(t *testing.T) {
		dsn := srv.NewDatabase(t)
		mustNew(t, dsn)
		s, err := postgres.OpenReadOnlyUnwrapped(ctxFor(t, 10*time.Second), dsn+"&default_transaction_read_only=off")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		readOnly := func(what string, err error) {
			t.Helper()
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "25006" { // read_only_sql_transaction
				t.Fatalf("%s through a read-only store: %v, want SQLSTATE 25006", what, err)
			}
		}
		readOnly("a DELETE", postgres.Exec(ctxFor(t, 5*time.Second), s, `DELETE FROM hookonce_records`))
		// The batched path (a claim's first try) as well.
		_, err = s.Claim(ctxFor(t, 5*time.Second), claimReq("k", "h"))
		readOnly("a claim", err)
		// The session itself is not read-only: nothing stays on a
		// connection that a pooler would hand to another client.
		var mode string
		if err := s.Pool().QueryRow(ctxFor(t, 5*time.Second), `SHOW default_transaction_read_only`).Scan(&mode); err != nil || mode != "off" {
			t.Fatalf("default_transaction_read_only of the read-only store's session = %q, %v; want off", mode, err)
		}
	})
}

// A database whose transactions are read-only by default (as a standby's
// are) answers Ping and refuses the probe's write, as it would refuse a
// claim; the probe passes again once writes are allowed.
func TestProbeFailsInAReadOnlyDatabase(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.NewDatabase(t)
	s := mustNew(t, dsn)
	if err := s.Probe(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	admin, err := pgx.Connect(ctxFor(t, 10*time.Second), srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	db := strings.TrimSuffix(dsn[strings.LastIndex(dsn, "/")+1:], "?sslmode=disable")
	setMode := func(t *testing.T, mode string) {
		t.Helper()
		ctx := ctxFor(t, 10*time.Second)
		if _, err := admin.Exec(ctx, `ALTER DATABASE "`+db+`" SET default_transaction_read_only = `+mode); err != nil {
			t.Fatal(err)
		}
		// The setting applies to new sessions: end the store's.
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, db); err != nil {
			t.Fatal(err)
		}
	}
	probeUntil := func(t *testing.T, ok func(error) bool) error {
		t.Helper()
		var err error
		for i := 0; i < 50; i++ {
			if err = s.Probe(ctxFor(t, 2*time.Second)); ok(err) {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("Probe kept answering %v", err)
		return nil
	}

	setMode(t, "on")
	err = probeUntil(t, func(err error) bool {
		var pgErr *pgconn.PgError
		return errors.As(err, &pgErr) && pgErr.Code == "25006" // read_only_sql_transaction
	})
	if !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("Probe in a read-only database: %v, want ErrUnavailable", err)
	}
	if err := s.Ping(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatalf("Ping in a read-only database: %v", err)
	}
	setMode(t, "off")
	probeUntil(t, func(err error) bool { return err == nil })
}
