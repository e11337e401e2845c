package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
)

// migrationFiles lists the embedded migrations, oldest first.
func migrationFiles(t testing.TB) []string {
	t.Helper()
	names, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("migrations: %v, %v", names, err)
	}
	return names
}

// A database at schema version 2 (the release before object locks), with
// a claim in flight, migrates in place: the record is untouched and still
// fenced by its owner, and objects can be locked.
func TestMigrateFromVersion2(t *testing.T) {
	dsn, conn, ctx := databaseAt(t, "0001_init.sql", "0002_released_attempts.sql")
	if _, err := conn.Exec(ctx, `INSERT INTO hookonce_records (sender, key, state, payload_hash, owner, lease_until, received_at, expires_at)
		VALUES ('s', 'inflight', 'processing', 'h', 'old-owner', now() + interval '1 minute', now(), now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}

	s := mustNew(t, dsn) // migrates
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after migrating from version 2: %v", err)
	}
	if ok, err := s.LockObject(ctx, "s", "inflight", "lock-owner", time.Minute); err != nil || !ok {
		t.Fatalf("LockObject after migrating from version 2: %v, %v", ok, err)
	}
	if err := s.Complete(ctx, "s", "inflight", "old-owner", dedupe.Response{Status: 200}, testAttempt("processed")); err != nil {
		t.Fatalf("Complete of a claim taken before the upgrade: %v", err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM hookonce_schema_migrations`).Scan(&n); err != nil || n != len(migrationFiles(t)) {
		t.Fatalf("%d migrations recorded (%v), want %d", n, err, len(migrationFiles(t)))
	}
}

// Purge removes the locks whose holders died long ago (lease ended more
// than an hour before), and leaves live locks and locks that expired only
// lately (the next locker takes those over), whatever the request says.
func TestPurgeRemovesAbandonedObjectLocks(t *testing.T) {
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	ctx := ctxFor(t, 30*time.Second)
	owners := map[string]string{}
	for _, o := range []string{"live", "lately", "abandoned1", "abandoned2", "abandoned3"} {
		owners[o] = newOwner()
		if ok, err := s.LockObject(ctx, "sc", o, owners[o], time.Minute); err != nil || !ok {
			t.Fatalf("LockObject %s: %v, %v", o, ok, err)
		}
	}
	age := func(o, ago string) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, `UPDATE hookonce_objects SET lease_until = clock_timestamp() - $2::interval
			WHERE scope = 'sc' AND object = $1`, o, ago); err != nil {
			t.Fatal(err)
		}
	}
	age("lately", "59 minutes")
	age("abandoned1", "61 minutes")
	age("abandoned2", "2 hours")
	age("abandoned3", "30 days")
	left := func() map[string]bool {
		t.Helper()
		rows, err := s.Pool().Query(ctx, `SELECT object FROM hookonce_objects WHERE scope = 'sc'`)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, o := range objs {
			m[o] = true
		}
		return m
	}

	// A bounded purge removes at most its limit of locks too.
	if n, err := s.Purge(ctx, dedupe.PurgeRequest{Limit: 1}); err != nil || n != 0 {
		t.Fatalf("Purge (limit 1) = %d, %v; want 0 records", n, err)
	}
	if got := left(); len(got) != 4 || !got["live"] || !got["lately"] {
		t.Fatalf("after a purge limited to 1: %v", got)
	}
	// A purge by age of records removes abandoned locks all the same.
	if n, err := s.Purge(ctx, dedupe.PurgeRequest{ReceivedBefore: time.Now().Add(-24 * time.Hour)}); err != nil || n != 0 {
		t.Fatalf("Purge = %d, %v; want 0 records", n, err)
	}
	if got := left(); len(got) != 2 || !got["live"] || !got["lately"] {
		t.Fatalf("after purging: %v, want live and lately", got)
	}

	// The purged locks' holders hold nothing; the objects are free.
	if err := s.UnlockObject(ctx, "sc", "abandoned2", owners["abandoned2"]); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("unlock of a purged lock: %v, want ErrNotOwner", err)
	}
	if ok, err := s.LockObject(ctx, "sc", "abandoned2", newOwner(), time.Minute); err != nil || !ok {
		t.Fatalf("LockObject of a purged lock: %v, %v", ok, err)
	}
	// The live one is still its holder's; the lately expired one is
	// taken over.
	if ok, err := s.LockObject(ctx, "sc", "live", newOwner(), time.Minute); err != nil || ok {
		t.Fatalf("LockObject of a live lock: %v, %v", ok, err)
	}
	if err := s.RenewObject(ctx, "sc", "live", owners["live"], time.Minute); err != nil {
		t.Fatalf("RenewObject of the live lock after purging: %v", err)
	}
	if ok, err := s.LockObject(ctx, "sc", "lately", newOwner(), time.Minute); err != nil || !ok {
		t.Fatalf("LockObject of a lately expired lock: %v, %v", ok, err)
	}
}

