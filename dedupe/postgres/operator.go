package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// newestConflict is the conflict AcceptConflict means: $3 names it by id,
// or 0 means the newest of (sender $1, key $2), found by
// hookonce_conflicts_key.
const newestConflict = `(SELECT id FROM hookonce_conflicts WHERE sender = $1 AND key = $2 AND ($3::bigint = 0 OR id = $3)
	ORDER BY id DESC LIMIT 1)`

// AcceptConflict implements dedupe.Store: one transaction locks the
// key's conflicts (in id order, so rivals queue in one order), reads the
// one meant, refuses it when it is not acceptable or when another
// conflict of the key with the same payload was accepted already, and
// marks it. A concurrent accept of any conflict of the key waits for the
// locks and then reads what this one committed: of two accepts of one
// conflict, or of two conflicts with one payload, exactly one succeeds.
func (s *Store) AcceptConflict(ctx context.Context, sender, key, id, by string) (dedupe.Conflict, error) {
	op := "accept conflict " + sender + "/" + key
	var n int64
	if id != "" {
		v, err := strconv.ParseInt(id, 10, 64)
		if err != nil || v <= 0 {
			return dedupe.Conflict{}, fmt.Errorf("postgres %s: no conflict %q: %w", op, id, dedupe.ErrNotFound)
		}
		n = v
	}
	var c dedupe.Conflict
	var refused error
	// Confirmed like the delivery's writes (trap 35): an acceptance the
	// standby may not have is not reported as made.
	err := s.confirmed(ctx, func(q querier) error {
		tx, err := q.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx) //nolint:errcheck // after Commit: a no-op
		if _, err := tx.Exec(ctx, `SELECT id FROM hookonce_conflicts WHERE sender = $1 AND key = $2 ORDER BY id FOR UPDATE`,
			sender, key); err != nil {
			return err
		}
		if c, err = scanConflict(tx.QueryRow(ctx, `SELECT `+conflictCols+` FROM hookonce_conflicts WHERE id = `+newestConflict,
			sender, key, n)); err != nil {
			return err
		}
		if refused = c.Acceptable(); refused != nil {
			return nil
		}
		first, err := scanConflict(tx.QueryRow(ctx, `SELECT `+conflictCols+` FROM hookonce_conflicts
			WHERE sender = $1 AND key = $2 AND received_hash = $3 AND accepted_at IS NOT NULL ORDER BY accepted_at, id LIMIT 1`,
			sender, key, c.ReceivedHash))
		if err == nil {
			c, refused = first, dedupe.PayloadAccepted(first)
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if c, err = scanConflict(tx.QueryRow(ctx, `
			UPDATE hookonce_conflicts SET accepted_at = clock_timestamp(), accepted_by = $2
			WHERE id = $1 RETURNING `+conflictCols, c.ID, by)); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return dedupe.Conflict{}, fmt.Errorf("postgres %s: %w", op, dedupe.ErrNotFound)
	case err != nil:
		return dedupe.Conflict{}, fail(op, err)
	case refused != nil:
		return c, fmt.Errorf("postgres %s: %w", op, refused)
	}
	return c, nil
}

// AcceptedConflict implements dedupe.Reader, by hookonce_conflicts_key.
func (s *Store) AcceptedConflict(ctx context.Context, sender, key, hash string) (dedupe.Conflict, error) {
	op := "accepted conflict " + sender + "/" + key
	c, err := scanConflict(s.db.QueryRow(ctx, `SELECT `+conflictCols+` FROM hookonce_conflicts
		WHERE sender = $1 AND key = $2 AND received_hash = $3 AND accepted_at IS NOT NULL ORDER BY accepted_at, id LIMIT 1`,
		sender, key, hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, fmt.Errorf("postgres %s: %w", op, dedupe.ErrNotFound)
	}
	if err != nil {
		return c, fail(op, err)
	}
	return c, nil
}

// Free implements dedupe.Store: one statement, which locks the row, reads
// the state it had and releases it; confirmed like the delivery's writes.
// A durable delivery still owed is dropped with the claim (its deliverer's
// next write finds no pending_owner: ErrNotOwner).
func (s *Store) Free(ctx context.Context, sender, key string, att dedupe.Attempt) (dedupe.State, error) {
	a, err := encodeAttempt(att)
	if err != nil {
		return "", fmt.Errorf("postgres free %s/%s: %w", sender, key, err)
	}
	var was string
	err = s.confirmed(ctx, func(q querier) error {
		return q.QueryRow(ctx, `
		WITH old AS (
			SELECT state FROM hookonce_records WHERE sender = $1 AND key = $2 FOR UPDATE
		)
		UPDATE hookonce_records r SET state = 'released', owner = NULL, lease_until = NULL,
			completed_at = NULL, resp_status = NULL, resp_headers = NULL, resp_body = NULL,
			resp_truncated = false, attempts = `+appendAttempt("$3")+`, `+clearPending+`
		FROM old WHERE r.sender = $1 AND r.key = $2
		RETURNING old.state`, sender, key, a).Scan(&was)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("postgres free %s/%s: %w", sender, key, dedupe.ErrNotFound)
	}
	if err != nil {
		return "", fail("free "+sender+"/"+key, err)
	}
	return dedupe.State(was), nil
}

// Forget implements dedupe.Store.
func (s *Store) Forget(ctx context.Context, sender, key string) error {
	var tag pgconn.CommandTag
	err := s.confirmed(ctx, func(q querier) (err error) {
		tag, err = q.Exec(ctx, `DELETE FROM hookonce_records WHERE sender = $1 AND key = $2`, sender, key)
		return err
	})
	if err != nil {
		return fail("forget "+sender+"/"+key, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres forget %s/%s: %w", sender, key, dedupe.ErrNotFound)
	}
	return nil
}

// purgeSQL is Purge's DELETE of one batch of records and of conflicts
// ($1 the batch; $2 the run's cursor, the lower bound; $3 the cut-off when
// byReceived); each answers how many rows went and the largest expires_at
// (received_at) among them, the next call's lower bound.
//
// The expiry cut-off is the database clock read once by a sub-select:
// clock_timestamp() itself is volatile, and a volatile comparison is never
// an index condition, so `expires_at <= clock_timestamp()` walked the
// expires_at index as a filter, fetching every live row's heap tuple,
// whenever fewer than a batch were expired (the last call of every purge:
// the whole table, every minute). The sub-select is an InitPlan, evaluated
// once: an index condition.
//
// The lower bound is an index condition too. The index entries of the rows
// earlier batches deleted stay in the index, dead, until vacuum removes
// them; from the index's start every batch stepped over all of them, so a
// day's purge slowed as it went, the more the larger the store
// (docs/performance.md, "Cost as the store grows"). It is >=, not >: rows
// share an expires_at, and a batch may end among them.
//
// A record with a durable delivery still owed is never removed, whatever
// its expires_at (a deliverer may still be at the site past
// pending_until): the condition is re-checked under the row lock, as the
// live lease is.
//
// The DELETE takes the rows the sub-select locked by their ctid (a TID
// scan). Each ctid is that of the version locked: a row updated since the
// statement's snapshot (a claim took the key again) is locked in its
// newest version and re-checked against the conditions, and the sub-select
// returns that version (PostgreSQL's EvalPlanQual), or skips it when it no
// longer qualifies ("the updated version of the row is returned", as the
// manual's SELECT … FOR UPDATE has it). The lock then keeps the version
// from being updated, deleted or pruned until the commit. The DELETE used
// to find the rows again by (sender, key), a probe of the primary key's
// B-tree per row, four pages each: 5 of a batch's 6 ms at 1 M records. On
// two cores a claim waits out whatever runs beside it, so the batch's
// length was the claims' p99 during a purge (docs/performance.md, round 7).
func purgeSQL(byReceived bool) (recSQL, confSQL string) {
	const removable = `NOT (state = 'processing' AND lease_until > clock_timestamp()) AND pending_since IS NULL`
	col, before := `expires_at`, `<= (SELECT clock_timestamp())`
	if byReceived {
		col, before = `received_at`, `< $3`
	}
	recWhere := col + ` >= $2 AND ` + col + ` ` + before
	recSQL = `
		WITH d AS (
			DELETE FROM hookonce_records WHERE ctid = ANY(ARRAY(
				SELECT ctid FROM hookonce_records
				WHERE ` + recWhere + ` AND ` + removable + `
				ORDER BY ` + col + ` LIMIT $1
				FOR UPDATE SKIP LOCKED))
			RETURNING ` + col + `
		)
		SELECT count(*), max(` + col + `) FROM d`
	confSQL = `
		WITH d AS (
			DELETE FROM hookonce_conflicts WHERE id IN (
				SELECT id FROM hookonce_conflicts WHERE ` + recWhere + `
				ORDER BY ` + col + ` LIMIT $1 FOR UPDATE SKIP LOCKED)
			RETURNING ` + col + `
		)
		SELECT count(*), max(` + col + `) FROM d`
	return recSQL, confSQL
}

// Purge implements dedupe.Store. Each DELETE removes at most one batch
// (req.Limit, or purgeBatch when unbounded, repeated), skips rows another
// transaction holds, and re-checks under the row lock that no live lease
// and no durable delivery still owed protects the row. Whatever req says, it also removes object locks whose
// lease ended more than objectGrace ago (their holders died); they are not
// counted.
//
// Each batch starts where the run's cursor (req.Cursor, or one of this
// call's own when nil) says the previous one ended, and advances it. The
// cursor only narrows what a batch looks at, never what it may delete: a
// row it passes over (locked, under a live lease) is left for the next run,
// which starts from the index's start. Two replicas purging at once each
// have their own cursor; SKIP LOCKED splits the rows between them, and a
// row one of them passed because the other held it is deleted by the other
// or, if that transaction fails, found by the next run.
func (s *Store) Purge(ctx context.Context, req dedupe.PurgeRequest) (int, error) {
	byReceived := !req.ReceivedBefore.IsZero()
	recSQL, confSQL := purgeSQL(byReceived)
	cur := req.Cursor
	if cur == nil {
		cur = new(dedupe.PurgeCursor)
	}
	batch := req.Limit
	if batch <= 0 {
		batch = purgeBatch
	}
	// Each round is one transaction sent in one round trip (BEGIN, the
	// DELETEs, COMMIT as one pgx batch): a batch of records, one of
	// conflicts and one of abandoned object locks, each until it comes back
	// short (one round only when req.Limit is set). As three transactions
	// of a statement at a time, a call of serve's (500 records) took ten
	// round trips and twice as long, 2.5 ms against 1.1 ms at 1 M records
	// (docs/performance.md, round 8); claims that run beside it wait it out.
	removed := 0
	recDone, confDone, objDone := false, false, false
	for {
		var (
			b             pgx.Batch
			n, nConf      int
			last, lastCon *time.Time
			objTag        pgconn.CommandTag
		)
		b.Queue("BEGIN")
		// A purge's commit need not wait for its WAL to reach the disk: a
		// deletion a crash loses is made again by the next run, and a
		// record past its ttl gives way to a claim whether or not it is
		// still there. The claims' commits, which must wait, then share
		// their flushes with fewer.
		b.Queue("SET LOCAL synchronous_commit = off")
		if !recDone {
			b.Queue(recSQL, purgeArgs(batch, cur.Records, req.ReceivedBefore)...).QueryRow(func(row pgx.Row) error {
				return row.Scan(&n, &last)
			})
		}
		if !confDone {
			b.Queue(confSQL, purgeArgs(batch, cur.Conflicts, req.ReceivedBefore)...).QueryRow(func(row pgx.Row) error {
				return row.Scan(&nConf, &lastCon)
			})
		}
		if !objDone {
			b.Queue(purgeObjectsSQL, batch, micros(objectGrace)).Exec(func(tag pgconn.CommandTag) error {
				objTag = tag
				return nil
			})
		}
		b.Queue("COMMIT")
		if err := s.db.SendBatch(ctx, &b).Close(); err != nil {
			return removed, fail("purge", err)
		}
		// Committed: the cursors move past what went.
		removed += n
		if last != nil {
			cur.Records = *last
		}
		if lastCon != nil {
			cur.Conflicts = *lastCon
		}
		recDone = recDone || n < batch
		confDone = confDone || nConf < batch
		objDone = objDone || int(objTag.RowsAffected()) < batch
		if req.Limit > 0 || recDone && confDone && objDone {
			return removed, nil
		}
	}
}

// purgeArgs are purgeSQL's arguments: the batch, the cursor's lower bound
// and, when the purge goes by received_at, the cut-off.
func purgeArgs(batch int, from, receivedBefore time.Time) []any {
	if receivedBefore.IsZero() {
		return []any{batch, lowerBound(from)}
	}
	return []any{batch, lowerBound(from), receivedBefore}
}

// lowerBound is t as a timestamptz parameter, the zero time (a purge
// cursor with no row removed yet, a summary of every kept record) as
// -infinity, before every row: one plan shape either way.
func lowerBound(t time.Time) any {
	if t.IsZero() {
		return pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	}
	return t
}
