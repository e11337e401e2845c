package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/jackc/pgx/v5/pgconn"
)

// fenced runs a write that applies only while owner holds the row (a
// processing claim; an object lock when objects is set); zero rows means
// someone else does (or nobody): ErrNotOwner. Its parameters are $1 sender
// (scope), $2 key (object), then args.
func (s *Store) fenced(ctx context.Context, objects bool, op, sender, key, query string, args ...any) error {
	n, err := s.write(ctx, objects, op, sender, key, query, args...)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("postgres %s %s/%s: %w", op, sender, key, dedupe.ErrNotOwner)
	}
	return nil
}

// write runs a write of hookonce_records (of hookonce_objects when objects
// is set; $1 sender or scope, $2 key or object, then args) through the
// batcher, so that concurrent writes share a commit (claimBatcher), or
// alone when its batch aborted or batching is off, and answers how many
// rows it wrote. It returns when ctx ends, whatever the batch is doing.
func (s *Store) write(ctx context.Context, objects bool, op, sender, key, query string, args ...any) (int64, error) {
	it := getItem(sender, key)
	defer putItem(it)
	it.args = append(it.args, args...)
	args = it.args
	tag, err := pgconn.CommandTag{}, errSolo
	if !s.solo {
		tag, err = s.exec(ctx, objects, query, it)
	}
	if errors.Is(err, errSolo) {
		err = s.confirmed(ctx, func(c querier) (err error) {
			tag, err = c.Exec(ctx, query, args...)
			return err
		})
	}
	if err != nil {
		return 0, fail(op+" "+sender+"/"+key, err)
	}
	return tag.RowsAffected(), nil
}

const ownerWhere = ` WHERE sender = $1 AND key = $2 AND owner = $3 AND state = 'processing'`

// appendAttempt is the attempts column with the attempt in parameter p
// appended and only the latest dedupe.MaxAttempts kept, oldest first. It
// runs in the fenced UPDATE itself, on the row it locked: no read-modify-
// write from the client. Below the bound (nearly always) it is a plain
// append; only a full list is taken apart to drop its oldest.
func appendAttempt(p string) string {
	return fmt.Sprintf(`CASE WHEN jsonb_array_length(attempts) < %[2]d THEN attempts || jsonb_build_array(%[1]s::jsonb)
		ELSE (SELECT COALESCE(jsonb_agg(a.e ORDER BY a.i), '[]'::jsonb)
		FROM jsonb_array_elements(attempts || jsonb_build_array(%[1]s::jsonb)) WITH ORDINALITY AS a(e, i)
		WHERE a.i > jsonb_array_length(attempts) + 1 - %[2]d) END`, p, dedupe.MaxAttempts)
}

// Complete implements dedupe.Store.
func (s *Store) Complete(ctx context.Context, sender, key, owner string, resp dedupe.Response, att dedupe.Attempt) error {
	var headers any // SQL NULL, or the JSON text (see jsonParam)
	if len(resp.Header) > 0 {
		headers = encodeHeader(resp.Header)
	}
	a, err := encodeAttempt(att)
	if err != nil {
		return fmt.Errorf("postgres complete %s/%s: %w", sender, key, err)
	}
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	return s.fenced(ctx, false, "complete", sender, key, completeSQL,
		owner, int32(resp.Status), headers, body, resp.Truncated, a)
}

// completeSQL is Complete's fenced UPDATE: $1 sender, $2 key, $3 owner,
// $4 status, $5 response headers (JSON, or NULL), $6 response body, $7
// truncated, $8 the attempt (JSON), appended to the record's attempts.
var completeSQL = `
UPDATE hookonce_records SET state = 'done', owner = NULL, lease_until = NULL,
	completed_at = clock_timestamp(), resp_status = $4, resp_headers = $5::jsonb,
	resp_body = $6, resp_truncated = $7, attempts = ` + appendAttempt("$8") + ownerWhere

// NewEventStatements answers the two statements a new event costs the
// store, as the store sends them, for benchmarks that want a reference
// doing exactly the same work outside hookonce (bench/compare runs them
// under pgbench). The store sends them inside group-committed batches
// (see claimBatcher); a reference that runs each in a transaction of its
// own pays a commit per statement.
//
// first is a delivery's first try (firstSQL), which claims a key that is
// not there: $1 sender, $2 key, $3 payload hash, $4 owner, $5 lease and
// $6 ttl in microseconds, $7 the request body (bytea), $8 the request
// head (JSON, or NULL), $9 the fingerprint (bytea, or NULL). It answers a row of two booleans (inserted,
// claimable) and the record's columns: of a key it inserted, only the
// lease and the times (the others NULL: the store knows them, its claim
// sent them), of a key that was there, the whole record.
//
// complete is Complete's UPDATE, fenced by the owner: $1 sender, $2 key,
// $3 owner, $4 status, $5 the response headers (JSON, or NULL), $6 the
// response body (bytea), $7 truncated, $8 the attempt (JSON, as the
// attempts column holds each). It updates one row when $3 holds the
// processing claim, none otherwise.
func NewEventStatements() (first, complete string) {
	return firstSQL, completeSQL
}

