package redis_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/dedupetest"
	"github.com/hookonce/hookonce/dedupe/redis"
	"github.com/hookonce/hookonce/internal/testkit/faultproxy"
	"github.com/hookonce/hookonce/internal/testkit/redistest"
)

func TestWaitReplicasURL(t *testing.T) {
	srv := redistest.Shared(t)
	for _, tt := range []struct {
		query string
		want  int
	}{
		{"", 0},
		{"?wait_replicas=0", 0},
		{"?wait_replicas=2", 2},
		{"?wait_replicas=1&wait_replicas_timeout=250ms&pool_size=3", 1},
		{"?pool_size=3&wait_replicas=1", 1},
		{"?wait_replicas=1&wait_replicas_timeout=5s&read_timeout=10s", 1},
	} {
		s := mustOpen(t, srv.URL()+tt.query)
		if got := s.WaitReplicas(); got != tt.want {
			t.Errorf("%q: WaitReplicas() = %d, want %d", tt.query, got, tt.want)
		}
	}
	for _, tt := range []struct{ url, want string }{
		{"redis://u:s3cret@" + srv.Addr + "?wait_replicas=x", "wait_replicas"},
		{"redis://u:s3cret@" + srv.Addr + "?wait_replicas=-1", "wait_replicas"},
		{"redis://u:s3cret@" + srv.Addr + "?wait_replicas=1&wait_replicas_timeout=5", "wait_replicas_timeout"},
		{"redis://u:s3cret@" + srv.Addr + "?wait_replicas=1&wait_replicas_timeout=0s", "wait_replicas_timeout"},
		{"redis://u:s3cret@" + srv.Addr + "?wait_replicas_timeout=1s", "needs wait_replicas"},
		{"redis://u:s3cret@" + srv.Addr + "?wait_replicas=1&wait_replicas_timeout=5s", "read_timeout"},
		{"redis+cluster://u:s3cret@" + srv.Addr + "?wait_replicas=1&wait_replicas_timeout=5s", "read_timeout"},
		{"redis://u:s3cret@" + srv.Addr + "?wait_replicas=1&bogus=1", "bogus"},
		{"redis+sentinel://u:s3cret@" + srv.Addr + "?master_name=m&wait_replicas=x", "wait_replicas"},
	} {
		_, err := redis.Open(ctxT(t, time.Second), tt.url)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%q) err = %v, want it to mention %q", dedupe.RedactDSN(tt.url), err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error leaks the password: %v", err)
		}
	}
}

// The conformance suite with every claim and completion waiting for a
// real replica.
func TestConformanceWaitReplicas(t *testing.T) {
	primary, _ := redistest.StartPrimaryWithReplica(t)
	url := primary.URL() + "?wait_replicas=1&wait_replicas_timeout=2s"
	dedupetest.RunConformance(t, func(t *testing.T) dedupe.Store { return mustOpen(t, url) })
}

// Through a Cluster client the WAIT goes to the primary owning the
// record's slot: with no replica it fails closed; with one the
// conformance suite passes.
func TestWaitReplicasCluster(t *testing.T) {
	srv := redistest.StartCluster(t)
	url := srv.ClusterURL() + "?wait_replicas=1&wait_replicas_timeout=100ms"
	s := mustOpen(t, url)
	sender := fmt.Sprintf("cluster-wait-%d", time.Now().UnixNano())
	_, err := s.Claim(ctxT(t, 5*time.Second), claimReq(sender, "k", "h", "A", time.Minute))
	if !errors.Is(err, dedupe.ErrNotConfirmed) || !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("claim with no replica on Cluster: err = %v, want ErrNotConfirmed and ErrUnavailable", err)
	}
	redistest.StartClusterReplica(t, srv)
	// With the replica, as long a wait as TestConformanceWaitReplicas': a
	// loaded machine's replica may take over 100ms to acknowledge.
	synced := srv.ClusterURL() + "?wait_replicas=1&wait_replicas_timeout=2s"
	dedupetest.RunConformance(t, func(t *testing.T) dedupe.Store { return mustOpen(t, synced) })
	t.Run("Pending", func(t *testing.T) {
		dedupetest.RunPendingConformance(t, func(t *testing.T) dedupe.Store { return mustOpen(t, synced) })
	})
}

