package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/jackc/pgx/v5"
)

// The conditions under which a stored row gives way to a claim, judged at
// time T: the record is past its ttl (and no live lease protects it), it was
// released (any payload hash), or it is processing under an expired lease
// with the same payload hash.
func freshCond(r, t string) string {
	return fmt.Sprintf("(%[1]s.expires_at <= %[2]s AND NOT (%[1]s.state = 'processing' AND %[1]s.lease_until > %[2]s))", r, t)
}

func releasedCond(r string) string {
	return fmt.Sprintf("(%s.state = 'released')", r)
}

// newCond: the claim starts the record afresh (an expired or a released
// one) rather than taking over a claim in flight.
func newCond(r, t string) string {
	return "(" + freshCond(r, t) + " OR " + releasedCond(r) + ")"
}

func takeoverCond(r, t, hash string) string {
	return fmt.Sprintf("(%[1]s.state = 'processing' AND %[1]s.lease_until <= %[2]s AND %[1]s.payload_hash = %[3]s)", r, t, hash)
}

// readSQL reads the row a claim is about, and whether it would give way to
// this claim now (by the database clock), in Claim's loop (after a first
// try, firstSQL, that found a record giving way or found nothing). Nothing
// is written or locked.
var readSQL = `
SELECT (` + newCond("r", "n.t") + ` OR ` + takeoverCond("r", "n.t", "$3::text") + `), ` + recordCols + `
FROM hookonce_records r, (SELECT clock_timestamp() AS t) n
WHERE r.sender = $1::text AND r.key = $2::text`

// claimSQL takes the claim in one statement, run only when the read found
// no row or one that gives way. Its ON CONFLICT … DO UPDATE re-decides on the
// latest committed row version under the row lock, so that of any number of
// concurrent claimers (in any number of processes) exactly one wins a free
// key, a released record or an expired lease; the others get no row back.
// EXCLUDED.received_at is the database clock at the insert.
//
// A released record is claimed as a new one: payload hash, request body and
// head are the new delivery's, received_at and expires_at are set as for a
// new record (now, now + ttl: the retry is a delivery of its own, and its
// answer must be kept a full ttl), hits and takeovers start again from 0
// (they count replays and takeovers of the claim at hand); only the
// attempts are kept. A record past its ttl is gone as far as the contract
// goes: it starts with no attempts, released or not, and with no durable
// delivery owed (dedupe.Deferrer: a record past its ttl whose pending
// delivery outlived pending_until; a released or processing record has
// none, so the statement clears the pending columns whatever it takes).
var claimSQL = `
INSERT INTO hookonce_records AS r
	(sender, key, state, payload_hash, owner, lease_until, received_at, expires_at, request_body, request_head, fingerprint)
SELECT $1::text, $2::text, 'processing', $3::text, $4::text,
	n.t + $5::bigint * interval '1 microsecond', n.t,
	n.t + $6::bigint * interval '1 microsecond', $7::bytea, $8::jsonb, $9::bytea
FROM (SELECT clock_timestamp() AS t) n
ON CONFLICT (sender, key) DO UPDATE SET
	state = 'processing',
	owner = EXCLUDED.owner,
	lease_until = EXCLUDED.lease_until,
	payload_hash = EXCLUDED.payload_hash,
	received_at = CASE WHEN ` + newCond("r", "EXCLUDED.received_at") + ` THEN EXCLUDED.received_at ELSE r.received_at END,
	expires_at = CASE WHEN ` + newCond("r", "EXCLUDED.received_at") + ` THEN EXCLUDED.expires_at ELSE r.expires_at END,
	completed_at = NULL,
	hits = CASE WHEN ` + newCond("r", "EXCLUDED.received_at") + ` THEN 0 ELSE r.hits END,
	takeovers = CASE WHEN ` + newCond("r", "EXCLUDED.received_at") + ` THEN 0 ELSE r.takeovers + 1 END,
	resp_status = NULL, resp_headers = NULL, resp_body = NULL, resp_truncated = false,
	request_body = CASE WHEN ` + newCond("r", "EXCLUDED.received_at") + ` THEN EXCLUDED.request_body ELSE r.request_body END,
	request_head = CASE WHEN ` + newCond("r", "EXCLUDED.received_at") + ` THEN EXCLUDED.request_head ELSE r.request_head END,
	fingerprint = CASE WHEN ` + newCond("r", "EXCLUDED.received_at") + ` THEN EXCLUDED.fingerprint ELSE r.fingerprint END,
	attempts = CASE WHEN ` + freshCond("r", "EXCLUDED.received_at") + ` THEN EXCLUDED.attempts ELSE r.attempts END,
	pending_since = NULL, pending_next_at = NULL, pending_until = NULL, pending_tries = 0,
	pending_owner = NULL, pending_lease_until = NULL
WHERE ` + newCond("r", "EXCLUDED.received_at") + ` OR ` + takeoverCond("r", "EXCLUDED.received_at", "EXCLUDED.payload_hash") + `
RETURNING ` + recordCols

