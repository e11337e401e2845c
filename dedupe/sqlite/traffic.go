package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// Traffic counters (dedupe.TrafficRecorder, dedupe.TrafficReader) live in
// the traffic table (migrations/0005_traffic.sql): one row per day (Unix seconds of its
// UTC midnight), sender, path, outcome, status and detail. A batch of
// counters is one item of the writer's group commit (batch.go): an upsert
// per counter and the removal of days older than dedupe.TrafficKeep.

var (
	_ dedupe.TrafficRecorder = (*Store)(nil)
	_ dedupe.TrafficReader   = (*Store)(nil)
)

const upsertTrafficSQL = `INSERT INTO traffic (day, sender, path, outcome, status, detail, n, max_ms)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (day, sender, path, outcome, status, detail)
	DO UPDATE SET n = n + excluded.n, max_ms = max(max_ms, excluded.max_ms)`

// AddTraffic implements dedupe.TrafficRecorder: one item of the writer's
// group commit. Counters of days past dedupe.TrafficKeep are dropped, and
// the kept days past it removed.
func (s *Store) AddTraffic(ctx context.Context, counts []dedupe.TrafficCount) error {
	cutoff := dedupe.TrafficDay(time.Now().Add(-dedupe.TrafficKeep)).Unix()
	counts = dedupe.MergeTraffic(counts)
	return s.write(ctx, "add traffic", func(ctx context.Context, tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, upsertTrafficSQL)
		if err != nil {
			return unavailable("add traffic", err)
		}
		defer stmt.Close()
		for _, c := range counts {
			if c.Day.Unix() < cutoff {
				continue
			}
			if _, err := stmt.ExecContext(ctx, c.Day.Unix(), c.Sender, c.Path, c.Outcome, c.Status, c.Detail, c.N, c.MaxMillis); err != nil {
				return unavailable("add traffic", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM traffic WHERE day < ?`, cutoff); err != nil {
			return unavailable("add traffic", err)
		}
		return nil
	})
}

// Traffic implements dedupe.TrafficReader on the read pool.
func (s *Store) Traffic(ctx context.Context, since time.Time) ([]dedupe.TrafficCount, error) {
	return readTraffic(ctx, s.r, since)
}

// Traffic implements dedupe.TrafficReader for a read-only handle.
func (r *reader) Traffic(ctx context.Context, since time.Time) (cs []dedupe.TrafficCount, err error) {
	err = r.read("traffic", func(db *sql.DB) error {
		cs, err = readTraffic(ctx, db, since)
		return err
	})
	return cs, err
}

func readTraffic(ctx context.Context, db *sql.DB, since time.Time) ([]dedupe.TrafficCount, error) {
	from := int64(0)
	if !since.IsZero() {
		from = dedupe.TrafficDay(since).Unix()
	}
	rows, err := db.QueryContext(ctx, `SELECT day, sender, path, outcome, status, detail, n, max_ms
		FROM traffic WHERE day >= ? ORDER BY day, sender, path, outcome, status, detail`, from)
	if err != nil {
		return nil, unavailable("traffic", err)
	}
	var out []dedupe.TrafficCount
	for rows.Next() {
		var c dedupe.TrafficCount
		var day int64
		if err := rows.Scan(&day, &c.Sender, &c.Path, &c.Outcome, &c.Status, &c.Detail, &c.N, &c.MaxMillis); err != nil {
			rows.Close()
			return nil, unavailable("traffic", err)
		}
		c.Day = time.Unix(day, 0).UTC()
		out = append(out, c)
	}
	if err := closeRows(rows); err != nil {
		return nil, unavailable("traffic", err)
	}
	return out, nil
}

var _ dedupe.Summarizer = (*reader)(nil)

// Summary implements dedupe.Summarizer for a read-only handle, as the
// Store does (the readiness report reads the distinct keys from it).
func (r *reader) Summary(ctx context.Context, since time.Time) (sums []dedupe.SenderSummary, err error) {
	err = r.read("summary", func(db *sql.DB) error {
		sums, err = summarize(ctx, db, since)
		return err
	})
	return sums, err
}
