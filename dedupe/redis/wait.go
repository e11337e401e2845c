package redis

// The durability option: WAIT for replicas after the writes a failover
// must not lose (issue #36).
//
// Redis replicates asynchronously: a claim the primary acknowledged may
// not have reached any replica when the primary dies, and the replica
// Sentinel (or Cluster) promotes has never seen it; the sender's retry
// then finds no record and the site's handler runs a second time. With
// wait_replicas=N in the store URL, every claim, completion, hold and
// renewal runs WAIT N timeout on the same connection right after its
// script, and a write fewer than N replicas acknowledged is not reported
// as done:
//
//   - a claim (claimed or taken over) is an error wrapping
//     dedupe.ErrUnavailable and dedupe.ErrNotConfirmed: the proxy answers
//     503 with Retry-After and does not forward. The store then releases
//     the unconfirmed claim (best effort, without waiting: a release lost
//     in a failover only brings back the claim, which frees itself at its
//     lease), so the sender's retry is claimed at once; so it does when the
//     reply never came (the claim may have been applied all the same);
//   - a completion, hold or renewal is such an error too: the proxy
//     retries a completion while its lease is surely its own (each retry
//     runs the script again, which writes again, and WAITs again), and past
//     that reports the answer as not stored, never re-reading the
//     unconfirmed record as proof.
//
// Release is not waited for: losing one only delays the retry to the
// claim's lease. Outcomes that wrote nothing to wait for (duplicate,
// conflict, in progress, held) are answered as they are.
//
// WAIT counts the replicas that acknowledged the connection's latest
// write; it is not a consensus: a replica that acknowledged may still not
// be the one promoted (with 2 replicas and N=1), and a primary cut off
// from its replicas keeps applying writes (it refuses them only with
// min-replicas-to-write). docs/stores.md has the details and the
// server-side recipe.

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hookonce/hookonce/dedupe"
)

// URL query parameters of the durability option; go-redis does not know
// them, so they are taken out of the URL before it is parsed.
const (
	paramWaitReplicas = "wait_replicas"
	paramWaitTimeout  = "wait_replicas_timeout"
	// DefaultWaitTimeout is how long a write waits for its replicas when
	// the URL sets wait_replicas and no wait_replicas_timeout; always at
	// most three quarters of what is left of the call's store_timeout.
	DefaultWaitTimeout = 500 * time.Millisecond
)

// waitOptions is the durability option as the URL set it; replicas 0: off.
type waitOptions struct {
	replicas int
	timeout  time.Duration
}

// splitWait takes the durability parameters out of a redis URL (without
// its scheme), returning the rest for go-redis.
func splitWait(rest string) (string, waitOptions, error) {
	base, query, ok := strings.Cut(rest, "?")
	if !ok {
		return rest, waitOptions{}, nil
	}
	q, err := neturl.ParseQuery(query)
	if err != nil {
		return rest, waitOptions{}, nil // go-redis reports it, redacted
	}
	var w waitOptions
	if v, ok := q[paramWaitReplicas]; ok {
		n, err := strconv.Atoi(v[len(v)-1])
		if err != nil || n < 0 {
			return "", w, fmt.Errorf("%s=%q: want a number of replicas (0: do not wait)", paramWaitReplicas, v[len(v)-1])
		}
		w.replicas = n
		q.Del(paramWaitReplicas)
	}
	if v, ok := q[paramWaitTimeout]; ok {
		d, err := time.ParseDuration(v[len(v)-1])
		if err != nil || d <= 0 {
			return "", w, fmt.Errorf("%s=%q: want a positive duration such as 500ms", paramWaitTimeout, v[len(v)-1])
		}
		if w.replicas == 0 {
			return "", w, fmt.Errorf("%s needs %s", paramWaitTimeout, paramWaitReplicas)
		}
		w.timeout = d
		q.Del(paramWaitTimeout)
	}
	if w.replicas > 0 && w.timeout == 0 {
		w.timeout = DefaultWaitTimeout
	}
	if len(q) == 0 {
		return base, w, nil
	}
	return base + "?" + q.Encode(), w, nil
}