// firstSQL is a delivery's first try at a claim, one statement: it inserts
// the record when the key is free (won) and otherwise reads the row that is
// there, with whether it gives way to this claim now (claimable), as
// readSQL does. ON CONFLICT DO NOTHING neither writes nor locks the row
// that is there. Its parameters are claimSQL's.
//
// It answers no row at all when the key was inserted by a transaction that
// committed after this statement's snapshot was taken (the insert waited
// for it, and the read cannot see it): Claim then reads again in a
// statement of its own.
//
// A won row carries only what the database chose, the lease and the times
// (the other columns NULL): the rest is the claim's own request, which
// Claim fills in (claimWon) as the record holds it, rather than have the
// server send back the key, hash, owner, body, head and fingerprint it
// was just given, and the client decode them (a head's JSON included).
var firstSQL = `
WITH ins AS (
` + claimSQL[:strings.Index(claimSQL, "ON CONFLICT")] + `ON CONFLICT (sender, key) DO NOTHING
RETURNING lease_until, received_at, expires_at
)
SELECT true, false, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, ins.lease_until,
	ins.received_at, NULL::timestamptz, ins.expires_at, NULL::bigint, NULL::bigint,
	NULL::integer, NULL::jsonb, NULL::bytea, NULL::boolean, NULL::bytea,
	NULL::jsonb, NULL::jsonb, NULL::bytea
FROM ins
UNION ALL
SELECT false, (` + newCond("r", "n.t") + ` OR ` + takeoverCond("r", "n.t", "$3::text") + `), ` + recordCols + `
FROM hookonce_records r, (SELECT clock_timestamp() AS t) n
WHERE r.sender = $1::text AND r.key = $2::text AND NOT EXISTS (SELECT 1 FROM ins)`

