package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
)

func ack() dedupe.DeferRequest {
	return dedupe.DeferRequest{Ack: dedupe.Response{Status: 200, Body: []byte("OK77")}, RetryFor: time.Hour}
}

// deferred claims key (ttl as given) and defers it with d; it answers
// the claim's owner.
func deferred(t *testing.T, s *postgres.Store, key string, ttl time.Duration, d dedupe.DeferRequest) string {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	req := claimReq(key, "h-"+key)
	req.TTL = ttl
	req.Request = &dedupe.StoredRequest{Method: "POST", URI: "/hook"}
	req.RequestBody = []byte(`{"id":"` + key + `"}`)
	if res, err := s.Claim(ctx, req); err != nil || res.Found != dedupe.Claimed {
		t.Fatalf("claim %s: %v %v", key, res.Found, err)
	}
	if err := s.Defer(ctx, "s", key, req.Owner, d); err != nil {
		t.Fatalf("defer %s: %v", key, err)
	}
	return req.Owner
}

// A delivery owed past its record's ttl (its deliverer gone past
// pending_until) does not keep the key: the sender's next delivery claims
// the record as new, the claim statement drops the pending columns, and
// the old deliverer's writes are refused. Until then GetConfirmed, the
// read that settles an ambiguous Defer, shows the Pending.
func TestPendingClaimPastTTLDropsIt(t *testing.T) {
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	ctx := ctxFor(t, 20*time.Second)
	d := ack()
	d.RetryFor, d.Lease = 200*time.Millisecond, time.Minute
	owner := deferred(t, s, "evt", 100*time.Millisecond, d)
	rec, err := s.GetConfirmed(ctx, "s", "evt")
	if err != nil || rec.Pending == nil || rec.Pending.Owner != owner || rec.State != dedupe.StateDone {
		t.Fatalf("GetConfirmed after Defer: %+v (pending %+v), %v", rec, rec.Pending, err)
	}
	if got := rec.Pending.Until.Sub(rec.Pending.Since); got != 200*time.Millisecond {
		t.Fatalf("until - since = %v, want retry_for 200ms (one clock reading)", got)
	}
	if !rec.ExpiresAt.Equal(rec.Pending.Until) {
		t.Fatalf("expires %v, want extended to the delivery's end %v", rec.ExpiresAt, rec.Pending.Until)
	}
	time.Sleep(400 * time.Millisecond)

	res, err := s.Claim(ctx, claimReq("evt", "h-evt"))
	if err != nil || res.Found != dedupe.Claimed {
		t.Fatalf("claim past the ttl: %v %v, want claimed", res.Found, err)
	}
	if rec, err := s.Get(ctx, "s", "evt"); err != nil || rec.Pending != nil || rec.State != dedupe.StateProcessing {
		t.Fatalf("after the claim: state %s pending %+v, %v", rec.State, rec.Pending, err)
	}
	err = s.SettlePending(ctx, "s", "evt", owner, dedupe.PendingSettle{Outcome: dedupe.SettleDelivered, Attempt: testAttempt("processed")})
	if !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("the old deliverer's settle: %v, want ErrNotOwner", err)
	}
	if got, err := s.TakeDue(ctx, "s", newOwner(), time.Minute, 10); err != nil || len(got) != 0 {
		t.Fatalf("TakeDue after the claim: %d, %v", len(got), err)
	}
}

// Purge by age (--older-than) keeps an owed delivery too, while it
// removes a done record received as long ago.
func TestPendingPurgeOlderThan(t *testing.T) {
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	ctx := ctxFor(t, 20*time.Second)
	deferred(t, s, "owed", time.Hour, ack())
	plain := claimReq("plain", "h")
	if _, err := s.Claim(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, "s", "plain", plain.Owner, dedupe.Response{Status: 200}, testAttempt("processed")); err != nil {
		t.Fatal(err)
	}
	n, err := s.Purge(ctx, dedupe.PurgeRequest{ReceivedBefore: time.Now().Add(time.Hour)})
	if err != nil || n != 1 {
		t.Fatalf("purge --older-than: %d removed, %v; want the done record only", n, err)
	}
	if rec, err := s.Get(ctx, "s", "owed"); err != nil || rec.Pending == nil {
		t.Fatalf("owed delivery after the purge: %+v, %v", rec.Pending, err)
	}
}

// On a table of many records with a few deliveries owed, the planner
// reads the owed ones through hookonce_records_pending: the take, the
// counts and List's pending filter never walk every record.
func TestPendingStatementsUseTheIndex(t *testing.T) {
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	ctx := ctxFor(t, 30*time.Second)
	if _, err := s.Pool().Exec(ctx, `
		INSERT INTO hookonce_records (sender, key, state, payload_hash, received_at, completed_at, expires_at, resp_status)
		SELECT 's' || (i % 4), 'k' || i, 'done', 'h', now(), now(), now() + interval '1 day', 200
		FROM generate_series(1, 20000) i`); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		deferred(t, s, fmt.Sprintf("owed%d", i), time.Hour, ack())
	}
	if _, err := s.Pool().Exec(ctx, `ANALYZE hookonce_records`); err != nil {
		t.Fatal(err)
	}
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, c := range []struct {
		name, sql string
		args      []any
	}{
		{"take", postgres.TakeDueSQL, []any{"s", "o", int64(60e6), int64(10)}},
		{"counts", postgres.PendingCountsSQL, nil},
		{"list", postgres.ListSQL(true), []any{"s", "", "", "", "", 100, 0}},
		{"list, every sender", postgres.ListSQL(true), []any{"", "", "", "", "", 100, 0}},
	} {
		if p := explain(t, conn, c.sql, c.args...); !strings.Contains(p, "hookonce_records_pending") {
			t.Errorf("%s: plan does not read hookonce_records_pending:\n%s", c.name, p)
		}
	}
}

