package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

var _ dedupe.Deferrer = (*Store)(nil)

// Durable deliveries (dedupe.Deferrer, migration 0008) are the pending_*
// columns of the record itself: no table of their own, so a record and the
// delivery it owes are written together, by one statement, and go together
// (Forget, a claim that takes the record past its ttl). Every time is the
// database clock's, as for claims. Defer, RenewPending and SettlePending
// are fenced writes of one row, sent through the claims' batcher as
// Complete is (Defer is on the request path: one statement, sharing a
// commit with the claims of the moment). TakeDue, which locks rows in
// pending_next_at order rather than key order, runs on a connection of its
// own and never waits for a row lock (SKIP LOCKED).

// clearPending is the SET list that drops a record's durable delivery.
const clearPending = `pending_since = NULL, pending_next_at = NULL, pending_until = NULL, pending_tries = 0,
	pending_owner = NULL, pending_lease_until = NULL`

// deferSQL is Defer's UPDATE, fenced by the processing claim's owner as
// Complete's is: $1 sender, $2 key, $3 owner, $4 status, $5 the answer's
// headers (JSON, or NULL), $6 its body, $7 truncated, $8 retry_for and $9
// the lease in microseconds (0: no lease, due at once). One clock reading
// (n.t) makes since, next, until and the lease agree.
var deferSQL = `
UPDATE hookonce_records r SET state = 'done', owner = NULL, lease_until = NULL, completed_at = n.t,
	resp_status = $4::integer, resp_headers = $5::jsonb, resp_body = $6::bytea, resp_truncated = $7::boolean,
	expires_at = GREATEST(r.expires_at, n.t + $8::bigint * interval '1 microsecond'),
	pending_since = n.t, pending_next_at = n.t,
	pending_until = n.t + $8::bigint * interval '1 microsecond', pending_tries = 0,
	pending_owner = CASE WHEN $9::bigint > 0 THEN $3::text END,
	pending_lease_until = CASE WHEN $9::bigint > 0 THEN n.t + $9::bigint * interval '1 microsecond' END
FROM (SELECT clock_timestamp() AS t) n
WHERE r.sender = $1::text AND r.key = $2::text AND r.owner = $3::text AND r.state = 'processing'`

// pendingWhere fences a deliverer's writes by the delivery's owner
// ($3). As for a claim, a lease that ended and that nobody took since
// still counts as held.
const pendingWhere = ` WHERE sender = $1::text AND key = $2::text AND pending_owner = $3::text AND pending_since IS NOT NULL`

var (
	// renewPendingSQL: $4 the lease in microseconds.
	renewPendingSQL = `UPDATE hookonce_records SET pending_lease_until = clock_timestamp() + $4::bigint * interval '1 microsecond'` + pendingWhere

	// The settles: $4 the attempt (JSON), appended as Complete's is.
	settleDeliveredSQL = `UPDATE hookonce_records SET attempts = ` + appendAttempt("$4") + `, ` + clearPending + pendingWhere
	// … and the site's answer replacing the stored one: $5 status, $6
	// headers (JSON, or NULL), $7 body, $8 truncated.
	settleDeliveredAnswerSQL = `UPDATE hookonce_records SET attempts = ` + appendAttempt("$4") + `, ` + clearPending + `,
	resp_status = $5::integer, resp_headers = $6::jsonb, resp_body = $7::bytea, resp_truncated = $8::boolean` + pendingWhere
	// $5 the wait before the next try, in microseconds.
	settleRetrySQL = `UPDATE hookonce_records SET attempts = ` + appendAttempt("$4") + `,
	pending_owner = NULL, pending_lease_until = NULL, pending_tries = pending_tries + 1,
	pending_next_at = clock_timestamp() + $5::bigint * interval '1 microsecond'` + pendingWhere
	// Released as Free releases: the answer dropped, request and attempts kept.
	settleGiveUpSQL = `UPDATE hookonce_records SET state = 'released', completed_at = NULL,
	resp_status = NULL, resp_headers = NULL, resp_body = NULL, resp_truncated = false,
	attempts = ` + appendAttempt("$4") + `, ` + clearPending + pendingWhere
	// Unknown as Hold makes it: no stored answer (a held record answers
	// 409 until an operator decides), request and attempts kept.
	settleHoldSQL = `UPDATE hookonce_records SET state = 'unknown', completed_at = NULL,
	resp_status = NULL, resp_headers = NULL, resp_body = NULL, resp_truncated = false,
	attempts = ` + appendAttempt("$4") + `, ` + clearPending + pendingWhere
)

// takeDueSQL leases up to $4 due, unheld deliveries of sender $1 to owner
// $2 for $3 microseconds, and returns their records as they stand after
// the take. The candidates are read through hookonce_records_pending in
// pending_next_at order (the clock read once, an InitPlan: an index
// condition) and locked FOR UPDATE SKIP LOCKED: a row another taker (or a
// settle, a claim) holds is passed over, never waited for, and a row
// changed by a transaction that committed meanwhile is judged again on its
// latest version under the lock, so of any number of concurrent takers,
// in any number of processes, one takes a delivery.
var takeDueSQL = `
WITH n AS (SELECT clock_timestamp() AS t),
due AS (
	SELECT sender AS s, key AS k FROM hookonce_records
	WHERE sender = $1::text AND pending_since IS NOT NULL AND pending_next_at <= (SELECT t FROM n)
		AND (pending_owner IS NULL OR pending_lease_until <= (SELECT t FROM n))
	ORDER BY pending_next_at LIMIT $4::bigint
	FOR UPDATE SKIP LOCKED
)
UPDATE hookonce_records r SET pending_owner = $2::text,
	pending_lease_until = (SELECT t FROM n) + $3::bigint * interval '1 microsecond'
FROM due WHERE r.sender = due.s AND r.key = due.k
RETURNING ` + recordPendingCols