// Claim implements dedupe.Store.
//
// The first try (firstSQL, batched: see claimBatcher) claims a new key or
// reads the row that is there, in one statement and one round trip shared
// with the claims and writes waiting at the same moment.
// A row that does not give way is answered from that read: nothing is
// written or locked. Only an expired or released record or an expired
// lease goes on to the loop below, as does a first try whose batch failed:
// a read, then the claim statement, which re-decides atomically. When that
// statement returns no row (another claimer won, or the row changed in
// between), the loop reads again in a new statement; a row that vanished or
// expired in between is tried again, at most claimAttempts times.
func (s *Store) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	head, err := encodeRequestHead(req.Request)
	if err != nil {
		return dedupe.ClaimResult{}, fmt.Errorf("postgres %s: %w", claimOp(req), err)
	}
	req.ClaimFingerprint()
	it := getItem(req.Sender, req.Key, req.PayloadHash,
		req.Owner, micros(req.Lease), micros(req.TTL), req.RequestBody, head, req.Fingerprint)
	defer putItem(it)
	args := it.args
	if !s.solo {
		err := s.first(ctx, it)
		switch {
		case err == nil && it.won:
			return dedupe.ClaimResult{Found: dedupe.Claimed, Record: claimWon(req, it.rec)}, nil
		case err == nil && it.found && !it.claimable:
			return dedupe.ClaimResult{Found: dedupe.Standing(it.rec, req.PayloadHash), Record: it.rec}, nil
		case err == nil, errors.Is(err, errSolo):
			// A record that gives way, one that vanished between the two
			// statements, or a batch to try again alone: the loop.
		default:
			return dedupe.ClaimResult{}, s.ambiguousClaim(ctx, req, err)
		}
	}
	for range claimAttempts {
		var claimable bool
		s.loopReads.Add(1)
		rec, err := scanRecord(s.db.QueryRow(ctx, readSQL, req.Sender, req.Key, req.PayloadHash), &claimable)
		switch {
		case err == nil && !claimable:
			return dedupe.ClaimResult{Found: dedupe.Standing(rec, req.PayloadHash), Record: rec}, nil
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return dedupe.ClaimResult{}, fail(claimOp(req), err)
		}
		err = errSolo
		if !s.solo {
			rec, err = s.claim(ctx, it)
		}
		if errors.Is(err, errSolo) {
			err = s.confirmed(ctx, func(c querier) (err error) {
				rec, err = scanRecord(c.QueryRow(ctx, claimSQL, args...))
				return err
			})
		}
		switch {
		case err == nil:
			return ownClaim(rec), nil
		case !errors.Is(err, pgx.ErrNoRows):
			return dedupe.ClaimResult{}, s.ambiguousClaim(ctx, req, err)
		}
	}
	return dedupe.ClaimResult{}, fmt.Errorf("postgres %s: %w: the record kept changing under %d attempts", claimOp(req), dedupe.ErrUnavailable, claimAttempts)
}

// claimWon is the record firstSQL inserted for req, as a read of it
// answers: times is the won row (its lease and times), the rest is what
// the insert wrote (a new record: processing, no hits, takeovers,
// attempts or answer; the request's body, head and fingerprint). Like
// SQLite's claim, the record shares req's request rather than a copy.
func claimWon(req dedupe.ClaimRequest, times dedupe.Record) dedupe.Record {
	return dedupe.Record{Sender: req.Sender, Key: req.Key, State: dedupe.StateProcessing, PayloadHash: req.PayloadHash,
		Owner: req.Owner, LeaseUntil: times.LeaseUntil, ReceivedAt: times.ReceivedAt, ExpiresAt: times.ExpiresAt,
		RequestBody: req.RequestBody, Request: req.Request, Fingerprint: req.Fingerprint}
}

// claimOp names a claim in its errors (made only for an error: a claim
// that succeeds allocates no message).
func claimOp(req dedupe.ClaimRequest) string { return "claim " + req.Sender + "/" + req.Key }

func ownClaim(rec dedupe.Record) dedupe.ClaimResult {
	if rec.Takeovers > 0 {
		return dedupe.ClaimResult{Found: dedupe.TakenOver, Record: rec}
	}
	return dedupe.ClaimResult{Found: dedupe.Claimed, Record: rec}
}

// ambiguousClaim handles an error from the claim statement. When the
// connection broke after the statement was sent, or the commit was not
// confirmed (errUnconfirmed: it may be the primary's alone), the claim may
// have been committed under our owner token; if the context still allows a
// read, look, and say so. Either way the answer is an error, never a
// guess, and never ownership: what the read sees may not survive a
// failover (trap 35). The caller does not forward, and a claim that did
// land frees after its lease.
func (s *Store) ambiguousClaim(ctx context.Context, req dedupe.ClaimRequest, err error) error {
	op := claimOp(req)
	if ctx.Err() != nil || !isUnavailable(err) {
		return fail(op, err)
	}
	rec, rerr := s.Get(ctx, req.Sender, req.Key)
	if rerr == nil && rec.State == dedupe.StateProcessing && rec.Owner == req.Owner {
		return fmt.Errorf("postgres %s: %w: %w (the claim is on the server, not confirmed; it frees after its lease)", op, dedupe.ErrUnavailable, err)
	}
	return fail(op, err)
}
