package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hookonce/hookonce/dedupe"
)

const pageSize = 200

// serverNow reads the server's clock (TIME), the one clock every decision uses.
func (s *Store) serverNow(ctx context.Context) (time.Time, error) {
	return s.client.Time(ctx).Result()
}

// List implements dedupe.Store. It walks the received-time index newest
// first and drops index entries whose record Redis has expired.
func (s *Store) List(ctx context.Context, f dedupe.ListFilter) ([]dedupe.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, unavailable("list", err)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	index := globalIndex
	if f.Sender != "" {
		index = senderIndex(f.Sender)
	}
	var out []dedupe.Record
	for start := int64(0); len(out) < limit; {
		members, err := s.client.ZRevRange(ctx, index, start, start+pageSize-1).Result()
		if err != nil {
			return nil, unavailable("list", err)
		}
		if len(members) == 0 {
			break
		}
		// A key filter reads the index's members only (the whole index,
		// page by page, when it finds few) and fetches the records it keeps.
		var refs []ref
		var kept []string
		for _, m := range members {
			r := newRef(f.Sender, m)
			if f.Sender == "" {
				r = refFromMember(m)
			}
			if (f.Key == "" || r.key == f.Key) && (f.KeyPart == "" || dedupe.KeyHasPart(r.key, f.KeyPart)) {
				refs = append(refs, r)
				kept = append(kept, m)
			}
		}
		cmds := make([]*goredis.MapStringStringCmd, len(refs))
		_, err = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i := range refs {
				cmds[i] = p.HGetAll(ctx, refs[i].record())
			}
			return nil
		})
		if err != nil {
			return nil, unavailable("list", err)
		}
		var gone []any
		for i, c := range cmds {
			m := c.Val()
			if len(m) == 0 {
				gone = append(gone, kept[i])
				continue
			}
			rec := recordFromMap(refs[i], m)
			if f.State != "" && rec.State != f.State {
				continue
			}
			if len(out) < limit {
				out = append(out, rec)
			}
		}
		start += int64(len(members))
		if len(gone) > 0 {
			// Lazy pruning of this index only: the expiry index stays, so
			// Purge still counts the records Redis expired.
			if err := s.client.ZRem(ctx, index, gone...).Err(); err != nil {
				return nil, unavailable("list", err)
			}
			start -= int64(len(gone))
		}
		if len(members) < pageSize {
			break
		}
	}
	return out, nil
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

type streamConflict struct {
	id  [2]uint64 // stream id: ms, seq
	c   dedupe.Conflict
	exp bool
}

func parseStreamID(id string) [2]uint64 {
	a, b, _ := strings.Cut(id, "-")
	x, _ := strconv.ParseUint(a, 10, 64)
	y, _ := strconv.ParseUint(b, 10, 64)
	return [2]uint64{x, y}
}

func conflictFromEntry(sender string, m goredis.XMessage, now time.Time) streamConflict {
	str := func(k string) string { v, _ := m.Values[k].(string); return v }
	c := dedupe.Conflict{
		Sender: sender, Key: str("k"), StoredHash: str("sh"), ReceivedHash: str("rh"),
		ReceivedAt: msTime(str("ra")), ExpiresAt: msTime(str("ea")),
	}
	if p := str("cp"); p != "" {
		_ = json.Unmarshal([]byte(p), &c.ChangedPaths) // written by RecordConflict
	}
	c.ID, c.DiffKind, c.Shadow, c.BodyTruncated = m.ID, str("dk"), str("sw") == "1", str("qt") == "1"
	if head := str("qm"); head != "" {
		var h storedRequest
		if json.Unmarshal([]byte(head), &h) == nil {
			c.Request = &dedupe.StoredRequest{Method: h.Method, URI: h.URI, Header: h.Header}
			c.Body = []byte(str("qb"))
		}
	}
	return streamConflict{id: parseStreamID(m.ID), c: c, exp: !c.ExpiresAt.IsZero() && !c.ExpiresAt.After(now)}
}

