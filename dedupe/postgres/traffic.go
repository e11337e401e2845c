package postgres

import (
	"context"
	"hash/fnv"
	"slices"
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

// upsertTrafficSQL upserts every counter of a batch from arrays, with at
// most dedupe.MaxTrafficShapes shapes (dedupe.TrafficCapped details) per
// day, sender, path and outcome: a counter whose shape is not yet kept is
// new, the new ones of a group are ranked in the batch, and those past
// what the table keeps plus the bound are added to the group's
// dedupe.TrafficOtherDetail counter instead. The rows are summed per
// final counter (one statement may not update a row twice) and sorted by
// the primary key, so replicas writing at once lock them in one order.
// $9 is the other detail, $10 the bound. The groups' advisory locks
// (lockTrafficSQL), taken before in the same transaction, make the count
// exact across replicas: under READ COMMITTED this statement's snapshot
// is taken after the locks, so it sees every shape another writer of the
// group committed.
const upsertTrafficSQL = `WITH b AS (
		SELECT * FROM unnest($1::date[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::bigint[], $8::bigint[])
			AS b(day, sender, path, outcome, status, detail, n, max_ms)
	), k AS (
		SELECT b.*, (b.detail NOT IN ('', $9) AND NOT EXISTS (SELECT 1 FROM hookonce_traffic t
			WHERE t.day = b.day AND t.sender = b.sender AND t.path = b.path AND t.outcome = b.outcome
				AND t.status = b.status AND t.detail = b.detail)) AS new
		FROM b
	), r AS (
		SELECT k.*,
			row_number() OVER (PARTITION BY k.day, k.sender, k.path, k.outcome, k.new ORDER BY k.status, k.detail) AS rank,
			(SELECT count(*) FROM hookonce_traffic t WHERE t.day = k.day AND t.sender = k.sender AND t.path = k.path
				AND t.outcome = k.outcome AND t.detail NOT IN ('', $9)) AS kept
		FROM k
	)
	INSERT INTO hookonce_traffic AS t (day, sender, path, outcome, status, detail, n, max_ms)
	SELECT day, sender, path, outcome, status, CASE WHEN NOT new OR kept + rank <= $10 THEN detail ELSE $9 END AS kd,
		sum(n), max(max_ms)
	FROM r GROUP BY day, sender, path, outcome, status, kd
	ORDER BY day, sender, path, outcome, status, kd
	ON CONFLICT (day, sender, path, outcome, status, detail)
	DO UPDATE SET n = t.n + excluded.n, max_ms = greatest(t.max_ms, excluded.max_ms)`

// lockTrafficSQL takes the transaction's advisory locks of the groups
// (day, sender, path, outcome) whose shapes the batch may add, in the
// order of the array (sorted: writers take them in one order). $1 is
// trafficLockClass, $2 the groups' hashes (trafficGroupLock): two groups
// sharing a hash only wait for each other.
const lockTrafficSQL = `SELECT count(pg_advisory_xact_lock($1::int4, h)) FROM unnest($2::int4[]) AS h`

// trafficLockClass is the first key of the groups' advisory locks ("hook"
// in ASCII); migrationLockID, a single bigint key, is in another space.
const trafficLockClass int32 = 0x686f6f6b

// trafficGroupLock is the second key of a group's advisory lock.
func trafficGroupLock(c dedupe.TrafficCount) int32 {
	h := fnv.New32a()
	for _, s := range []string{c.Day.Format("2006-01-02"), c.Sender, c.Path, c.Outcome} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return int32(h.Sum32())
}

// AddTraffic implements dedupe.TrafficRecorder: the groups' locks, the
// upsert (at most dedupe.MaxTrafficShapes shapes per group) and the
// removal of days past dedupe.TrafficKeep, in one transaction.
func (s *Store) AddTraffic(ctx context.Context, counts []dedupe.TrafficCount) error {
	cutoff := dedupe.TrafficDay(time.Now().Add(-dedupe.TrafficKeep))
	var (
		days                              []time.Time
		senders, paths, outcomes, details []string
		statuses                          []int32
		ns, maxes                         []int64
		locks                             []int32
	)
	for _, c := range dedupe.MergeTraffic(counts) {
		if c.Day.Before(cutoff) {
			continue
		}
		days = append(days, c.Day)
		senders, paths, outcomes, details = append(senders, c.Sender), append(paths, c.Path), append(outcomes, c.Outcome), append(details, c.Detail)
		statuses, ns, maxes = append(statuses, int32(c.Status)), append(ns, c.N), append(maxes, c.MaxMillis)
		if dedupe.TrafficCapped(c.Detail) {
			locks = append(locks, trafficGroupLock(c))
		}
	}
	slices.Sort(locks)
	locks = slices.Compact(locks)
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return fail("add traffic", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	if len(locks) > 0 {
		if _, err := tx.Exec(ctx, lockTrafficSQL, trafficLockClass, locks); err != nil {
			return fail("add traffic", err)
		}
	}
	if len(days) > 0 {
		if _, err := tx.Exec(ctx, upsertTrafficSQL, days, senders, paths, outcomes, statuses, details, ns, maxes,
			dedupe.TrafficOtherDetail, dedupe.MaxTrafficShapes); err != nil {
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

// TrafficTotals implements dedupe.TrafficReader: the counters summed over
// their days in the query (one row per counter of the window), sorted
// here, in Go's byte order, whatever the database's collation.
func (s *Store) TrafficTotals(ctx context.Context, since time.Time) ([]dedupe.TrafficTotal, error) {
	from := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	if !since.IsZero() {
		from = dedupe.TrafficDay(since)
	}
	rows, err := s.db.Query(ctx, `SELECT min(day), max(day), sender, path, outcome, status, detail, sum(n)::bigint, max(max_ms)
		FROM hookonce_traffic WHERE day >= $1 GROUP BY sender, path, outcome, status, detail`, from)
	if err != nil {
		return nil, fail("traffic totals", err)
	}
	defer rows.Close()
	var out []dedupe.TrafficTotal
	for rows.Next() {
		var t dedupe.TrafficTotal
		var status int32
		if err := rows.Scan(&t.First, &t.Last, &t.Sender, &t.Path, &t.Outcome, &status, &t.Detail, &t.N, &t.MaxMillis); err != nil {
			return nil, fail("traffic totals", err)
		}
		t.Status = int(status)
		t.First, t.Last = dedupe.TrafficDay(t.First), dedupe.TrafficDay(t.Last)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("traffic totals", err)
	}
	slices.SortFunc(out, dedupe.TrafficTotalLess)
	return out, nil
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
