package redis_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/dedupetest"
	"github.com/hookonce/hookonce/dedupe/redis"
	"github.com/hookonce/hookonce/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustOpen(t *testing.T, url string) *redis.Store {
	t.Helper()
	s, err := redis.Open(ctxT(t, 5*time.Second), url)
	if err != nil {
		t.Fatalf("redis.Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	srv := redistest.Shared(t)
	dedupetest.RunConformance(t, func(t *testing.T) dedupe.Store { return mustOpen(t, srv.URL()) })
}

func TestObjectConformance(t *testing.T) {
	srv := redistest.Shared(t)
	dedupetest.RunObjectConformance(t, func(t *testing.T) dedupe.Store { return mustOpen(t, srv.URL()) })
}

func TestNewRejectsBadURLs(t *testing.T) {
	tests := []struct{ name, url, want string }{
		{"no scheme", "localhost:6379", "no scheme"},
		{"other scheme", "postgres://localhost/db", "scheme"},
		{"unknown variant", "redis+shard://localhost:6379", "scheme"},
		{"unknown option", "redis://localhost:6379?bogus=1", "bogus"},
		{"password is not echoed", "redis://u:s3cret@localhost:6379?bogus=1", "u:xxxxx@localhost"},
		{"nor in a bad port", "redis://u:s3cret@localhost:badport", "invalid port"},
		{"nor in a bad host", "redis://u:s3cret@[::1/0", "missing ']'"},
		{"nor on Cluster", "redis+cluster://u:s3cret@h:bad", "invalid port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := redis.Open(ctxT(t, time.Second), tt.url)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New(%q) err = %v, want it to mention %q", tt.url, err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error leaks the password: %v", err)
			}
		})
	}
}

// att is an attempt as the proxy records it, with every field set.
func att(outcome string) dedupe.Attempt {
	return dedupe.Attempt{At: time.Now(), By: dedupe.AttemptBySender, Outcome: outcome, Status: 200,
		Duration: 250 * time.Millisecond, Replica: "test"}
}

func claimReq(sender, key, hash, owner string, lease time.Duration) dedupe.ClaimRequest {
	return dedupe.ClaimRequest{Sender: sender, Key: key, PayloadHash: hash, Owner: owner, Lease: lease, TTL: time.Hour}
}

func mustClaim(t *testing.T, s dedupe.Store, r dedupe.ClaimRequest, want dedupe.Found) dedupe.ClaimResult {
	t.Helper()
	got, err := s.Claim(ctxT(t, 5*time.Second), r)
	if err != nil {
		t.Fatalf("Claim(%s/%s by %s): %v", r.Sender, r.Key, r.Owner, err)
	}
	if got.Found != want {
		t.Fatalf("Claim(%s/%s by %s) = %v, want %v", r.Sender, r.Key, r.Owner, got.Found, want)
	}
	return got
}

