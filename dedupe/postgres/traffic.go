package postgres

import (
	"context"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// Traffic counters (dedupe.TrafficRecorder, dedupe.TrafficReader) live in
// hookonce_traffic (migration 0005). A batch is one statement that upserts
// every counter from arrays (rows sorted by the primary key, so replicas
// writing at once lock them in one order) and one that removes days past
// dedupe.TrafficKeep, sent together in one transaction. They are written
// on the pool, never through the claims' batcher: they wait for no claim
// and no claim waits for them.

var (
	_ dedupe.TrafficRecorder = (*Store)(nil)
	_ dedupe.TrafficReader   = (*Store)(nil)
)

const upsertTrafficSQL = `INSERT INTO hookonce_traffic AS t (day, sender, path, outcome, status, detail, n, max_ms)
	SELECT * FROM unnest($1::date[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::bigint[], $8::bigint[])
	ON CONFLICT (day, sender, path, outcome, status, detail)
	DO UPDATE SET n = t.n + excluded.n, max_ms = greatest(t.max_ms, excluded.max_ms)`

// AddTraffic implements dedupe.TrafficRecorder.
func (s *Store) AddTraffic(ctx context.Context, counts []dedupe.TrafficCount) error {
	cutoff := dedupe.TrafficDay(time.Now().Add(-dedupe.TrafficKeep))
	var (
		days                              []time.Time
		senders, paths, outcomes, details []string
		statuses                          []int32
		ns, maxes                         []int64
	)
	for _, c := range dedupe.MergeTraffic(counts) {
		if c.Day.Before(cutoff) {
			continue
		}
		days = append(days, c.Day)
		senders, paths, outcomes, details = append(senders, c.Sender), append(paths, c.Path), append(outcomes, c.Outcome), append(details, c.Detail)
		statuses, ns, maxes = append(statuses, int32(c.Status)), append(ns, c.N), append(maxes, c.MaxMillis)
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return fail("add traffic", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	if len(days) > 0 {
		if _, err := tx.Exec(ctx, upsertTrafficSQL, days, senders, paths, outcomes, statuses, details, ns, maxes); err != nil {
			return fail("add traffic", err)
		}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM hookonce_traffic WHERE day < $1`, cutoff); err != nil {
		return fail("add traffic", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail("add traffic", err)
	}
	return nil
}

// Traffic implements dedupe.TrafficReader.
func (s *Store) Traffic(ctx context.Context, since time.Time) ([]dedupe.TrafficCount, error) {
	from := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	if !since.IsZero() {
		from = dedupe.TrafficDay(since)
	}
	rows, err := s.db.Query(ctx, `SELECT day, sender, path, outcome, status, detail, n, max_ms
		FROM hookonce_traffic WHERE day >= $1 ORDER BY day, sender, path, outcome, status, detail`, from)
	if err != nil {
		return nil, fail("traffic", err)
	}
	defer rows.Close()
	var out []dedupe.TrafficCount
	for rows.Next() {
		var c dedupe.TrafficCount
		var status int32
		if err := rows.Scan(&c.Day, &c.Sender, &c.Path, &c.Outcome, &status, &c.Detail, &c.N, &c.MaxMillis); err != nil {
			return nil, fail("traffic", err)
		}
		c.Status = int(status)
		c.Day = dedupe.TrafficDay(c.Day)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("traffic", err)
	}
	return out, nil
}
