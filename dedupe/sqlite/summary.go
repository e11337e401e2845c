package sqlite

import (
	"context"
	"database/sql"
	"math"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

var _ dedupe.Summarizer = (*Store)(nil)

// Summary implements dedupe.Summarizer with three aggregate reads on the
// read pool: records by state and their hits, attempts by outcome and
// latency bucket (json_each over the attempts column), conflicts. The
// window is found through records_received (received_at) from schema v1;
// no index or table of its own.
func (s *Store) Summary(ctx context.Context, since time.Time) ([]dedupe.SenderSummary, error) {
	return summarize(ctx, s.r, since)
}

var summaryAttemptsSQL = `SELECT sender, outcome, ` + dedupe.LatencyBucketSQL("d") + ` AS bucket, count(*), sum(d), max(d) FROM (
	SELECT r.sender AS sender, coalesce(json_extract(a.value, '$.outcome'), '') AS outcome,
		coalesce(json_extract(a.value, '$.duration_ns'), 0) AS d
	FROM records r, json_each(r.attempts) a
	WHERE r.received_at >= ?1 AND r.attempts IS NOT NULL AND json_extract(a.value, '$.at_ms') >= ?1
) GROUP BY sender, outcome, bucket`

func summarize(ctx context.Context, db *sql.DB, since time.Time) ([]dedupe.SenderSummary, error) {
	from := int64(math.MinInt64)
	if !since.IsZero() {
		from = ms(since)
	}
	m := make(dedupe.Summaries)
	rows, err := db.QueryContext(ctx, `SELECT sender, count(*), sum(state = 'processing'), sum(state = 'done'),
		sum(state = 'unknown'), sum(state = 'released'), sum(hits)
		FROM records WHERE received_at >= ? GROUP BY sender`, from)
	if err != nil {
		return nil, unavailable("summary", err)
	}
	for rows.Next() {
		var sender string
		var n, processing, done, unknown, released, hits int64
		if err := rows.Scan(&sender, &n, &processing, &done, &unknown, &released, &hits); err != nil {
			rows.Close()
			return nil, unavailable("summary", err)
		}
		m.SetRecords(sender, n, processing, done, unknown, released, hits)
	}
	if err := closeRows(rows); err != nil {
		return nil, unavailable("summary", err)
	}

	rows, err = db.QueryContext(ctx, summaryAttemptsSQL, from)
	if err != nil {
		return nil, unavailable("summary attempts", err)
	}
	for rows.Next() {
		var sender, outcome string
		var bucket int
		var n, sum, longest int64
		if err := rows.Scan(&sender, &outcome, &bucket, &n, &sum, &longest); err != nil {
			rows.Close()
			return nil, unavailable("summary attempts", err)
		}
		m.AddAttempts(sender, outcome, bucket, n, time.Duration(sum), time.Duration(longest))
	}
	if err := closeRows(rows); err != nil {
		return nil, unavailable("summary attempts", err)
	}

	rows, err = db.QueryContext(ctx, `SELECT sender, count(*) FROM conflicts WHERE received_at >= ? GROUP BY sender`, from)
	if err != nil {
		return nil, unavailable("summary conflicts", err)
	}
	for rows.Next() {
		var sender string
		var n int64
		if err := rows.Scan(&sender, &n); err != nil {
			rows.Close()
			return nil, unavailable("summary conflicts", err)
		}
		m.Sender(sender).Conflicts = n
	}
	if err := closeRows(rows); err != nil {
		return nil, unavailable("summary conflicts", err)
	}
	return m.Sorted(), nil
}

func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	rows.Close()
	return err
}