// TestStaleOwnerCannotOverwrite drives the interleaving of the issue with two
// stores (two proxies): A claims with a short lease, the lease runs out, B
// takes over, A finishes late and is refused, B's record stays, B completes
// and a replay answers B's response.
func TestStaleOwnerCannotOverwrite(t *testing.T) {
	srv := redistest.Shared(t)
	a, b := mustOpen(t, srv.URL()), mustOpen(t, srv.URL())
	sender, key := fmt.Sprintf("stale-%d", time.Now().UnixNano()), "evt_1"

	mustClaim(t, a, claimReq(sender, key, "h", "owner-A", 150*time.Millisecond), dedupe.Claimed)
	time.Sleep(400 * time.Millisecond) // A's lease runs out; A is "still at the site"
	tk := mustClaim(t, b, claimReq(sender, key, "h", "owner-B", time.Minute), dedupe.TakenOver)
	if tk.Record.Owner != "owner-B" || tk.Record.Takeovers != 1 {
		t.Fatalf("takeover record = owner %q takeovers %d", tk.Record.Owner, tk.Record.Takeovers)
	}

	ctx := ctxT(t, 5*time.Second)
	respA := dedupe.Response{Status: 200, Header: http.Header{"X-By": {"A"}}, Body: []byte("A")}
	respB := dedupe.Response{Status: 201, Header: http.Header{"X-By": {"B"}}, Body: []byte("B")}
	steps := []struct {
		name string
		err  error
	}{
		{"A Complete", a.Complete(ctx, sender, key, "owner-A", respA, att("processed"))},
		{"A Renew", a.Renew(ctx, sender, key, "owner-A", time.Minute)},
		{"A Hold", a.Hold(ctx, sender, key, "owner-A", att("ambiguous"))},
		{"A Release", a.Release(ctx, sender, key, "owner-A", att("released"))},
	}
	for _, st := range steps {
		if !errors.Is(st.err, dedupe.ErrNotOwner) {
			t.Errorf("%s after takeover: err = %v, want ErrNotOwner", st.name, st.err)
		}
	}
	rec, err := b.Get(ctx, sender, key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if rec.State != dedupe.StateProcessing || rec.Owner != "owner-B" || rec.Response != nil {
		t.Fatalf("after A's late writes the record is %+v, want B's processing claim", rec)
	}

	if err := b.Complete(ctx, sender, key, "owner-B", respB, att("processed")); err != nil {
		t.Fatalf("B Complete: %v", err)
	}
	if err := a.Complete(ctx, sender, key, "owner-A", respA, att("processed")); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("A Complete after B's: err = %v, want ErrNotOwner", err)
	}
	for _, s := range []dedupe.Store{a, b} {
		dup := mustClaim(t, s, claimReq(sender, key, "h", "owner-C", time.Minute), dedupe.Duplicate)
		got := dup.Record.Response
		if got == nil || got.Status != 201 || string(got.Body) != "B" || got.Header.Get("X-By") != "B" {
			t.Fatalf("replay = %+v, want B's 201 \"B\"", got)
		}
	}
}

// TestClaimRetryIsIdempotent: go-redis retries a command whose reply was lost;
// the scripts recognise their own owner, so a retried claim or completion is
// not mistaken for someone else's.
func TestClaimRetryIsIdempotent(t *testing.T) {
	s := mustOpen(t, redistest.Shared(t).URL())
	sender := fmt.Sprintf("retry-%d", time.Now().UnixNano())
	mustClaim(t, s, claimReq(sender, "k", "h", "o1", time.Minute), dedupe.Claimed)
	mustClaim(t, s, claimReq(sender, "k", "h", "o1", time.Minute), dedupe.Claimed)
	mustClaim(t, s, claimReq(sender, "k", "h", "o2", time.Minute), dedupe.InProgress)
	ctx := ctxT(t, 5*time.Second)
	for i := 0; i < 2; i++ {
		if err := s.Complete(ctx, sender, "k", "o1", dedupe.Response{Status: 200}, att("processed")); err != nil {
			t.Fatalf("Complete #%d: %v", i+1, err)
		}
	}
	if err := s.Complete(ctx, sender, "k", "o2", dedupe.Response{Status: 200}, att("processed")); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("Complete by another owner after done: err = %v, want ErrNotOwner", err)
	}
	// The retried completion was recognised, not applied twice.
	rec, err := s.Get(ctx, sender, "k")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if len(rec.Attempts) != 1 {
		t.Fatalf("attempts after a retried Complete = %+v, want 1", rec.Attempts)
	}
}

// TestReleasedRecord follows one event through a takeover, a release and a
// later claim with another payload and no stored request, on a single node
// and through a Cluster client (whose indexes are written outside the
// scripts): what the released record keeps, what the new claim replaces,
// that it keeps its ttl in Redis, and that it moves to the top of List.
func TestReleasedRecord(t *testing.T) {
	single := redistest.Shared(t)
	cluster := redistest.StartCluster(t)
	for _, tt := range []struct {
		name string
		srv  *redistest.Server
		url  string
	}{{"single", single, single.URL()}, {"cluster", cluster, cluster.ClusterURL()}} {
		t.Run(tt.name, func(t *testing.T) { testReleasedRecord(t, tt.srv, tt.url) })
	}
}

