package redis

import (
	"context"
	"encoding/json"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hookonce/hookonce/dedupe"
)

// Claim implements dedupe.Store.
func (s *Store) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	if err := ctx.Err(); err != nil {
		return dedupe.ClaimResult{}, unavailable("claim", err)
	}
	ttl, lease := req.TTL, req.Lease
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if lease <= 0 {
		lease = DefaultLease
	}
	keep, body := "0", ""
	if req.RequestBody != nil {
		keep, body = "1", string(req.RequestBody)
	}
	keepHead, head := "0", ""
	if req.Request != nil {
		b, err := json.Marshal(storedRequest{Method: req.Request.Method, URI: req.Request.URI, Header: req.Request.Header, Remote: req.Request.RemoteAddr})
		if err != nil {
			return dedupe.ClaimResult{}, fmt.Errorf("redis claim %s/%s: encode request: %w", req.Sender, req.Key, err)
		}
		keepHead, head = "1", string(b)
	}
	r := newRef(req.Sender, req.Key)
	cmd, confirmed, err := s.run(ctx, claimScript, s.keys(r, 5),
		r.args(req.PayloadHash, req.Owner, ms(lease), ms(ttl), keep, body, keepHead, head, string(req.ClaimFingerprint()))...)
	if err != nil {
		if s.wait.replicas > 0 && !isScriptError(err) {
			// The reply may be lost after the claim was applied (the WAIT
			// makes that more likely when the deadline is short): give it
			// back by its owner token, which is this attempt's alone, so
			// the retry does not wait for its lease.
			s.releaseUnconfirmed(ctx, req.Sender, req.Key, req.Owner)
		}
		return dedupe.ClaimResult{}, unavailable(fmt.Sprintf("claim %s/%s", req.Sender, req.Key), err)
	}
	res, err := cmd.StringSlice()
	if err != nil {
		return dedupe.ClaimResult{}, unavailable(fmt.Sprintf("claim %s/%s", req.Sender, req.Key), err)
	}
	if confirmed != nil && len(res) > 0 && (res[0] == "claimed" || res[0] == "taken_over") {
		// Not forwarded on: a failover may lose this claim (wait.go).
		s.releaseUnconfirmed(ctx, req.Sender, req.Key, req.Owner)
		return dedupe.ClaimResult{}, notConfirmed(fmt.Sprintf("claim %s/%s", req.Sender, req.Key), confirmed)
	}
	if len(res) == 0 {
		return dedupe.ClaimResult{}, fmt.Errorf("redis claim %s/%s: empty script reply", req.Sender, req.Key)
	}
	rec := decodeRecord(r, res[1:])
	var out dedupe.Found
	switch res[0] {
	case "claimed":
		out = dedupe.Claimed
		if s.cluster {
			if err := s.indexCluster(ctx, r, rec); err != nil {
				return dedupe.ClaimResult{}, unavailable(fmt.Sprintf("index %s/%s", req.Sender, req.Key), err)
			}
		}
	case "taken_over":
		out = dedupe.TakenOver
	case "duplicate":
		out = dedupe.Duplicate
	case "conflict":
		out = dedupe.Conflicting
	case "in_progress":
		out = dedupe.InProgress
	case "held":
		out = dedupe.Held
	default:
		return dedupe.ClaimResult{}, fmt.Errorf("redis claim %s/%s: unknown outcome %q", req.Sender, req.Key, res[0])
	}
	return dedupe.ClaimResult{Found: out, Record: rec}, nil
}

// indexCluster adds a new (or re-claimed) record to the indexes, which on
// Cluster live in other slots than the record.
func (s *Store) indexCluster(ctx context.Context, r ref, rec dedupe.Record) error {
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.ZAdd(ctx, senderIndex(r.sender), goredis.Z{Score: float64(rec.ReceivedAt.UnixMilli()), Member: r.key})
		p.ZAdd(ctx, globalIndex, goredis.Z{Score: float64(rec.ReceivedAt.UnixMilli()), Member: r.member})
		p.ZAdd(ctx, expiryIndex, goredis.Z{Score: float64(rec.ExpiresAt.UnixMilli()), Member: r.member})
		p.SAdd(ctx, sendersSet, r.sender)
		return nil
	})
	return err
}

func (s *Store) unindexCluster(ctx context.Context, r ref) error {
	if !s.cluster {
		return nil
	}
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.ZRem(ctx, senderIndex(r.sender), r.key)
		p.ZRem(ctx, globalIndex, r.member)
		p.ZRem(ctx, expiryIndex, r.member)
		p.ZRem(ctx, pendingIndex(r.sender), r.key)
		p.ZRem(ctx, pendingSinceIndex(r.sender), r.key)
		return nil
	})
	return err
}
