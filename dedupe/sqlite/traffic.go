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

// upsertTrafficSQL adds one counter. A counter whose detail is a shape
// (dedupe.TrafficCapped) not yet kept for its day, sender, path and
// outcome goes to dedupe.TrafficOtherDetail once dedupe.MaxTrafficShapes
// shapes are: the bound holds in the write, and the single writer makes
// it exact. Both lookups read the primary key's prefix (at most
// MaxTrafficShapes rows and a few more). ?9 is the other detail, ?10 the
// bound. (INSERT … SELECT … WHERE true: the WHERE keeps the parser from
// reading ON CONFLICT as a join's ON.)
const upsertTrafficSQL = `INSERT INTO traffic (day, sender, path, outcome, status, detail, n, max_ms)
	SELECT ?1, ?2, ?3, ?4, ?5,
		CASE WHEN ?6 IN ('', ?9)
			OR EXISTS (SELECT 1 FROM traffic WHERE day = ?1 AND sender = ?2 AND path = ?3 AND outcome = ?4 AND status = ?5 AND detail = ?6)
			OR (SELECT count(*) FROM traffic WHERE day = ?1 AND sender = ?2 AND path = ?3 AND outcome = ?4 AND detail NOT IN ('', ?9)) < ?10
		THEN ?6 ELSE ?9 END,
		?7, ?8
	WHERE true
	ON CONFLICT (day, sender, path, outcome, status, detail)
	DO UPDATE SET n = n + excluded.n, max_ms = max(max_ms, excluded.max_ms)`

// AddTraffic implements dedupe.TrafficRecorder: one item of the writer's
// group commit, at most dedupe.MaxTrafficShapes shapes per day, sender,
// path and outcome (upsertTrafficSQL). Counters of days past dedupe.TrafficKeep are dropped, and
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
			if _, err := stmt.ExecContext(ctx, c.Day.Unix(), c.Sender, c.Path, c.Outcome, c.Status, c.Detail, c.N, c.MaxMillis,
				dedupe.TrafficOtherDetail, dedupe.MaxTrafficShapes); err != nil {
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

// TrafficTotals implements dedupe.TrafficReader on the read pool.
func (s *Store) TrafficTotals(ctx context.Context, since time.Time) ([]dedupe.TrafficTotal, error) {
	return readTrafficTotals(ctx, s.r, since)
}

// TrafficTotals implements dedupe.TrafficReader for a read-only handle.
func (r *reader) TrafficTotals(ctx context.Context, since time.Time) (ts []dedupe.TrafficTotal, err error) {
	err = r.read("traffic totals", func(db *sql.DB) error {
		ts, err = readTrafficTotals(ctx, db, since)
		return err
	})
	return ts, err
}

// readTrafficTotals sums the counters over their days in the query: one
// row per counter of the window, however many days it was counted on.
func readTrafficTotals(ctx context.Context, db *sql.DB, since time.Time) ([]dedupe.TrafficTotal, error) {
	from := int64(0)
	if !since.IsZero() {
		from = dedupe.TrafficDay(since).Unix()
	}
	rows, err := db.QueryContext(ctx, `SELECT min(day), max(day), sender, path, outcome, status, detail, sum(n), max(max_ms)
		FROM traffic WHERE day >= ? GROUP BY sender, path, outcome, status, detail
		ORDER BY sender, path, outcome, status, detail`, from)
	if err != nil {
		return nil, unavailable("traffic totals", err)
	}
	var out []dedupe.TrafficTotal
	for rows.Next() {
		var t dedupe.TrafficTotal
		var first, last int64
		if err := rows.Scan(&first, &last, &t.Sender, &t.Path, &t.Outcome, &t.Status, &t.Detail, &t.N, &t.MaxMillis); err != nil {
			rows.Close()
			return nil, unavailable("traffic totals", err)
		}
		t.First, t.Last = time.Unix(first, 0).UTC(), time.Unix(last, 0).UTC()
		out = append(out, t)
	}
	if err := closeRows(rows); err != nil {
		return nil, unavailable("traffic totals", err)
	}
	return out, nil
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
