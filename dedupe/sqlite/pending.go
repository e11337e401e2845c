package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// Durable deliveries (dedupe.Deferrer; a sender's ack: durable). What is
// owed lives in the record's own row, in the pending_* columns of schema
// v8 (pending_since = 0: nothing owed), so a record and its delivery are
// written together and Get, List, Free, Forget and Purge see both. The
// owed records are also in the partial index records_pending (sender,
// pending_next_at, pending_since), which is all TakeDue and PendingCounts
// read. Every write is an item of the writer's group commit, judged by
// this process's clock as claims are; one statement each, so Defer adds
// one UPDATE to the request path, and TakeDue, being one UPDATE run by the
// single writer (or, with two processes on one file, under BEGIN
// IMMEDIATE's write lock), leases a delivery to one taker.

var _ dedupe.Deferrer = (*Store)(nil)

// Defer implements dedupe.Deferrer: one UPDATE fenced by the processing
// claim's owner, as Complete is, whose commit is on disk before Defer
// returns also under synchronous=normal (its batch commits under FULL).
func (s *Store) Defer(ctx context.Context, sender, key, owner string, d dedupe.DeferRequest) error {
	op := "defer " + sender + "/" + key
	headers, err := json.Marshal(d.Ack.Header)
	if err != nil {
		return fmt.Errorf("sqlite %s: encode headers: %w", op, err)
	}
	body := nonNil(d.Ack.Body)
	// Synced whatever the store's synchronous setting: the sender is
	// answered once Defer returns and will not send the event again.
	return s.writeSynced(ctx, op, func(ctx context.Context, tx *sql.Tx) error {
		now := time.Now()
		until := ms(now.Add(d.RetryFor))
		holder, lease := "", int64(0)
		if d.Lease > 0 {
			holder, lease = owner, ms(now.Add(d.Lease))
		}
		res, err := s.ws.exec(ctx, tx, qDefer, ms(now), d.Ack.Status, headers, body, d.Ack.Truncated, until,
			ms(now), ms(now), until, holder, lease, sender, key, owner)
		if err != nil {
			return unavailable(op, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return unavailable(op, err)
		} else if n == 0 {
			return notOwner(op)
		}
		return nil
	})
}

// TakeDue implements dedupe.Deferrer.
func (s *Store) TakeDue(ctx context.Context, sender, owner string, lease time.Duration, n int) ([]dedupe.Record, error) {
	op := "take due " + sender
	if owner == "" {
		return nil, fmt.Errorf("sqlite %s: empty owner", op)
	}
	if n <= 0 {
		return nil, nil
	}
	var out []dedupe.Record
	err := s.write(ctx, op, func(ctx context.Context, tx *sql.Tx) error {
		now := time.Now()
		rows, err := s.ws.query(ctx, tx, qTakeDue, owner, ms(now.Add(lease)), sender, ms(now), ms(now), n)
		if err != nil {
			return unavailable(op, err)
		}
		defer rows.Close()
		for rows.Next() {
			rec, err := scanRecord(rows)
			if err != nil {
				// The rows are leased already: fail the item, so that its
				// savepoint (or the lone transaction) undoes the lease.
				return fmt.Errorf("sqlite %s: %w", op, err)
			}
			out = append(out, rec)
		}
		if err := rows.Err(); err != nil {
			return unavailable(op, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// RETURNING gives no order: oldest NextAt first, as documented.
	slices.SortFunc(out, func(a, b dedupe.Record) int {
		return cmp.Or(a.Pending.NextAt.Compare(b.Pending.NextAt), cmp.Compare(a.Key, b.Key))
	})
	return out, nil
}

// RenewPending implements dedupe.Deferrer: fenced by the delivery's owner
// as Renew is by the claim's.
func (s *Store) RenewPending(ctx context.Context, sender, key, owner string, lease time.Duration) error {
	return s.fenced(ctx, "renew pending "+sender+"/"+key, qRenewPending, ms(time.Now().Add(lease)), sender, key, owner)
}

// SettlePending implements dedupe.Deferrer: the attempt is appended as
// Complete appends it, in the same item that checks the owner.
func (s *Store) SettlePending(ctx context.Context, sender, key, owner string, st dedupe.PendingSettle) error {
	op := "settle pending " + sender + "/" + key
	var (
		query string
		args  []any
	)
	switch st.Outcome {
	case dedupe.SettleDelivered:
		query = qSettleDelivered
		if r := st.Response; r != nil {
			headers, err := json.Marshal(r.Header)
			if err != nil {
				return fmt.Errorf("sqlite %s: encode headers: %w", op, err)
			}
			query, args = qSettleDeliveredAnswer, []any{ms(time.Now()), r.Status, headers, nonNil(r.Body), r.Truncated}
		}
	case dedupe.SettleRetry:
		query, args = qSettleRetry, []any{ms(time.Now().Add(st.RetryIn))}
	case dedupe.SettleGiveUp:
		query = qSettleGiveUp
	case dedupe.SettleHold:
		query = qSettleHold
	default:
		return fmt.Errorf("sqlite %s: unknown outcome %d", op, st.Outcome)
	}
	return s.settleFenced(ctx, op, qSelectPendingAttempts, sender, key, owner, st.Attempt, query, args...)
}

// PendingCounts implements dedupe.Deferrer: one GROUP BY over
// records_pending (it holds sender and pending_since, so the table is not
// read), on the read pool.
func (s *Store) PendingCounts(ctx context.Context) ([]dedupe.PendingCount, error) {
	return pendingCounts(ctx, s.r)
}

// PendingCounts is the Store's, for the read-only tools.
func (r *reader) PendingCounts(ctx context.Context) (out []dedupe.PendingCount, err error) {
	err = r.read("pending counts", func(db *sql.DB) error {
		out, err = pendingCounts(ctx, db)
		return err
	})
	return out, err
}

const qPendingCounts = `SELECT sender, count(*), min(pending_since) FROM records WHERE pending_since > 0 GROUP BY sender ORDER BY sender`

func pendingCounts(ctx context.Context, db *sql.DB) ([]dedupe.PendingCount, error) {
	rows, err := db.QueryContext(ctx, qPendingCounts)
	if err != nil {
		return nil, unavailable("pending counts", err)
	}
	var out []dedupe.PendingCount
	for rows.Next() {
		var c dedupe.PendingCount
		var oldest int64
		if err := rows.Scan(&c.Sender, &c.N, &oldest); err != nil {
			rows.Close()
			return nil, unavailable("pending counts", err)
		}
		c.Oldest = fromMS(oldest)
		out = append(out, c)
	}
	if err := closeRows(rows); err != nil {
		return nil, unavailable("pending counts", err)
	}
	return out, nil
}
