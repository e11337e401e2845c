package postgres_test

import (
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/postgres"
	"github.com/hookonce/hookonce/internal/testkit/pgtest"
)

// NewEventStatements, run alone in the documented parameter order (as a
// benchmark's reference runs them), make the same record Claim and
// Complete make: a new key claimed, then done with the answer and the
// attempt; a second completion by the same owner changes nothing.
func TestNewEventStatements(t *testing.T) {
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	ctx := ctxFor(t, 30*time.Second)
	first, complete := postgres.NewEventStatements()
	head := []byte(`{"method":"POST","uri":"/hooks/shop","header":{"X-Event-Id":["e1"]}}`)
	rows, err := s.Pool().Query(ctx, first, "shop", "e1", "hash", "owner-1",
		(30 * time.Second).Microseconds(), (72 * time.Hour).Microseconds(), []byte(`{"a":1}`), head, []byte(nil))
	if err != nil {
		t.Fatal(err)
	}
	var got [][]any
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// One row: inserted, not claimable (it is this claim's), the record.
	if len(got) != 1 || len(got[0]) < 3 || got[0][0] != true || got[0][1] != false {
		t.Fatalf("first answered %v; want one row: true, false, the record", got)
	}
	attempt := `{"at":"2024-01-02T03:04:05.000000006Z","by":"sender","outcome":"completed","status":200,"duration_ns":7,"replica":"r"}`
	for i, want := range []int64{1, 0} {
		tag, err := s.Pool().Exec(ctx, complete, "shop", "e1", "owner-1", int32(200),
			[]byte(`{"Content-Type":["application/json"]}`), []byte(`{"ok":true}`), false, attempt)
		if err != nil {
			t.Fatal(err)
		}
		if tag.RowsAffected() != want {
			t.Fatalf("complete #%d: %d rows, want %d", i+1, tag.RowsAffected(), want)
		}
	}
	rec, err := s.Get(ctx, "shop", "e1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != dedupe.StateDone || rec.Owner != "" || rec.PayloadHash != "hash" || string(rec.RequestBody) != `{"a":1}` {
		t.Fatalf("record: %+v", rec)
	}
	if rec.Request == nil || rec.Request.URI != "/hooks/shop" || rec.Request.Header.Get("X-Event-Id") != "e1" {
		t.Fatalf("request head: %+v", rec.Request)
	}
	if r := rec.Response; r == nil || r.Status != 200 || string(r.Body) != `{"ok":true}` ||
		r.Header.Get("Content-Type") != "application/json" || r.Truncated {
		t.Fatalf("response: %+v", r)
	}
	if len(rec.Attempts) != 1 || rec.Attempts[0].Outcome != "completed" || rec.Attempts[0].Replica != "r" ||
		rec.Attempts[0].Duration != 7 {
		t.Fatalf("attempts: %+v", rec.Attempts)
	}
	if got := rec.ExpiresAt.Sub(rec.ReceivedAt); got != 72*time.Hour {
		t.Fatalf("expires %v after received, want 72h", got)
	}
}

// A new key's claim answers the record a read of it answers, field for
// field: firstSQL's won row carries only the lease and the times, and the
// rest is filled in from the claim's request (claimWon). Batched and
// alone, with and without a kept request.
func TestClaimWonRecordAsRead(t *testing.T) {
	s := mustNew(t, pgtest.Shared(t).NewDatabase(t))
	ctx := ctxFor(t, 30*time.Second)
	for _, batched := range []bool{true, false} {
		postgres.SetClaimBatching(s, batched)
		for _, kept := range []bool{true, false} {
			req := claimReq(fmt.Sprintf("won-%v-%v", batched, kept), "hash-1")
			req.Lease, req.TTL = 1234567*time.Microsecond, 72*time.Hour+time.Microsecond
			if kept {
				req.RequestBody = []byte(`{"id":"evt_1","amount":100}`)
				req.Request = &dedupe.StoredRequest{Method: "POST", URI: "/hooks/shop?a=1",
					Header: http.Header{"X-Event-Id": {"evt_1"}, "Content-Type": {"application/json"}}, RemoteAddr: "203.0.113.9:4711"}
				req.Fingerprint = []byte{1, 2, 'i', 'd', 1, 2, 3, 4, 5, 6, 7, 8}
			}
			res, err := s.Claim(ctx, req)
			if err != nil || res.Found != dedupe.Claimed {
				t.Fatalf("claim %s: %v %v", req.Key, res.Found, err)
			}
			read, err := s.Get(ctx, req.Sender, req.Key)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.Record, read) {
				t.Errorf("batched=%v kept=%v: claim answered\n%+v\na read answers\n%+v", batched, kept, res.Record, read)
			}
			if got := res.Record.ExpiresAt.Sub(res.Record.ReceivedAt); got != req.TTL {
				t.Errorf("expires %v after received, want %v", got, req.TTL)
			}
		}
	}
}
