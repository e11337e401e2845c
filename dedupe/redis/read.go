package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hookonce/hookonce/dedupe"
)

// Get implements dedupe.Store.
func (s *Store) Get(ctx context.Context, sender, key string) (dedupe.Record, error) {
	if err := ctx.Err(); err != nil {
		return dedupe.Record{}, unavailable("get", err)
	}
	r := newRef(sender, key)
	m, err := s.client.HGetAll(ctx, r.record()).Result()
	if err != nil {
		return dedupe.Record{}, unavailable(fmt.Sprintf("get %s/%s", sender, key), err)
	}
	if len(m) == 0 {
		return dedupe.Record{}, fmt.Errorf("redis get %s/%s: %w", sender, key, dedupe.ErrNotFound)
	}
	return recordFromMap(r, m), nil
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
	c.AnsweredDuplicate = str("ad") == "1"
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
