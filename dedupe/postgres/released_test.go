package postgres_test

import (
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
	"github.com/jackc/pgx/v5"
)

// A database at schema version 1, with rows in every old state, migrates in
// place: the rows keep what they had (no attempts, no request head, no
// pending delivery), a claim that was in flight during the upgrade is
// released as a record, and the state constraint takes 'released' but
// nothing unknown.
func TestMigrateFromVersion1(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	ctx := ctxFor(t, 30*time.Second)
	initSQL, err := os.ReadFile("migrations/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		string(initSQL),
		`CREATE TABLE hookonce_schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`,
		`INSERT INTO hookonce_schema_migrations (version, name) VALUES (1, '0001_init.sql')`,
		`INSERT INTO hookonce_records (sender, key, state, payload_hash, owner, lease_until, received_at, expires_at, request_body)
			VALUES ('s', 'inflight', 'processing', 'h', 'old-owner', now() + interval '1 minute', now(), now() + interval '1 hour', 'body')`,
		`INSERT INTO hookonce_records (sender, key, state, payload_hash, received_at, completed_at, expires_at, resp_status, resp_body)
			VALUES ('s', 'done', 'done', 'h', now(), now(), now() + interval '1 hour', 200, 'ok')`,
		`INSERT INTO hookonce_records (sender, key, state, payload_hash, received_at, expires_at)
			VALUES ('s', 'held', 'unknown', 'h', now(), now() + interval '1 hour')`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("set up version 1: %v", err)
		}
	}

	s := mustNew(t, dsn) // migrates
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after migrating from version 1: %v", err)
	}
	for key, state := range map[string]dedupe.State{"inflight": dedupe.StateProcessing, "done": dedupe.StateDone, "held": dedupe.StateUnknown} {
		rec, err := s.Get(ctx, "s", key)
		if err != nil {
			t.Fatalf("Get %s: %v", key, err)
		}
		if rec.State != state || rec.Attempts != nil || rec.Request != nil || rec.Pending != nil {
			t.Fatalf("migrated %s = %+v, want state %s, no attempts, no request head, no pending delivery", key, rec, state)
		}
	}
	a := testAttempt("released")
	if err := s.Release(ctx, "s", "inflight", "old-owner", a); err != nil {
		t.Fatalf("Release of a claim taken before the upgrade: %v", err)
	}
	rec, err := s.Get(ctx, "s", "inflight")
	if err != nil || rec.State != dedupe.StateReleased || len(rec.Attempts) != 1 || string(rec.RequestBody) != "body" {
		t.Fatalf("released after migrating = %+v, %v", rec, err)
	}
	if _, err := conn.Exec(ctx, `UPDATE hookonce_records SET state = 'bogus' WHERE key = 'done'`); err == nil {
		t.Fatal("the state constraint let 'bogus' in")
	}
	// The later migrations came along: object locks work.
	if ok, err := s.LockObject(ctx, "s", "inflight", "lock-owner", time.Minute); err != nil || !ok {
		t.Fatalf("LockObject after migrating from version 1: %v, %v", ok, err)
	}
}

// What a claim of a released record keeps and what it starts afresh, as
// claimSQL documents: the attempts stay; hash, request, received_at,
// expires_at, hits and takeovers are the new claim's.
func TestReleasedIsClaimedAsNew(t *testing.T) {
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	ctx := ctxFor(t, 10*time.Second)

	first := claimReq("k", "h1")
	first.Lease = 100 * time.Millisecond
	first.RequestBody = []byte("first")
	first.Request = &dedupe.StoredRequest{Method: "POST", URI: "/hook?n=1", Header: http.Header{"X-N": {"1"}}}
	if _, err := s.Claim(ctx, first); err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	taker := claimReq("k", "h1")
	if res, err := s.Claim(ctx, taker); err != nil || res.Found != dedupe.TakenOver {
		t.Fatalf("takeover: %v, %v", res.Found, err)
	}
	if err := s.Release(ctx, "s", "k", taker.Owner, testAttempt("released")); err != nil {
		t.Fatal(err)
	}
	released, err := s.Get(ctx, "s", "k")
	if err != nil {
		t.Fatal(err)
	}
	if released.Takeovers != 1 || released.Owner != "" || !released.LeaseUntil.IsZero() || released.Request == nil {
		t.Fatalf("released record = %+v", released)
	}

	time.Sleep(10 * time.Millisecond)
	second := claimReq("k", "h2") // another payload, no request kept
	res, err := s.Claim(ctx, second)
	if err != nil || res.Found != dedupe.Claimed {
		t.Fatalf("claim of a released record: %v, %v", res.Found, err)
	}
	rec := res.Record
	switch {
	case rec.State != dedupe.StateProcessing || rec.Owner != second.Owner || rec.PayloadHash != "h2":
		t.Fatalf("re-claimed record = %+v", rec)
	case rec.Takeovers != 0 || rec.Hits != 0:
		t.Fatalf("counters carried over: takeovers %d hits %d", rec.Takeovers, rec.Hits)
	case !rec.ReceivedAt.After(released.ReceivedAt) || !rec.ExpiresAt.After(released.ExpiresAt):
		t.Fatalf("times not renewed: received %v→%v expires %v→%v", released.ReceivedAt, rec.ReceivedAt, released.ExpiresAt, rec.ExpiresAt)
	case rec.Request != nil || rec.RequestBody != nil:
		t.Fatalf("the released claim's request survived: %+v %q", rec.Request, rec.RequestBody)
	case len(rec.Attempts) != 1 || rec.Attempts[0].Outcome != "released":
		t.Fatalf("attempts = %+v, want the one released attempt", rec.Attempts)
	}
}

// A released record past its ttl is gone as far as the contract goes: a
// claim starts it with no attempts, and Purge removes it like any other.
func TestExpiredReleasedStartsEmpty(t *testing.T) {
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	ctx := ctxFor(t, 10*time.Second)
	for _, key := range []string{"reclaimed", "purged"} {
		r := claimReq(key, "h")
		r.TTL = 100 * time.Millisecond
		if _, err := s.Claim(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, "s", key, r.Owner, testAttempt("released")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(250 * time.Millisecond)
	res, err := s.Claim(ctx, claimReq("reclaimed", "h"))
	if err != nil || res.Found != dedupe.Claimed || len(res.Record.Attempts) != 0 {
		t.Fatalf("claim of an expired released record: %v %+v, %v", res.Found, res.Record.Attempts, err)
	}
	if n, err := s.Purge(ctx, dedupe.PurgeRequest{}); err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v; want the expired released record", n, err)
	}
	if _, err := s.Get(ctx, "s", "purged"); err == nil {
		t.Fatal("expired released record survived Purge")
	}
}