// fits checks the wait against the client's read timeout, which bounds
// the WAIT's reply as it bounds every reply: a longer wait would end as a
// read timeout, never as an answer.
func (w waitOptions) fits(client goredis.UniversalClient) error {
	if w.replicas == 0 {
		return nil
	}
	var rt time.Duration
	switch c := client.(type) {
	case *goredis.Client:
		rt = c.Options().ReadTimeout
	case *goredis.ClusterClient:
		rt = c.Options().ReadTimeout
	}
	if rt > 0 && w.timeout >= rt {
		return fmt.Errorf("%s=%v must be shorter than read_timeout (%v)", paramWaitTimeout, w.timeout, rt)
	}
	return nil
}

// WaitReplicas is the number of replicas every claim and completion waits
// for (the URL's wait_replicas; 0: none).
func (s *Store) WaitReplicas() int { return s.wait.replicas }

// run runs sc on keys (keys[0] is the record). With the durability option
// it sends WAIT right after the script on the same connection (one
// pipeline; on Cluster to the primary owning the record's slot) and
// confirmed reports whether enough replicas acknowledged: nil when they
// did (or nothing is waited for), else why not. err is the script's own
// error (or the connection's).
func (s *Store) run(ctx context.Context, sc *goredis.Script, keys []string, args ...any) (res *goredis.Cmd, confirmed, err error) {
	if s.wait.replicas == 0 {
		res = sc.Run(ctx, s.client, keys, args...)
		return res, nil, res.Err()
	}
	pipelined := s.client.Pipelined
	if c, ok := s.client.(*goredis.ClusterClient); ok {
		node, err := c.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, nil, err
		}
		pipelined = node.Pipelined
	}
	timeout := s.wait.timeout
	if dl, ok := ctx.Deadline(); ok {
		// Leave the reply time to arrive before the call's own deadline.
		timeout = min(timeout, time.Until(dl)*3/4)
	}
	timeout = max(timeout, time.Millisecond) // WAIT 0 would block for ever
	var wait *goredis.Cmd
	for _, load := range []bool{false, true} {
		_, _ = pipelined(ctx, func(p goredis.Pipeliner) error {
			if load {
				res = sc.Eval(ctx, p, keys, args...)
			} else {
				res = sc.EvalSha(ctx, p, keys, args...)
			}
			wait = p.Do(ctx, "wait", s.wait.replicas, timeout.Milliseconds())
			return nil
		})
		if !load && res.Err() != nil && strings.HasPrefix(res.Err().Error(), "NOSCRIPT") {
			continue // not cached on this server (new, restarted, promoted): send it whole
		}
		break
	}
	if err := res.Err(); err != nil {
		return res, nil, err
	}
	n, werr := wait.Int64()
	switch {
	case werr != nil:
		return res, fmt.Errorf("WAIT %d: %w", s.wait.replicas, werr), nil
	case n < int64(s.wait.replicas):
		return res, fmt.Errorf("%d of %d replicas acknowledged within %v", n, s.wait.replicas, timeout), nil
	}
	return res, nil, nil
}

// isScriptError tells an error the server answered (READONLY, LOADING,
// NOREPLICAS, a failed script: nothing was written) from a lost or late
// reply.
func isScriptError(err error) bool {
	var re goredis.Error
	return errors.As(err, &re)
}

// notConfirmed is the error of a write whose replicas did not confirm it.
func notConfirmed(op string, why error) error {
	return fmt.Errorf("redis %s: %w: %w (%w)", op, dedupe.ErrUnavailable, dedupe.ErrNotConfirmed, why)
}

// releaseUnconfirmed gives back a claim whose replicas did not confirm
// it, so the sender's retry (answered 503 now) is claimed at once rather
// than after the lease. Best effort and not waited for: if the release is
// lost, the claim frees itself at its lease.
func (s *Store) releaseUnconfirmed(ctx context.Context, sender, key, owner string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 500*time.Millisecond)
	defer cancel()
	att := dedupe.Attempt{At: time.Now(), By: dedupe.AttemptBySender, Outcome: "released", Status: 503, Replica: dedupe.ThisReplica()}
	_ = s.finish(ctx, "release", sender, key, owner, "released", att, 0, "", "", "0")
}