func testReleasedRecord(t *testing.T, srv *redistest.Server, url string) {
	s := mustOpen(t, url)
	ctx := ctxT(t, 10*time.Second)
	sender := fmt.Sprintf("released-%d", time.Now().UnixNano())

	first := claimReq(sender, "evt", "h1", "owner-A", 150*time.Millisecond)
	first.RequestBody = []byte(`{"id":"evt"}`)
	first.Request = &dedupe.StoredRequest{Method: "POST", URI: "/hook?x=1", Header: http.Header{"X-Sig": {"s"}}}
	mustClaim(t, s, first, dedupe.Claimed)
	time.Sleep(400 * time.Millisecond)
	taken := claimReq(sender, "evt", "h1", "owner-B", time.Minute)
	taken.RequestBody = []byte("ignored: a takeover keeps the claimed request")
	mustClaim(t, s, taken, dedupe.TakenOver)
	mustClaim(t, s, claimReq(sender, "mid", "h", "owner-M", time.Minute), dedupe.Claimed)

	// Fields an encoding could lose: a zero time, a duration with more
	// digits than Lua's cjson keeps in a number (14), a newline in a string
	// (attempts are kept one JSON object per line).
	odd := dedupe.Attempt{By: dedupe.AttemptByOperator, Outcome: "released", Status: 502,
		Duration: 30*time.Hour + 123456789*time.Nanosecond, Replica: "host\nname"}
	if err := s.Release(ctx, sender, "evt", "owner-B", odd); err != nil {
		t.Fatalf("Release: %v", err)
	}
	rel, err := s.Get(ctx, sender, "evt")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if rel.State != dedupe.StateReleased || rel.Owner != "" || !rel.LeaseUntil.IsZero() || rel.PayloadHash != "h1" ||
		rel.Takeovers != 1 || rel.Response != nil || string(rel.RequestBody) != `{"id":"evt"}` ||
		rel.Request == nil || rel.Request.URI != "/hook?x=1" || rel.Request.Header.Get("X-Sig") != "s" {
		t.Fatalf("released record = %+v", rel)
	}
	if len(rel.Attempts) != 1 || !rel.Attempts[0].At.IsZero() || rel.Attempts[0] != odd {
		t.Fatalf("attempts = %+v, want [%+v]", rel.Attempts, odd)
	}
	// The record keeps its ttl (an hour), not the lease nor no expiry.
	pttl := strings.TrimPrefix(srv.Do(t, "PTTL", "hookonce:{"+sender+":evt}"), ":")
	if ms, err := strconv.ParseInt(pttl, 10, 64); err != nil || ms <= 0 || ms > time.Hour.Milliseconds() ||
		time.Duration(ms)*time.Millisecond < time.Until(rel.ExpiresAt)-time.Minute {
		t.Fatalf("PTTL of the released record = %s, want about %v", pttl, time.Until(rel.ExpiresAt))
	}
	if got, err := s.List(ctx, dedupe.ListFilter{Sender: sender, State: dedupe.StateReleased}); err != nil || len(got) != 1 || got[0].Key != "evt" {
		t.Fatalf("List(released) = %v, %v", got, err)
	}

	time.Sleep(5 * time.Millisecond)
	again := claimReq(sender, "evt", "h2", "owner-C", time.Minute)
	res := mustClaim(t, s, again, dedupe.Claimed)
	// A retried claim (lost reply) finds its own owner; nothing changes.
	if retry := mustClaim(t, s, again, dedupe.Claimed); fmt.Sprint(retry.Record) != fmt.Sprint(res.Record) {
		t.Fatalf("retried claim changed the record:\n%+v\n%+v", retry.Record, res.Record)
	}
	rec := res.Record
	if rec.State != dedupe.StateProcessing || rec.Owner != "owner-C" || rec.PayloadHash != "h2" ||
		rec.Request != nil || rec.RequestBody != nil || rec.Takeovers != 1 || len(rec.Attempts) != 1 {
		t.Fatalf("re-claimed record = %+v", rec)
	}
	if !rec.ReceivedAt.After(rel.ReceivedAt) || !rec.ExpiresAt.After(rel.ExpiresAt) {
		t.Fatalf("re-claim kept the old times: received %v→%v, expires %v→%v", rel.ReceivedAt, rec.ReceivedAt, rel.ExpiresAt, rec.ExpiresAt)
	}
	all, err := s.List(ctx, dedupe.ListFilter{Sender: sender})
	if err != nil || len(all) != 2 || all[0].Key != "evt" || all[1].Key != "mid" {
		t.Fatalf("List after the re-claim = %v, %v; want evt (received again) before mid", all, err)
	}
	// The first owner's release is spent: B cannot release or complete it.
	if err := s.Release(ctx, sender, "evt", "owner-B", att("released")); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("Release by the previous owner = %v, want ErrNotOwner", err)
	}
	if err := s.Complete(ctx, sender, "evt", "owner-C", dedupe.Response{Status: 200}, att("processed")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	done, err := s.Get(ctx, sender, "evt")
	if err != nil || len(done.Attempts) != 2 || done.Attempts[0] != odd || done.LastAttempt().Outcome != "processed" {
		t.Fatalf("done record attempts = %+v, %v", done.Attempts, err)
	}
}

