package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookonce/hookonce/dedupe"
)

var _ dedupe.Summarizer = (*Store)(nil)

// Summary implements dedupe.Summarizer: three aggregate statements sent as
// one batch (one round trip), each a GROUP BY over the window found through
// hookonce_records_received_at (received_at, from migration 0001) or
// hookonce_conflicts_received_at. No index of its own: one that covered
// state and hits would make every Complete and AddHits a non-HOT update
// (measured in BenchmarkSummary100k, see the README).
func (s *Store) Summary(ctx context.Context, since time.Time) ([]dedupe.SenderSummary, error) {
	from := lowerBound(since)
	m := make(dedupe.Summaries)
	b := &pgx.Batch{}
	b.Queue(`SELECT sender, count(*), count(*) FILTER (WHERE state = 'processing'), count(*) FILTER (WHERE state = 'done'),
		count(*) FILTER (WHERE state = 'unknown'), count(*) FILTER (WHERE state = 'released'), coalesce(sum(hits), 0)::bigint
		FROM hookonce_records WHERE received_at >= $1 GROUP BY sender`, from).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var sender string
				var n, processing, done, unknown, released, hits int64
				if err := rows.Scan(&sender, &n, &processing, &done, &unknown, &released, &hits); err != nil {
					return err
				}
				m.SetRecords(sender, n, processing, done, unknown, released, hits)
			}
			return rows.Err()
		})
	b.Queue(`SELECT sender, outcome, `+dedupe.LatencyBucketSQL("d")+` AS bucket, count(*), coalesce(sum(d), 0)::bigint, coalesce(max(d), 0)
		FROM (SELECT r.sender, coalesce(a->>'outcome', '') AS outcome, coalesce((a->>'duration_ns')::bigint, 0) AS d
			FROM hookonce_records r, jsonb_array_elements(r.attempts) a
			WHERE r.received_at >= $1 AND (a->>'at')::timestamptz >= $1) x
		GROUP BY sender, outcome, bucket`, from).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var sender, outcome string
				var bucket int
				var n, sum, longest int64
				if err := rows.Scan(&sender, &outcome, &bucket, &n, &sum, &longest); err != nil {
					return err
				}
				m.AddAttempts(sender, outcome, bucket, n, time.Duration(sum), time.Duration(longest))
			}
			return rows.Err()
		})
	b.Queue(`SELECT sender, count(*) FROM hookonce_conflicts WHERE received_at >= $1 GROUP BY sender`, from).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var sender string
				var n int64
				if err := rows.Scan(&sender, &n); err != nil {
					return err
				}
				m.Sender(sender).Conflicts = n
			}
			return rows.Err()
		})
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return nil, fail("summary", err)
	}
	return m.Sorted(), nil
}
