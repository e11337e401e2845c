package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hookonce/hookonce/dedupe"
)

// Free implements dedupe.Store (lua/free.lua).
func (s *Store) Free(ctx context.Context, sender, key string, att dedupe.Attempt) (dedupe.State, error) {
	if err := ctx.Err(); err != nil {
		return "", unavailable("free", err)
	}
	line, err := encodeAttempt(att)
	if err != nil {
		return "", fmt.Errorf("redis free %s/%s: encode attempt: %w", sender, key, err)
	}
	r := newRef(sender, key)
	was, err := freeScript.Run(ctx, s.client, s.pendingKeys(r, 3), r.args(line, dedupe.MaxAttempts)...).Text()
	if errors.Is(err, goredis.Nil) {
		return "", fmt.Errorf("redis free %s/%s: %w", sender, key, dedupe.ErrNotFound)
	}
	if err == nil && s.cluster {
		// A durable delivery it owed is off the pending indexes too (best
		// effort: an entry left behind is dropped by TakeDue).
		_ = s.dropPending(ctx, r, "settled", 0)
	}
	if err != nil {
		return "", unavailable(fmt.Sprintf("free %s/%s", sender, key), err)
	}
	return dedupe.State(was), nil
}

// Forget implements dedupe.Store (lua/remove.lua, mode forget).
func (s *Store) Forget(ctx context.Context, sender, key string) error {
	if err := ctx.Err(); err != nil {
		return unavailable("forget", err)
	}
	r := newRef(sender, key)
	res, err := removeScript.Run(ctx, s.client, s.removeKeys(r), r.args("forget", "")...).Text()
	if err == nil && res == "removed" {
		err = s.unindexCluster(ctx, r)
	}
	if err != nil {
		return unavailable(fmt.Sprintf("forget %s/%s", sender, key), err)
	}
	if res != "removed" {
		return fmt.Errorf("redis forget %s/%s: %w", sender, key, dedupe.ErrNotFound)
	}
	return nil
}

// AcceptConflict implements dedupe.Store. The conflict is found by reading
// the sender's stream (newest first, the key's first entry; or the entry
// id names), then marked by one script: HSETNX on the sender's accepted
// hash, which only the first of any number of callers sets.
func (s *Store) AcceptConflict(ctx context.Context, sender, key, id, by string) (dedupe.Conflict, error) {
	op := fmt.Sprintf("accept conflict %s/%s", sender, key)
	if err := ctx.Err(); err != nil {
		return dedupe.Conflict{}, unavailable(op, err)
	}
	now, err := s.serverNow(ctx)
	if err != nil {
		return dedupe.Conflict{}, unavailable(op, err)
	}
	var found []streamConflict
	if id != "" {
		msgs, err := s.client.XRangeN(ctx, conflictStream(sender), id, id, 1).Result()
		if err != nil && !strings.Contains(err.Error(), "Invalid stream ID") {
			return dedupe.Conflict{}, unavailable(op, err)
		}
		for _, m := range msgs {
			if sc := conflictFromEntry(sender, m, now); !sc.exp && sc.c.Key == key {
				found = append(found, sc)
			}
		}
		if err := s.fillAccepted(ctx, sender, found); err != nil {
			return dedupe.Conflict{}, unavailable(op, err)
		}
	} else if found, err = s.newestConflicts(ctx, sender, dedupe.ListFilter{Key: key}, 1, now); err != nil {
		return dedupe.Conflict{}, unavailable(op, err)
	}
	if len(found) == 0 {
		return dedupe.Conflict{}, fmt.Errorf("redis %s: %w", op, dedupe.ErrNotFound)
	}
	c := found[0].c
	if err := c.Acceptable(); err != nil {
		return c, fmt.Errorf("redis %s: %w", op, err)
	}
	res, err := acceptScript.Run(ctx, s.client, []string{acceptedHash(sender)}, c.ID, by, c.ExpiresAt.UnixMilli(),
		payloadField(key, c.ReceivedHash)).Slice()
	if err != nil || len(res) != 2 {
		return dedupe.Conflict{}, unavailable(op, fmt.Errorf("accept script: %v %w", res, err))
	}
	v, _ := res[1].(string)
	switch won, _ := res[0].(int64); won {
	case 1:
		setAccepted(&c, v)
		return c, nil
	case 2: // another conflict with this payload was accepted: v is its id
		first, ferr := s.conflictByID(ctx, sender, key, v, now)
		if ferr != nil {
			return dedupe.Conflict{}, unavailable(op, ferr)
		}
		if first.Accepted() {
			return first, fmt.Errorf("redis %s: %w", op, dedupe.PayloadAccepted(first))
		}
		return c, fmt.Errorf("redis %s: this payload was accepted as conflict %s: %w", op, v, dedupe.ErrAccepted)
	}
	setAccepted(&c, v)
	return c, fmt.Errorf("redis %s: %w", op, c.Acceptable())
}

// payloadField is the field of the sender's accepted hash that names the
// accepted conflict of key whose payload has hash (accept.lua). A hash is
// 64 hex digits, so the field is unambiguous whatever the key holds.
func payloadField(key, hash string) string { return "p:" + hash + ":" + key }

