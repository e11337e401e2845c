package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hookonce/hookonce/dedupe"
)

// Complete implements dedupe.Store.
func (s *Store) Complete(ctx context.Context, sender, key, owner string, resp dedupe.Response, att dedupe.Attempt) error {
	hdr := ""
	if len(resp.Header) > 0 {
		b, err := json.Marshal(resp.Header)
		if err != nil {
			return fmt.Errorf("redis complete %s/%s: encode headers: %w", sender, key, err)
		}
		hdr = string(b)
	}
	trunc := "0"
	if resp.Truncated {
		trunc = "1"
	}
	return s.finish(ctx, "complete", sender, key, owner, "done", att, resp.Status, hdr, string(resp.Body), trunc)
}

// Hold implements dedupe.Store.
func (s *Store) Hold(ctx context.Context, sender, key, owner string, att dedupe.Attempt) error {
	return s.finish(ctx, "hold", sender, key, owner, "unknown", att, 0, "", "", "0")
}

// Release implements dedupe.Store: the record stays, released, until its
// ttl; a second release (even a retry of this one) answers ErrNotOwner.
func (s *Store) Release(ctx context.Context, sender, key, owner string, att dedupe.Attempt) error {
	return s.finish(ctx, "release", sender, key, owner, "released", att, 0, "", "", "0")
}

// finish runs lua/finish.lua: owner's processing claim moves to state with
// att appended, all in one step.
func (s *Store) finish(ctx context.Context, op, sender, key, owner, state string, att dedupe.Attempt, status int, hdr, body, trunc string) error {
	if err := ctx.Err(); err != nil {
		return unavailable(op, err)
	}
	line, err := encodeAttempt(att)
	if err != nil {
		return fmt.Errorf("redis %s %s/%s: encode attempt: %w", op, sender, key, err)
	}
	r := newRef(sender, key)
	args := r.args(state, owner, status, hdr, body, trunc, line, dedupe.MaxAttempts)
	var cmd *goredis.Cmd
	var confirmed error
	if state == "released" {
		// Never waited for: a lost release only brings the claim back,
		// which frees itself at its lease (wait.go).
		cmd = finishScript.Run(ctx, s.client, s.keys(r, 1), args...)
		err = cmd.Err()
	} else {
		cmd, confirmed, err = s.run(ctx, finishScript, s.keys(r, 1), args...)
	}
	if err != nil {
		return unavailable(fmt.Sprintf("%s %s/%s", op, sender, key), err)
	}
	n, err := cmd.Int()
	if err != nil {
		return unavailable(fmt.Sprintf("%s %s/%s", op, sender, key), err)
	}
	if n != 1 {
		return fmt.Errorf("redis %s %s/%s: %w", op, sender, key, dedupe.ErrNotOwner)
	}
	if confirmed != nil {
		return notConfirmed(fmt.Sprintf("%s %s/%s", op, sender, key), confirmed)
	}
	return nil
}

// Renew implements dedupe.Store.
func (s *Store) Renew(ctx context.Context, sender, key, owner string, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return unavailable("renew", err)
	}
	if lease <= 0 {
		lease = DefaultLease
	}
	r := newRef(sender, key)
	cmd, confirmed, err := s.run(ctx, renewScript, s.keys(r, 1), r.args(owner, ms(lease))...)
	if err != nil {
		return unavailable(fmt.Sprintf("renew %s/%s", sender, key), err)
	}
	n, err := cmd.Int()
	if err != nil {
		return unavailable(fmt.Sprintf("renew %s/%s", sender, key), err)
	}
	if n != 1 {
		return fmt.Errorf("redis renew %s/%s: %w", sender, key, dedupe.ErrNotOwner)
	}
	if confirmed != nil {
		// The proxy keeps counting on the lease it had: a lost renewal
		// must not extend it.
		return notConfirmed(fmt.Sprintf("renew %s/%s", sender, key), confirmed)
	}
	return nil
}

// AddHits implements dedupe.Store.
func (s *Store) AddHits(ctx context.Context, hits []dedupe.Hit) error {
	if err := ctx.Err(); err != nil {
		return unavailable("add hits", err)
	}
	// Sum per record first: one script call per record.
	sum := map[ref]int64{}
	var order []ref
	for _, h := range hits {
		if h.N == 0 {
			continue
		}
		r := newRef(h.Sender, h.Key)
		if _, ok := sum[r]; !ok {
			order = append(order, r)
		}
		sum[r] += h.N
	}
	if len(order) == 0 {
		return nil
	}
	// Make sure the script is cached, then send every call in one pipeline.
	if err := hitsScript.Load(ctx, s.client).Err(); err != nil {
		return unavailable("add hits", err)
	}
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, r := range order {
			hitsScript.EvalSha(ctx, p, []string{r.record()}, sum[r])
		}
		return nil
	})
	if err != nil {
		return unavailable("add hits", err)
	}
	return nil
}

// RecordConflict implements dedupe.Store.
func (s *Store) RecordConflict(ctx context.Context, c dedupe.Conflict) error {
	if err := ctx.Err(); err != nil {
		return unavailable("record conflict", err)
	}
	if c.ReceivedAt.IsZero() {
		now, err := s.serverNow(ctx)
		if err != nil {
			return unavailable("record conflict", err)
		}
		c.ReceivedAt = now
	}
	if c.ExpiresAt.IsZero() {
		c.ExpiresAt = c.ReceivedAt.Add(DefaultTTL)
	}
	paths := ""
	if len(c.ChangedPaths) > 0 {
		b, err := json.Marshal(c.ChangedPaths)
		if err != nil {
			return fmt.Errorf("redis record conflict %s/%s: %w", c.Sender, c.Key, err)
		}
		paths = string(b)
	}
	keys := []string{conflictStream(c.Sender), sendersSet}
	if s.cluster {
		keys = keys[:1]
	}
	args := []any{c.Sender, ConflictStreamLen, c.ExpiresAt.UnixMilli(),
		"k", c.Key, "sh", c.StoredHash, "rh", c.ReceivedHash,
		"ra", c.ReceivedAt.UnixMilli(), "ea", c.ExpiresAt.UnixMilli(), "cp", paths, "dk", c.DiffKind}
	if c.Shadow {
		args = append(args, "sw", "1")
	}
	if c.AnsweredDuplicate {
		args = append(args, "ad", "1")
	}
	if c.Request != nil {
		head, err := json.Marshal(storedRequest{Method: c.Request.Method, URI: c.Request.URI, Header: c.Request.Header})
		if err != nil {
			return fmt.Errorf("redis record conflict %s/%s: %w", c.Sender, c.Key, err)
		}
		args = append(args, "qm", string(head), "qb", string(c.Body))
		if c.BodyTruncated {
			args = append(args, "qt", "1")
		}
	}
	err := conflictScript.Run(ctx, s.client, keys, args...).Err()
	if err == nil && s.cluster {
		err = s.client.SAdd(ctx, sendersSet, c.Sender).Err()
	}
	if err != nil {
		return unavailable(fmt.Sprintf("record conflict %s/%s", c.Sender, c.Key), err)
	}
	return nil
}