// A completion stays a HOT update: the pending index is
// partial on a column they never change, so it costs them no index
// write; a Defer, which enters the index, is not HOT (the counter can
// tell the two apart).
func TestCompleteStaysHOT(t *testing.T) {
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	ctx := ctxFor(t, 20*time.Second)
	first, complete := postgres.NewEventStatements()
	err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		counts := func() (upd, hot int64) {
			t.Helper()
			if err := tx.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables
				WHERE relname = 'hookonce_records'`).Scan(&upd, &hot); err != nil {
				t.Fatal(err)
			}
			return upd, hot
		}
		for _, key := range []string{"done", "deferred"} {
			rows, err := tx.Query(ctx, first, "s", key, "h", "o-"+key, int64(60e6), int64(3600e6), []byte("{}"), nil, nil)
			if err != nil {
				return err
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, complete, "s", "done", "o-done", int32(200), nil, []byte("ok"), false,
			`{"at":"2024-01-02T03:04:05Z","by":"sender","outcome":"processed","status":200,"duration_ns":1,"replica":"r"}`); err != nil {
			return err
		}
		if upd, hot := counts(); upd != 1 || hot != 1 {
			t.Errorf("complete: %d updates, %d HOT; want 1, 1", upd, hot)
		}
		if _, err := tx.Exec(ctx, postgres.DeferSQL, "s", "deferred", "o-deferred", int32(200), nil, []byte("OK"), false,
			int64(3600e6), int64(0)); err != nil {
			return err
		}
		if upd, hot := counts(); upd != 2 || hot != 1 {
			t.Errorf("defer: %d updates, %d HOT; want 2, 1 (a Defer writes the pending index)", upd, hot)
		}
		return errors.New("rollback")
	})
	if err != nil && err.Error() != "rollback" {
		t.Fatal(err)
	}
}

// Concurrent Defers share commits as completions do (Defer is on the
// request path), each fenced by its own owner.
func TestConcurrentDefersShareCommits(t *testing.T) {
	fencedWritesShareCommits(t, "defer", func(s *postgres.Store, key, owner string, _ int) error {
		return s.Defer(ctxFor(t, 30*time.Second), "s", key, owner, ack())
	}, func(i int, rec dedupe.Record, err error) string {
		if i == stranger {
			if !errors.Is(err, dedupe.ErrNotOwner) || rec.State != dedupe.StateProcessing || rec.Pending != nil {
				return fmt.Sprintf("defer by a stranger: %v, state %s, pending %+v", err, rec.State, rec.Pending)
			}
		} else if err != nil || rec.State != dedupe.StateDone || rec.Pending == nil || string(rec.Response.Body) != "OK77" {
			return fmt.Sprintf("defer %d: %v, state %s, pending %+v", i, err, rec.State, rec.Pending)
		}
		return ""
	})
}

// BenchmarkNewEvent32 is a new event's store cost from 32 goroutines on a
// durable server (fsync on), the synchronous way (claim, then Complete
// with the site's answer) and the durable acknowledgement's (claim, then
// Defer, held for its first try as the proxy does), and, for the
// background, a take and a settle per event.
func BenchmarkNewEvent32(b *testing.B) {
	srv := pgtest.StartWith(b, pgtest.Options{Durable: true})
	type step func(s *postgres.Store, key, owner string) error
	for _, c := range []struct {
		name string
		end  step
	}{
		{"complete", func(s *postgres.Store, key, owner string) error {
			return s.Complete(context.Background(), "s", key, owner, dedupe.Response{Status: 200, Body: []byte("OK")}, testAttempt("processed"))
		}},
		{"defer", func(s *postgres.Store, key, owner string) error {
			d := ack()
			d.Lease = time.Minute
			return s.Defer(context.Background(), "s", key, owner, d)
		}},
		{"defer+settle", func(s *postgres.Store, key, owner string) error {
			d := ack()
			d.Lease = time.Minute
			if err := s.Defer(context.Background(), "s", key, owner, d); err != nil {
				return err
			}
			return s.SettlePending(context.Background(), "s", key, owner,
				dedupe.PendingSettle{Outcome: dedupe.SettleDelivered, Attempt: testAttempt("processed")})
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := mustNew(b, srv.NewDatabase(b))
			const workers = 32
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < b.N; i += workers {
						r := claimReq(fmt.Sprintf("bench-%d", i), "h")
						if res, err := s.Claim(context.Background(), r); err != nil || res.Found != dedupe.Claimed {
							b.Errorf("claim %d: %v %v", i, res.Found, err)
							return
						}
						if err := c.end(s, r.Key, r.Owner); err != nil {
							b.Errorf("%s %d: %v", c.name, i, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