// conflictByID reads one conflict of key by its stream id, with its
// acceptance; a zero Conflict when it is gone (purged, or another key's).
func (s *Store) conflictByID(ctx context.Context, sender, key, id string, now time.Time) (dedupe.Conflict, error) {
	msgs, err := s.client.XRangeN(ctx, conflictStream(sender), id, id, 1).Result()
	if err != nil && !strings.Contains(err.Error(), "Invalid stream ID") {
		return dedupe.Conflict{}, err
	}
	var found []streamConflict
	for _, m := range msgs {
		if sc := conflictFromEntry(sender, m, now); !sc.exp && sc.c.Key == key {
			found = append(found, sc)
		}
	}
	if len(found) == 0 {
		return dedupe.Conflict{}, nil
	}
	if err := s.fillAccepted(ctx, sender, found); err != nil {
		return dedupe.Conflict{}, err
	}
	return found[0].c, nil
}

// AcceptedConflict implements dedupe.Reader: the payload field of the
// sender's accepted hash names the conflict, read from the stream.
func (s *Store) AcceptedConflict(ctx context.Context, sender, key, hash string) (dedupe.Conflict, error) {
	op := fmt.Sprintf("accepted conflict %s/%s", sender, key)
	if err := ctx.Err(); err != nil {
		return dedupe.Conflict{}, unavailable(op, err)
	}
	id, err := s.client.HGet(ctx, acceptedHash(sender), payloadField(key, hash)).Result()
	if errors.Is(err, goredis.Nil) {
		return dedupe.Conflict{}, fmt.Errorf("redis %s: %w", op, dedupe.ErrNotFound)
	}
	if err != nil {
		return dedupe.Conflict{}, unavailable(op, err)
	}
	now, err := s.serverNow(ctx)
	if err != nil {
		return dedupe.Conflict{}, unavailable(op, err)
	}
	c, err := s.conflictByID(ctx, sender, key, id, now)
	if err != nil {
		return dedupe.Conflict{}, unavailable(op, err)
	}
	if !c.Accepted() || c.ReceivedHash != hash {
		return dedupe.Conflict{}, fmt.Errorf("redis %s: %w", op, dedupe.ErrNotFound)
	}
	return c, nil
}

// Purge implements dedupe.Store. Without ReceivedBefore it removes the index
// entries of records Redis has already expired (the records themselves go by
// their Redis expiry) and any record still present past its ttl without a
// live lease, and counts both; with ReceivedBefore it removes records received
// before it. A live lease is never touched. Conflicts past their expiry (or
// received before the cut) are removed too, oldest first, per sender.
func (s *Store) Purge(ctx context.Context, req dedupe.PurgeRequest) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, unavailable("purge", err)
	}
	now, err := s.serverNow(ctx)
	if err != nil {
		return 0, unavailable("purge", err)
	}
	index, mode, max, arg := expiryIndex, "expired", fmt.Sprint(now.UnixMilli()), any("")
	if !req.ReceivedBefore.IsZero() {
		cut := req.ReceivedBefore.UnixMilli()
		index, mode, max, arg = globalIndex, "before", "("+fmt.Sprint(cut), cut
	}
	if err := removeScript.Load(ctx, s.client).Err(); err != nil {
		return 0, unavailable("purge", err)
	}
	removed := 0
	var offset int64 // entries to skip: live leases (or not yet due) stay indexed
	for req.Limit <= 0 || removed < req.Limit {
		count := int64(pageSize)
		if req.Limit > 0 {
			count = min(count, int64(req.Limit-removed))
		}
		members, err := s.client.ZRangeByScore(ctx, index, &goredis.ZRangeBy{
			Min: "-inf", Max: max, Offset: offset, Count: count,
		}).Result()
		if err != nil {
			return removed, unavailable("purge", err)
		}
		if len(members) == 0 {
			break
		}
		refs := make([]ref, len(members))
		cmds := make([]*goredis.Cmd, len(members))
		_, err = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, m := range members {
				refs[i] = refFromMember(m)
				cmds[i] = removeScript.EvalSha(ctx, p, s.removeKeys(refs[i]), refs[i].args(mode, arg)...)
			}
			return nil
		})
		if err != nil {
			return removed, unavailable("purge", err)
		}
		for i, c := range cmds {
			if res, _ := c.Text(); res == "kept" {
				offset++
				continue
			}
			if err := s.unindexCluster(ctx, refs[i]); err != nil {
				return removed, unavailable("purge", err)
			}
			removed++
		}
		if int64(len(members)) < count {
			break
		}
	}
	if err := s.purgeConflicts(ctx, now, req.ReceivedBefore); err != nil {
		return removed, unavailable("purge conflicts", err)
	}
	return removed, nil
}

// purgeConflicts deletes each sender's conflicts from the oldest on while
// they are expired (or received before cut), stopping at the first to keep:
// streams are in arrival order, so that is where the removable prefix ends.
func (s *Store) purgeConflicts(ctx context.Context, now, cut time.Time) error {
	senders, err := s.client.SMembers(ctx, sendersSet).Result()
	if err != nil {
		return err
	}
	for _, sender := range senders {
		stream := conflictStream(sender)
		start := "-"
		for {
			msgs, err := s.client.XRangeN(ctx, stream, start, "+", int64(pageSize)).Result()
			if err != nil {
				return err
			}
			var ids []string
			stop := false
			for _, m := range msgs {
				sc := conflictFromEntry(sender, m, now)
				if !sc.exp && (cut.IsZero() || !sc.c.ReceivedAt.Before(cut)) {
					stop = true
					break
				}
				ids = append(ids, m.ID)
			}
			if len(ids) > 0 {
				if err := s.client.XDel(ctx, stream, ids...).Err(); err != nil {
					return err
				}
				if err := s.client.HDel(ctx, acceptedHash(sender), ids...).Err(); err != nil {
					return err
				}
			}
			if stop || len(msgs) < pageSize {
				break
			}
			start = "(" + msgs[len(msgs)-1].ID
		}
	}
	return nil
}