// setAccepted fills c's acceptance from an accepted hash value "<ms> <by>".
func setAccepted(c *dedupe.Conflict, v string) {
	at, by, _ := strings.Cut(v, " ")
	c.AcceptedAt, c.AcceptedBy = msTime(at), by
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
	res, err := acceptScript.Run(ctx, s.client, []string{acceptedHash(sender)}, c.ID, by, c.ExpiresAt.UnixMilli()).Slice()
	if err != nil || len(res) != 2 {
		return dedupe.Conflict{}, unavailable(op, fmt.Errorf("accept script: %v %w", res, err))
	}
	v, _ := res[1].(string)
	setAccepted(&c, v)
	if won, _ := res[0].(int64); won != 1 {
		return c, fmt.Errorf("redis %s: %w", op, c.Acceptable())
	}
	return c, nil
}

// fillAccepted reads the acceptance of each conflict of one sender.
func (s *Store) fillAccepted(ctx context.Context, sender string, cs []streamConflict) error {
	if len(cs) == 0 {
		return nil
	}
	ids := make([]string, len(cs))
	for i, sc := range cs {
		ids[i] = sc.c.ID
	}
	vals, err := s.client.HMGet(ctx, acceptedHash(sender), ids...).Result()
	if err != nil {
		return err
	}
	for i, v := range vals {
		if v, ok := v.(string); ok {
			setAccepted(&cs[i].c, v)
		}
	}
	return nil
}

// Conflicts implements dedupe.Store: newest first (stream order), across
// every known sender when f.Sender is empty; expired conflicts are skipped.
func (s *Store) Conflicts(ctx context.Context, f dedupe.ListFilter) ([]dedupe.Conflict, error) {
	if err := ctx.Err(); err != nil {
		return nil, unavailable("conflicts", err)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	now, err := s.serverNow(ctx)
	if err != nil {
		return nil, unavailable("conflicts", err)
	}
	senders := []string{f.Sender}
	if f.Sender == "" {
		if senders, err = s.client.SMembers(ctx, sendersSet).Result(); err != nil {
			return nil, unavailable("conflicts", err)
		}
	}
	var all []streamConflict
	for _, sender := range senders {
		got, err := s.newestConflicts(ctx, sender, f, limit, now)
		if err != nil {
			return nil, unavailable("conflicts", err)
		}
		all = append(all, got...)
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i].id, all[j].id
		return a[0] > b[0] || a[0] == b[0] && a[1] > b[1]
	})
	out := make([]dedupe.Conflict, 0, min(limit, len(all)))
	for _, sc := range all {
		if len(out) == limit {
			break
		}
		out = append(out, sc.c)
	}
	return out, nil
}

// newestConflicts reads up to limit live conflicts of one sender that pass
// f's key filters, newest first, with their acceptance. A key filter reads
// the stream page by page until it has limit (at worst the whole stream,
// at most ConflictStreamLen entries).
func (s *Store) newestConflicts(ctx context.Context, sender string, f dedupe.ListFilter, limit int, now time.Time) ([]streamConflict, error) {
	var out []streamConflict
	end := "+"
	for len(out) < limit {
		msgs, err := s.client.XRevRangeN(ctx, conflictStream(sender), end, "-", int64(pageSize)).Result()
		if err != nil {
			return nil, err
		}
		first := len(out)
		for _, m := range msgs {
			sc := conflictFromEntry(sender, m, now)
			if !sc.exp && len(out) < limit && f.Match(sender, sc.c.Key, f.State) {
				out = append(out, sc)
			}
		}
		if err := s.fillAccepted(ctx, sender, out[first:]); err != nil {
			return nil, err
		}
		if len(msgs) < pageSize {
			break
		}
		end = "(" + msgs[len(msgs)-1].ID
	}
	return out, nil
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
				cmds[i] = removeScript.EvalSha(ctx, p, s.keys(refs[i], 4), refs[i].args(mode, arg)...)
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