// pendingCountsSQL counts the owed deliveries per sender, through
// hookonce_records_pending (only they are in it).
const pendingCountsSQL = `SELECT sender, count(*), min(pending_since) FROM hookonce_records
	WHERE pending_since IS NOT NULL GROUP BY sender ORDER BY sender`

// Defer implements dedupe.Deferrer: one fenced UPDATE (deferSQL), in the
// batch of the moment as Complete's is. Its answer is as certain as
// Complete's: ErrNotOwner when owner does not hold the processing claim;
// an error wrapping ErrUnavailable (ErrNotConfirmed as well when the
// server warned) when the commit's fate is not known, for the caller to
// look with GetConfirmed, whose record carries Pending.
func (s *Store) Defer(ctx context.Context, sender, key, owner string, d dedupe.DeferRequest) error {
	var headers any // SQL NULL, or the JSON text (see jsonParam)
	if len(d.Ack.Header) > 0 {
		h, err := jsonParam(d.Ack.Header)
		if err != nil {
			return fmt.Errorf("postgres defer %s/%s: encode headers: %w", sender, key, err)
		}
		headers = h
	}
	body := d.Ack.Body
	if body == nil {
		body = []byte{}
	}
	return s.fenced(ctx, false, "defer", sender, key, deferSQL,
		owner, int32(d.Ack.Status), headers, body, d.Ack.Truncated, micros(d.RetryFor), micros(max(d.Lease, 0)))
}

// TakeDue implements dedupe.Deferrer: one statement (takeDueSQL) on a
// connection of its own, never the claims' batcher (its rows are locked in
// pending_next_at order, not in the batches' key order), confirmed like
// the delivery's writes: a take the server warned about is not answered,
// and its deliveries are taken again once its lease ends.
func (s *Store) TakeDue(ctx context.Context, sender, owner string, lease time.Duration, n int) ([]dedupe.Record, error) {
	if n <= 0 {
		return nil, nil
	}
	var out []dedupe.Record
	err := s.confirmed(ctx, func(q querier) error {
		out = out[:0]
		rows, err := q.Query(ctx, takeDueSQL, sender, owner, micros(lease), int64(n))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			rec, err := scanRecordPending(rows)
			if err != nil {
				return err
			}
			out = append(out, rec)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fail("take due "+sender, err)
	}
	// RETURNING keeps no order: oldest next try first, as taken.
	slices.SortFunc(out, func(a, b dedupe.Record) int {
		return cmp.Or(a.Pending.NextAt.Compare(b.Pending.NextAt), cmp.Compare(a.Key, b.Key))
	})
	return out, nil
}

// RenewPending implements dedupe.Deferrer: a fenced UPDATE of the lease,
// in the batch of the moment.
func (s *Store) RenewPending(ctx context.Context, sender, key, owner string, lease time.Duration) error {
	return s.fenced(ctx, false, "renew pending", sender, key, renewPendingSQL, owner, micros(lease))
}

// SettlePending implements dedupe.Deferrer: one fenced UPDATE per
// outcome, in the batch of the moment.
func (s *Store) SettlePending(ctx context.Context, sender, key, owner string, st dedupe.PendingSettle) error {
	op := "settle pending"
	a, err := encodeAttempt(st.Attempt)
	if err != nil {
		return fmt.Errorf("postgres %s %s/%s: %w", op, sender, key, err)
	}
	switch st.Outcome {
	case dedupe.SettleDelivered:
		if st.Response == nil {
			return s.fenced(ctx, false, op, sender, key, settleDeliveredSQL, owner, a)
		}
		var headers any
		if len(st.Response.Header) > 0 {
			h, err := jsonParam(st.Response.Header)
			if err != nil {
				return fmt.Errorf("postgres %s %s/%s: encode headers: %w", op, sender, key, err)
			}
			headers = h
		}
		body := st.Response.Body
		if body == nil {
			body = []byte{}
		}
		return s.fenced(ctx, false, op, sender, key, settleDeliveredAnswerSQL,
			owner, a, int32(st.Response.Status), headers, body, st.Response.Truncated)
	case dedupe.SettleRetry:
		return s.fenced(ctx, false, op, sender, key, settleRetrySQL, owner, a, micros(max(st.RetryIn, 0)))
	case dedupe.SettleGiveUp:
		return s.fenced(ctx, false, op, sender, key, settleGiveUpSQL, owner, a)
	case dedupe.SettleHold:
		return s.fenced(ctx, false, op, sender, key, settleHoldSQL, owner, a)
	}
	return fmt.Errorf("postgres %s %s/%s: unknown outcome %d", op, sender, key, st.Outcome)
}

// PendingCounts implements dedupe.Deferrer: one GROUP BY over
// hookonce_records_pending.
func (s *Store) PendingCounts(ctx context.Context) ([]dedupe.PendingCount, error) {
	rows, err := s.db.Query(ctx, pendingCountsSQL)
	if err != nil {
		return nil, fail("pending counts", err)
	}
	defer rows.Close()
	var out []dedupe.PendingCount
	for rows.Next() {
		var c dedupe.PendingCount
		if err := rows.Scan(&c.Sender, &c.N, &c.Oldest); err != nil {
			return nil, fail("pending counts", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("pending counts", err)
	}
	return out, nil
}