// A stalled replication link: a claim is refused as not confirmed and
// given back (the retry claims it at once); a completion is refused as not
// confirmed and confirmed by its retry once the replica has it.
func TestWaitReplicasFailsClosed(t *testing.T) {
	primary, link := redistest.StartPrimaryWithReplica(t)
	// Long enough for a replica on a loaded machine, and paid
	// only by the writes a stalled link leaves unconfirmed.
	s := mustOpen(t, primary.URL()+"?wait_replicas=1&wait_replicas_timeout=500ms")
	sender := fmt.Sprintf("failsclosed-%d", time.Now().UnixNano())
	ctx := ctxT(t, 30*time.Second)

	link.Stall()
	_, err := s.Claim(ctx, claimReq(sender, "k1", "h", "A", time.Minute))
	if !errors.Is(err, dedupe.ErrNotConfirmed) || !errors.Is(err, dedupe.ErrUnavailable) {
		t.Fatalf("claim over a stalled link: err = %v, want ErrNotConfirmed and ErrUnavailable", err)
	}
	rec, err := s.Get(ctx, sender, "k1")
	if err != nil || rec.State != dedupe.StateReleased {
		t.Fatalf("unconfirmed claim afterwards: state %q err %v, want released", rec.State, err)
	}
	link.Resume()
	// Retried while the replica catches up, as a sender would: an
	// unconfirmed claim is given back, so the next try claims again.
	for try := 1; ; try++ {
		_, err := s.Claim(ctx, claimReq(sender, "k1", "h", "B", time.Minute))
		if err == nil {
			break
		}
		if !errors.Is(err, dedupe.ErrNotConfirmed) || try == 30 {
			t.Fatalf("claim %d once the link is back: %v\n%s", try, err, primary.Info(t, "replication"))
		}
		time.Sleep(100 * time.Millisecond)
	}

	link.Stall()
	resp := dedupe.Response{Status: 200, Header: http.Header{}, Body: []byte("ok")}
	err = s.Complete(ctx, sender, "k1", "B", resp, att("processed"))
	if !errors.Is(err, dedupe.ErrNotConfirmed) {
		t.Fatalf("complete over a stalled link: err = %v, want ErrNotConfirmed", err)
	}
	if err := s.Hold(ctx, sender, "k1", "B", att("ambiguous")); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("hold after the (unconfirmed) completion: err = %v, want ErrNotOwner", err)
	}
	link.Resume()
	// The proxy retries a completion: the retry writes again and waits
	// again, and now the replica confirms both.
	for try := 1; ; try++ {
		err := s.Complete(ctx, sender, "k1", "B", resp, att("processed"))
		if err == nil {
			break
		}
		if !errors.Is(err, dedupe.ErrNotConfirmed) || try == 30 {
			t.Fatalf("retried complete %d once the link is back: %v", try, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	mustClaim(t, s, claimReq(sender, "k1", "h", "C", time.Minute), dedupe.Duplicate)

	// Renewals wait too: the proxy must not count on a lease a failover
	// may lose.
	mustClaim(t, s, claimReq(sender, "k2", "h", "D", time.Minute), dedupe.Claimed)
	link.Stall()
	if err := s.Renew(ctx, sender, "k2", "D", time.Minute); !errors.Is(err, dedupe.ErrNotConfirmed) {
		t.Fatalf("renew over a stalled link: err = %v, want ErrNotConfirmed", err)
	}
	// Duplicates and in-progress answers wrote nothing to wait for.
	mustClaim(t, s, claimReq(sender, "k1", "h", "E", time.Minute), dedupe.Duplicate)
	mustClaim(t, s, claimReq(sender, "k2", "h", "F", time.Minute), dedupe.InProgress)
	// A release is never waited for.
	if err := s.Release(ctx, sender, "k2", "D", att("not_success")); err != nil {
		t.Fatalf("release over a stalled link: %v", err)
	}
	link.Resume()
}

// A claim whose reply is lost (the connection cut right after the request
// went through) may have been applied: with wait_replicas the store gives
// it back by its owner token, so the sender's retry is claimed at once
// rather than after the lease.
func TestWaitReplicasLostClaimReplyIsGivenBack(t *testing.T) {
	primary, _ := redistest.StartPrimaryWithReplica(t)
	fp, err := faultproxy.Start(primary.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fp.Close() })
	// max_retries=-1: go-redis would otherwise resend the claim on a new
	// connection, and the retry (same owner) would answer it.
	s := mustOpen(t, "redis://"+fp.Addr()+"/0?max_retries=-1&wait_replicas=1&wait_replicas_timeout=2s")
	sender := fmt.Sprintf("lostreply-%d", time.Now().UnixNano())
	ctx := ctxT(t, 10*time.Second)
	// A first claim loads the script and leaves a connection in the pool,
	// so the cut strikes the next claim, not a new connection's handshake.
	mustClaim(t, s, claimReq(sender, "warm", "h", "A", time.Minute), dedupe.Claimed)
	fp.CutAfterNextRequests(1)
	_, err = s.Claim(ctx, claimReq(sender, "k", "h", "A", time.Minute))
	if err == nil || !errors.Is(err, dedupe.ErrUnavailable) {
		acc, cut := fp.Stats()
		t.Fatalf("claim whose reply was cut: err = %v, want ErrUnavailable (accepted %d cut %d armed %d)", err, acc, cut, fp.Armed())
	}
	rec, err := s.Get(ctx, sender, "k")
	if err != nil || rec.State != dedupe.StateReleased {
		t.Fatalf("claim whose reply was cut, afterwards: state %q err %v, want released", rec.State, err)
	}
	mustClaim(t, s, claimReq(sender, "k", "h", "B", time.Minute), dedupe.Claimed)
}