// TestPurgeReleased: a released record past its ttl goes like any other.
func TestPurgeReleased(t *testing.T) {
	srv := redistest.Start(t) // alone: Purge is store-wide
	s := mustOpen(t, srv.URL())
	ctx := ctxT(t, 10*time.Second)
	r := claimReq("purge", "rel", "h", "o", time.Minute)
	r.TTL = 100 * time.Millisecond
	mustClaim(t, s, r, dedupe.Claimed)
	if err := s.Release(ctx, "purge", "rel", "o", att("released")); err != nil {
		t.Fatalf("Release: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	if n, err := s.Purge(ctx, dedupe.PurgeRequest{}); err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v; want the released record", n, err)
	}
	if _, err := s.Get(ctx, "purge", "rel"); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("Get after purge: %v", err)
	}
}

// TestOutage: a stopped or frozen Redis answers ErrUnavailable within the
// caller's deadline; once it is back, the same Store works again.
func TestOutage(t *testing.T) {
	srv := redistest.Start(t)
	s := mustOpen(t, srv.URL())
	sender := fmt.Sprintf("outage-%d", time.Now().UnixNano())
	mustClaim(t, s, claimReq(sender, "before", "h", "o", time.Minute), dedupe.Claimed)

	down := []struct {
		name      string
		stop, fix func(testing.TB)
	}{
		{"stopped", srv.Stop, srv.Start},
		{"frozen", srv.Pause, srv.Resume},
	}
	for _, d := range down {
		t.Run(d.name, func(t *testing.T) {
			d.stop(t)
			ops := map[string]func(ctx context.Context) error{
				"Claim": func(ctx context.Context) error {
					_, err := s.Claim(ctx, claimReq(sender, "during", "h", "o", time.Minute))
					return err
				},
				"Complete": func(ctx context.Context) error {
					return s.Complete(ctx, sender, "before", "o", dedupe.Response{Status: 200}, att("processed"))
				},
				"Get": func(ctx context.Context) error {
					_, err := s.Get(ctx, sender, "before")
					return err
				},
				"Ping":  s.Ping,
				"Probe": s.Probe,
			}
			for op, fn := range ops {
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				err := fn(ctx)
				cancel()
				if !errors.Is(err, dedupe.ErrUnavailable) {
					t.Errorf("%s with Redis %s: err = %v, want ErrUnavailable", op, d.name, err)
				}
			}
			d.fix(t)
			// The same Store recovers without a restart (pooled connections
			// to the dead server are dropped and redialled).
			var err error
			for i := 0; i < 50; i++ {
				if _, err = s.Claim(ctxT(t, time.Second), claimReq(sender, "after-"+d.name, "h", "o2", time.Minute)); err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("Claim after Redis came back: %v", err)
			}
			mustClaim(t, s, claimReq(sender, "after-"+d.name, "h", "o3", time.Minute), dedupe.InProgress)
		})
	}
}

