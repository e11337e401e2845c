package redis

import (
	"context"
	"sort"
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
			if f.State != "" && rec.State != f.State || f.Pending && rec.Pending == nil {
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