// Release implements dedupe.Store: the record stays, released, with its
// payload hash, request and attempts; the next delivery claims it as new.
func (s *Store) Release(ctx context.Context, sender, key, owner string, att dedupe.Attempt) error {
	return s.endClaim(ctx, "release", releaseSQL, sender, key, owner, att)
}

// Hold implements dedupe.Store.
func (s *Store) Hold(ctx context.Context, sender, key, owner string, att dedupe.Attempt) error {
	return s.endClaim(ctx, "hold", holdSQL, sender, key, owner, att)
}

// endClaimSQL ends owner's processing claim in state, the attempt ($4)
// appended.
func endClaimSQL(state string) string {
	return `UPDATE hookonce_records SET state = '` + state + `', owner = NULL, lease_until = NULL,
		attempts = ` + appendAttempt("$4") + ownerWhere
}

var (
	releaseSQL = endClaimSQL("released")
	holdSQL    = endClaimSQL("unknown")
)

func (s *Store) endClaim(ctx context.Context, op, query, sender, key, owner string, att dedupe.Attempt) error {
	a, err := encodeAttempt(att)
	if err != nil {
		return fmt.Errorf("postgres %s %s/%s: %w", op, sender, key, err)
	}
	return s.fenced(ctx, false, op, sender, key, query, owner, a)
}

// Renew implements dedupe.Store.
func (s *Store) Renew(ctx context.Context, sender, key, owner string, lease time.Duration) error {
	return s.fenced(ctx, false, "renew", sender, key,
		`UPDATE hookonce_records SET lease_until = clock_timestamp() + $4::bigint * interval '1 microsecond'`+ownerWhere,
		owner, micros(lease))
}

// RecordConflict implements dedupe.Store. A zero ReceivedAt means now; a
// zero ExpiresAt means 72h after it.
func (s *Store) RecordConflict(ctx context.Context, c dedupe.Conflict) error {
	op := "record conflict " + c.Sender + "/" + c.Key
	head, err := encodeRequestHead(c.Request)
	if err != nil {
		return fmt.Errorf("postgres %s: %w", op, err)
	}
	var body []byte
	if c.Request != nil {
		body = c.Body
		if body == nil {
			body = []byte{}
		}
	}
	_, err = s.db.Exec(ctx, `
		INSERT INTO hookonce_conflicts (sender, key, stored_hash, received_hash, received_at, changed_paths, expires_at,
			diff_kind, shadow, request_head, request_body, body_truncated, answered_duplicate)
		SELECT $1, $2, $3, $4, n.t, $6, COALESCE($7::timestamptz, n.t + interval '72 hours'), $8, $9, $10, $11, $12, $13
		FROM (SELECT COALESCE($5::timestamptz, clock_timestamp()) AS t) n`,
		c.Sender, c.Key, c.StoredHash, c.ReceivedHash, optTime(c.ReceivedAt), c.ChangedPaths, optTime(c.ExpiresAt),
		c.DiffKind, c.Shadow, head, body, c.BodyTruncated, c.AnsweredDuplicate)
	if err != nil {
		return fail(op, err)
	}
	return nil
}

// AddHits implements dedupe.Store: the whole batch is one statement. Rows are
// locked in key order so that two replicas flushing overlapping batches
// cannot deadlock.
func (s *Store) AddHits(ctx context.Context, hits []dedupe.Hit) error {
	if len(hits) == 0 {
		return nil
	}
	senders := make([]string, len(hits))
	keys := make([]string, len(hits))
	ns := make([]int64, len(hits))
	for i, h := range hits {
		senders[i], keys[i], ns[i] = h.Sender, h.Key, h.N
	}
	_, err := s.db.Exec(ctx, `
		WITH h AS (
			SELECT s, k, sum(n)::bigint AS n
			FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(s, k, n)
			GROUP BY s, k
		), l AS (
			SELECT r.sender, r.key, h.n FROM hookonce_records r
			JOIN h ON r.sender = h.s AND r.key = h.k
			ORDER BY r.sender, r.key
			FOR UPDATE OF r
		)
		UPDATE hookonce_records r SET hits = r.hits + l.n
		FROM l WHERE r.sender = l.sender AND r.key = l.key`,
		senders, keys, ns)
	if err != nil {
		return fail(fmt.Sprintf("add hits (%d)", len(hits)), err)
	}
	return nil
}