func numSub(t *testing.T, srv *redistest.Server, channel string) string {
	t.Helper()
	// PUBSUB NUMSUB answers *2 / $len / channel / :n; read the count with a
	// second round trip through a tiny script to keep the harness inline.
	return srv.Do(t, "EVAL", fmt.Sprintf("\"return redis.call('PUBSUB','NUMSUB','%s')[2]\"", channel), "0")
}

func waitNumSub(t *testing.T, srv *redistest.Server, channel, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := numSub(t, srv, channel)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("PUBSUB NUMSUB %s = %s, want %s", channel, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWaitChangeWakesOnComplete: waiters on one Store share one subscription;
// another Store's Complete wakes them all.
func TestWaitChangeWakesOnComplete(t *testing.T) {
	srv := redistest.Shared(t)
	holder, waiter := mustOpen(t, srv.URL()), mustOpen(t, srv.URL())
	sender := fmt.Sprintf("wait-%d", time.Now().UnixNano())
	channel := "hookonce:n:{" + sender + ":evt}"
	mustClaim(t, holder, claimReq(sender, "evt", "h", "o", time.Minute), dedupe.Claimed)

	const n = 5
	var wg sync.WaitGroup
	errs := make(chan error, n)
	ctx := ctxT(t, 30*time.Second)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- waiter.WaitChange(ctx, sender, "evt")
		}()
	}
	waitNumSub(t, srv, channel, ":1") // five waiters, one subscription
	if err := holder.Complete(ctx, sender, "evt", "o", dedupe.Response{Status: 200}, att("processed")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("WaitChange: %v", err)
		}
	}
	waitNumSub(t, srv, channel, ":0") // the last waiter unsubscribed
}

func TestWaitChange(t *testing.T) {
	srv := redistest.Shared(t)
	s := mustOpen(t, srv.URL())
	sender := fmt.Sprintf("waitcases-%d", time.Now().UnixNano())
	mustClaim(t, s, claimReq(sender, "held", "h", "o", time.Minute), dedupe.Claimed)
	mustClaim(t, s, claimReq(sender, "done", "h", "o", time.Minute), dedupe.Claimed)
	if err := s.Complete(ctxT(t, 5*time.Second), sender, "done", "o", dedupe.Response{Status: 200}, att("processed")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	tests := []struct {
		name    string
		key     string
		timeout time.Duration
		want    error
	}{
		{"already done returns at once", "done", 10 * time.Second, nil},
		{"no record returns at once", "missing", 10 * time.Second, nil},
		{"held claim waits until ctx ends", "held", 300 * time.Millisecond, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.WaitChange(ctxT(t, tt.timeout), sender, tt.key)
			if !errors.Is(err, tt.want) && err != tt.want {
				t.Fatalf("WaitChange(%s) = %v, want %v", tt.key, err, tt.want)
			}
		})
	}
	// Forget and Release announce too.
	for _, op := range []string{"forget", "release"} {
		t.Run("wakes on "+op, func(t *testing.T) {
			key := "k-" + op
			mustClaim(t, s, claimReq(sender, key, "h", "o", time.Minute), dedupe.Claimed)
			done := make(chan error, 1)
			go func() { done <- s.WaitChange(ctxT(t, 30*time.Second), sender, key) }()
			waitNumSub(t, srv, "hookonce:n:{"+sender+":"+key+"}", ":1")
			ctx := ctxT(t, 5*time.Second)
			var err error
			if op == "forget" {
				err = s.Forget(ctx, sender, key)
			} else {
				err = s.Release(ctx, sender, key, "o", att("released"))
			}
			if err != nil {
				t.Fatalf("%s: %v", op, err)
			}
			if err := <-done; err != nil {
				t.Fatalf("WaitChange: %v", err)
			}
		})
	}
}