// Object locks share batches with claims: concurrent locks, renewals and
// unlocks take a few commits, not one each, and claims and locks with the
// same two names in one batch (one order over both tables) all go through.
func TestObjectLocksShareCommitsWithClaims(t *testing.T) {
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	const n = 32
	b0, _ := postgres.ClaimBatches(s)
	owners := make([]string, n)
	locked := make([]bool, n)
	errs := make([]error, 3*n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		owners[i] = newOwner()
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			locked[i], errs[i] = s.LockObject(ctxFor(t, 30*time.Second), "s", fmt.Sprintf("k%d", i), owners[i], time.Minute)
		}()
		go func() {
			defer wg.Done()
			<-start
			r := claimReq(fmt.Sprintf("k%d", i), "h") // sender "s": the same two names
			res, err := s.Claim(ctxFor(t, 30*time.Second), r)
			if err == nil && res.Found != dedupe.Claimed {
				err = fmt.Errorf("claim k%d: %v", i, res.Found)
			}
			errs[n+i] = err
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := ctxFor(t, 30*time.Second)
			if err := s.RenewObject(ctx, "s", fmt.Sprintf("k%d", i), owners[i], time.Minute); err != nil {
				errs[2*n+i] = err
				return
			}
			errs[2*n+i] = s.UnlockObject(ctx, "s", fmt.Sprintf("k%d", i), owners[i])
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i, ok := range locked {
		if !ok {
			t.Errorf("object k%d was not locked", i)
		}
	}
	b1, _ := postgres.ClaimBatches(s)
	t.Logf("%d locks, claims, renewals and unlocks in %d batches", 4*n, b1-b0)
	if b1-b0 > 2*n {
		t.Errorf("%d statements took %d batches, want at most %d", 4*n, b1-b0, 2*n)
	}
	var rows int
	if err := s.Pool().QueryRow(ctxFor(t, 5*time.Second), `SELECT count(*) FROM hookonce_objects`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d lock rows left after every unlock (%v)", rows, err)
	}
}

// A database at schema version 3 (the release before conflicts kept their
// payload), with a conflict recorded by it, migrates in place: the old
// conflict reads back with an id and no payload, so accepting it is
// refused as not kept; a conflict recorded now is accepted once.
func TestMigrateFromVersion3(t *testing.T) {
	dsn, conn, ctx := databaseAt(t, "0001_init.sql", "0002_released_attempts.sql", "0003_objects.sql")
	if _, err := conn.Exec(ctx, `INSERT INTO hookonce_conflicts (sender, key, stored_hash, received_hash, received_at, changed_paths, expires_at)
		VALUES ('s', 'evt', 'h1', 'h2', now(), ARRAY['amount'], now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}

	s := mustNew(t, dsn) // migrates
	cs, err := s.Conflicts(ctx, dedupe.ListFilter{Sender: "s", Key: "evt"})
	if err != nil || len(cs) != 1 {
		t.Fatalf("old conflict after migration: %+v, %v", cs, err)
	}
	old := cs[0]
	if old.ID == "" || old.ReceivedHash != "h2" || fmt.Sprint(old.ChangedPaths) != "[amount]" || old.Request != nil || old.Body != nil || old.Accepted() {
		t.Fatalf("old conflict read back as %+v", old)
	}
	if _, err := s.AcceptConflict(ctx, "s", "evt", "", "op"); !errors.Is(err, dedupe.ErrNotAcceptable) {
		t.Fatalf("accept of a conflict recorded before the migration: %v, want ErrNotAcceptable", err)
	}
	c := dedupe.Conflict{Sender: "s", Key: "evt", StoredHash: "h1", ReceivedHash: "h3", ReceivedAt: time.Now(),
		ExpiresAt: time.Now().Add(time.Hour), Request: &dedupe.StoredRequest{Method: "POST", URI: "/x"}, Body: []byte(`{"amount":3}`)}
	if err := s.RecordConflict(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := s.AcceptConflict(ctx, "s", "evt", "", "op")
	if err != nil || got.ReceivedHash != "h3" {
		t.Fatalf("accept of a new conflict after migration = %+v, %v", got, err)
	}
	if _, err := s.AcceptConflict(ctx, "s", "evt", got.ID, "op"); !errors.Is(err, dedupe.ErrAccepted) {
		t.Fatalf("second accept after migration: %v, want ErrAccepted", err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM hookonce_schema_migrations`).Scan(&n); err != nil || n != len(migrationFiles(t)) {
		t.Fatalf("%d migrations recorded (%v), want %d", n, err, len(migrationFiles(t)))
	}
}

// databaseAt is a new database migrated by the named files only, as an
// older release left it, and a connection to it (closed with the test).
func databaseAt(t *testing.T, migrations ...string) (string, *pgx.Conn, context.Context) {
	t.Helper()
	dsn := pgtest.Shared(t).NewDatabase(t)
	ctx := ctxFor(t, 30*time.Second)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, `CREATE TABLE hookonce_schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	for v, name := range migrations {
		b, err := os.ReadFile(filepath.Join("migrations", name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, string(b)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO hookonce_schema_migrations (version, name) VALUES ($1, $2)`, v+1, name); err != nil {
			t.Fatal(err)
		}
	}
	return dsn, conn, ctx
}