// TestClaimAcrossRedisCrash shows what docs/stores.md says about persistence: a
// claim acknowledged just before the Redis process is killed survives the
// restart with the append-only file on (Redis write()s it before replying, so
// a process crash loses nothing with everysec or always; only a host crash
// loses up to a second under everysec), and is lost without persistence, so
// the sender's retry would run the handler a second time.
func TestClaimAcrossRedisCrash(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want dedupe.Found
	}{
		{"appendfsync always", []string{"--appendonly", "yes", "--appendfsync", "always"}, dedupe.InProgress},
		{"appendfsync everysec", []string{"--appendonly", "yes", "--appendfsync", "everysec"}, dedupe.InProgress},
		{"no persistence", nil, dedupe.Claimed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t, tt.args...)
			s := mustOpen(t, srv.URL())
			mustClaim(t, s, claimReq("crash", "evt", "h", "first", time.Minute), dedupe.Claimed)
			srv.Stop(t) // SIGKILL right after the acknowledgement
			srv.Start(t)
			var got dedupe.ClaimResult
			var err error
			for i := 0; i < 50; i++ {
				if got, err = s.Claim(ctxT(t, time.Second), claimReq("crash", "evt", "h", "retry", time.Minute)); err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("Claim after restart: %v", err)
			}
			if got.Found != tt.want {
				t.Fatalf("retry after the crash = %v, want %v", got.Found, tt.want)
			}
		})
	}
}

// TestWaitChangeAfterRestart: the shared subscription comes back by itself
// after Redis restarts; waiters on the same Store are woken again.
func TestWaitChangeAfterRestart(t *testing.T) {
	srv := redistest.Start(t)
	s := mustOpen(t, srv.URL())
	other := mustOpen(t, srv.URL())
	wakeOnce := func(t *testing.T, key string) {
		t.Helper()
		mustClaimEventually(t, other, claimReq("restart", key, "h", "o", time.Minute))
		done := make(chan error, 1)
		go func() { done <- s.WaitChange(ctxT(t, 30*time.Second), "restart", key) }()
		waitNumSub(t, srv, "hookonce:n:{restart:"+key+"}", ":1")
		if err := other.Complete(ctxT(t, 5*time.Second), "restart", key, "o", dedupe.Response{Status: 200}, att("processed")); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatalf("WaitChange(%s): %v", key, err)
		}
	}
	wakeOnce(t, "before")
	srv.Stop(t)
	srv.Start(t)
	wakeOnce(t, "after")
}

func mustClaimEventually(t *testing.T, s dedupe.Store, r dedupe.ClaimRequest) {
	t.Helper()
	var err error
	for i := 0; i < 50; i++ {
		var res dedupe.ClaimResult
		if res, err = s.Claim(ctxT(t, time.Second), r); err == nil {
			if res.Found != dedupe.Claimed {
				t.Fatalf("Claim(%s/%s) = %v, want claimed", r.Sender, r.Key, res.Found)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("Claim(%s/%s): %v", r.Sender, r.Key, err)
}

// TestConformanceCluster runs the suite through a Cluster client on a
// one-node cluster: every script touches one slot ({sender:key}), the
// indexes are kept outside the scripts, and Cluster's CROSSSLOT check would
// refuse anything else.
func TestConformanceCluster(t *testing.T) {
	srv := redistest.StartCluster(t)
	dedupetest.RunConformance(t, func(t *testing.T) dedupe.Store { return mustOpen(t, srv.ClusterURL()) })
	t.Run("Objects", func(t *testing.T) {
		dedupetest.RunObjectConformance(t, func(t *testing.T) dedupe.Store { return mustOpen(t, srv.ClusterURL()) })
	})
	t.Run("Pending", func(t *testing.T) {
		dedupetest.RunPendingConformance(t, func(t *testing.T) dedupe.Store { return mustOpen(t, srv.ClusterURL()) })
	})
	t.Run("WaitChange", func(t *testing.T) {
		holder, waiter := mustOpen(t, srv.ClusterURL()), mustOpen(t, srv.ClusterURL())
		mustClaim(t, holder, claimReq("cl", "evt", "h", "o", time.Minute), dedupe.Claimed)
		done := make(chan error, 1)
		go func() { done <- waiter.WaitChange(ctxT(t, 30*time.Second), "cl", "evt") }()
		waitNumSub(t, srv, "hookonce:n:{cl:evt}", ":1")
		if err := holder.Complete(ctxT(t, 5*time.Second), "cl", "evt", "o", dedupe.Response{Status: 200}, att("processed")); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatalf("WaitChange: %v", err)
		}
	})
}

// TestPurgePagesPastLiveLeases: more expired records than one page, behind
// live leases that must stay, are removed in bounded batches and counted.
func TestPurgePagesPastLiveLeases(t *testing.T) {
	srv := redistest.Start(t) // alone: Purge is store-wide
	s := mustOpen(t, srv.URL())
	ctx := ctxT(t, 30*time.Second)
	short := func(key string, lease time.Duration) dedupe.ClaimRequest {
		return dedupe.ClaimRequest{Sender: "purge", Key: key, PayloadHash: "h", Owner: "o-" + key, Lease: lease, TTL: 50 * time.Millisecond}
	}
	for i := 0; i < 3; i++ { // past ttl, lease alive: first in the expiry index
		mustClaim(t, s, short(fmt.Sprintf("live-%d", i), time.Minute), dedupe.Claimed)
	}
	const expired = 450
	for i := 0; i < expired; i++ {
		key := fmt.Sprintf("old-%d", i)
		mustClaim(t, s, short(key, 10*time.Millisecond), dedupe.Claimed)
		if i%2 == 0 { // half done, half dead claims
			if err := s.Complete(ctx, "purge", key, "o-"+key, dedupe.Response{Status: 200}, att("processed")); err != nil {
				t.Fatalf("Complete: %v", err)
			}
		}
	}
	time.Sleep(200 * time.Millisecond)
	steps := []struct {
		limit, want int
	}{{300, 300}, {0, expired - 300}, {0, 0}}
	for _, st := range steps {
		n, err := s.Purge(ctx, dedupe.PurgeRequest{Limit: st.limit})
		if err != nil {
			t.Fatalf("Purge(limit %d): %v", st.limit, err)
		}
		if n != st.want {
			t.Fatalf("Purge(limit %d) = %d, want %d", st.limit, n, st.want)
		}
	}
	recs, err := s.List(ctx, dedupe.ListFilter{Sender: "purge"})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(recs) != 3 {
		t.Fatalf("after purge List = %d records, want the 3 live leases", len(recs))
	}
	// --older-than never takes a live lease either.
	if n, err := s.Purge(ctx, dedupe.PurgeRequest{ReceivedBefore: time.Now().Add(time.Hour)}); err != nil || n != 0 {
		t.Fatalf("Purge(older-than) = %d, %v; want 0 (only live leases left)", n, err)
	}
}

// OpenReadOnly reads what a writable store wrote and refuses writes; on an
// empty server, opening and reading leave it empty.
func TestOpenReadOnly(t *testing.T) {
	srv := redistest.Shared(t)
	dedupetest.RunReadOnly(t, mustOpen(t, srv.URL()), func(t *testing.T) dedupe.Store {
		s, err := redis.OpenReadOnly(ctxT(t, 5*time.Second), srv.URL())
		if err != nil {
			t.Fatalf("OpenReadOnly: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})

	t.Run("writes no key", func(t *testing.T) {
		empty := redistest.Start(t)
		s, err := redis.OpenReadOnly(ctxT(t, 5*time.Second), empty.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.List(ctxT(t, 5*time.Second), dedupe.ListFilter{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Conflicts(ctxT(t, 5*time.Second), dedupe.ListFilter{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctxT(t, 5*time.Second), "shop", "k"); !errors.Is(err, dedupe.ErrNotFound) {
			t.Fatal(err)
		}
		if got := empty.Do(t, "DBSIZE"); got != ":0" {
			t.Fatalf("DBSIZE after read-only use = %s, want :0", got)
		}
	})
}

// A Redis that refuses writes but answers reads and PING fails the probe,
// as it would fail claims, and passes it again once it takes writes.
func TestProbeFailsWhenRedisRefusesWrites(t *testing.T) {
	srv := redistest.Start(t)
	s := mustOpen(t, srv.URL())
	refusals := []struct {
		name      string
		set, undo []string
		want      string
	}{
		{"min-replicas-to-write unmet", []string{"CONFIG", "SET", "min-replicas-to-write", "1"},
			[]string{"CONFIG", "SET", "min-replicas-to-write", "0"}, "NOREPLICAS"},
		{"maxmemory reached under noeviction", []string{"CONFIG", "SET", "maxmemory", "1"},
			[]string{"CONFIG", "SET", "maxmemory", "0"}, "OOM"},
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			if err := s.Probe(ctxT(t, 5*time.Second)); err != nil {
				t.Fatalf("Probe before: %v", err)
			}
			if got := srv.Do(t, r.set...); got != "+OK" {
				t.Fatalf("%v = %q", r.set, got)
			}
			err := s.Probe(ctxT(t, 5*time.Second))
			if !errors.Is(err, dedupe.ErrUnavailable) || !strings.Contains(err.Error(), r.want) {
				t.Errorf("Probe: %v, want ErrUnavailable naming %s", err, r.want)
			}
			if _, cerr := s.Claim(ctxT(t, 5*time.Second), claimReq("probe-test", r.name, "h", "o", time.Minute)); cerr == nil {
				t.Errorf("a claim succeeded where the probe failed")
			}
			if err := s.Ping(ctxT(t, 5*time.Second)); err != nil {
				t.Errorf("Ping: %v", err)
			}
			if got := srv.Do(t, r.undo...); got != "+OK" {
				t.Fatalf("%v = %q", r.undo, got)
			}
			if err := s.Probe(ctxT(t, 5*time.Second)); err != nil {
				t.Fatalf("Probe after %v: %v", r.undo, err)
			}
		})
	}
}

// A conflict written by the release before conflicts kept their payload
// (a stream entry with only the key, hashes, times and changed paths)
// reads back with an id and no payload, so accepting it is refused as not
// kept; Redis has no schema to migrate.
func TestConflictWrittenBeforePayloads(t *testing.T) {
	srv := redistest.Start(t)
	s := mustOpen(t, srv.URL())
	ms := strconv.FormatInt(time.Now().UnixMilli(), 10)
	exp := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	if r := srv.Do(t, "XADD", "hookonce:conflicts:{shop}", "*", "k", "evt", "sh", "h1", "rh", "h2", "ra", ms, "ea", exp, "cp", `""`); strings.HasPrefix(r, "-") {
		t.Fatalf("XADD: %s", r)
	}
	srv.Do(t, "SADD", "hookonce:senders", "shop")
	cs, err := s.Conflicts(ctxT(t, 5*time.Second), dedupe.ListFilter{Sender: "shop"})
	if err != nil || len(cs) != 1 || cs[0].ID == "" || cs[0].Request != nil || cs[0].Body != nil || cs[0].ReceivedHash != "h2" || cs[0].DiffKind != "" {
		t.Fatalf("old conflict = %+v, %v", cs, err)
	}
	if _, err := s.AcceptConflict(ctxT(t, 5*time.Second), "shop", "evt", "", "op"); !errors.Is(err, dedupe.ErrNotAcceptable) {
		t.Fatalf("accept of an old conflict: %v, want ErrNotAcceptable", err)
	}
}

func TestPendingConformance(t *testing.T) {
	srv := redistest.Shared(t)
	dedupetest.RunPendingConformance(t, func(t *testing.T) dedupe.Store { return mustOpen(t, srv.URL()) })
}
