package postgres

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/jackc/pgx/v5"
)

// Column list shared by every read of a record.
const recordCols = `sender, key, state, payload_hash, COALESCE(owner, ''), lease_until,
	received_at, completed_at, expires_at, hits, takeovers,
	resp_status, resp_headers, resp_body, resp_truncated, request_body,
	request_head, attempts, fingerprint`

// pendingCols are a record's durable delivery (migration 0008), read after
// recordCols (recordPendingCols) by the reads that show a record whole:
// Get, List, GetConfirmed, TakeDue. The claim statements leave them out: a
// claim's answer needs no Pending (a record a claim takes has none), and
// firstSQL stays the one statement a new event costs (NewEventStatements).
const pendingCols = `pending_since, pending_next_at, pending_until, pending_tries,
	COALESCE(pending_owner, ''), pending_lease_until`

const recordPendingCols = recordCols + `, ` + pendingCols

// attemptJSON is one element of the attempts column. Times keep every digit
// Go gives them (RFC 3339 with nanoseconds), durations are whole
// nanoseconds: every field round-trips exactly.
type attemptJSON struct {
	At         time.Time `json:"at"`
	By         string    `json:"by"`
	Outcome    string    `json:"outcome"`
	Status     int       `json:"status"`
	DurationNS int64     `json:"duration_ns"`
	Replica    string    `json:"replica"`
	WaitNS     int64     `json:"wait_ns,omitempty"`
}

// requestHeadJSON is the request_head column.
type requestHeadJSON struct {
	Method string      `json:"method"`
	URI    string      `json:"uri"`
	Header http.Header `json:"header"`
	Remote string      `json:"remote_addr,omitempty"`
}

func encodeAttempt(a dedupe.Attempt) (string, error) {
	s, err := jsonParam(attemptJSON{At: a.At.UTC(), By: a.By, Outcome: a.Outcome, Status: a.Status,
		DurationNS: int64(a.Duration), Replica: a.Replica, WaitNS: int64(a.Wait)})
	if err != nil {
		return "", fmt.Errorf("encode attempt: %w", err)
	}
	return s, nil
}

// JSON parameters (the jsonb columns) are passed as a Go string, or as
// nil for SQL NULL, never as []byte: in the exec modes that send no
// statement description (default_query_exec_mode=exec, simple_protocol,
// which work behind PgBouncer's transaction pooling) pgx encodes a []byte
// as bytea text (\x7b22…), which the server then fails to parse as JSON.
// A string is the JSON text itself in every mode.

// jsonParam is v marshalled to JSON, as a string parameter.
func jsonParam(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// encodeRequestHead answers nil (SQL NULL) when no request is to be kept,
// else the JSON text as a string (see jsonParam).
func encodeRequestHead(r *dedupe.StoredRequest) (any, error) {
	if r == nil {
		return nil, nil
	}
	s, err := jsonParam(requestHeadJSON{Method: r.Method, URI: r.URI, Header: r.Header, Remote: r.RemoteAddr})
	if err != nil {
		return nil, fmt.Errorf("encode request head: %w", err)
	}
	return s, nil
}

// scanRecord scans recordCols, after the extra destinations given first.
func scanRecord(row pgx.Row, extra ...any) (dedupe.Record, error) {
	return scanRecordTail(row, nil, extra...)
}

// scanRecordPending scans recordPendingCols.
func scanRecordPending(row pgx.Row) (dedupe.Record, error) {
	var (
		since, next, until, lease *time.Time
		tries                     int32
		owner                     string
	)
	r, err := scanRecordTail(row, []any{&since, &next, &until, &tries, &owner, &lease})
	if err != nil || since == nil {
		return r, err
	}
	p := &dedupe.Pending{Since: *since, Tries: int(tries), Owner: owner}
	if next != nil {
		p.NextAt = *next
	}
	if until != nil {
		p.Until = *until
	}
	if lease != nil {
		p.LeaseUntil = *lease
	}
	r.Pending = p
	return r, nil
}

// scanRecordTail scans recordCols, after the extra destinations given
// first and before those of tail.
func scanRecordTail(row pgx.Row, tail []any, extra ...any) (dedupe.Record, error) {
	var (
		r                  dedupe.Record
		state              string
		lease, completed   *time.Time
		status             *int32
		headers, body, req []byte
		head, attempts, fp []byte
		truncated          bool
	)
	dest := append(extra, &r.Sender, &r.Key, &state, &r.PayloadHash, &r.Owner, &lease,
		&r.ReceivedAt, &completed, &r.ExpiresAt, &r.Hits, &r.Takeovers,
		&status, &headers, &body, &truncated, &req, &head, &attempts, &fp)
	dest = append(dest, tail...)
	if err := row.Scan(dest...); err != nil {
		return dedupe.Record{}, err
	}
	r.State = dedupe.State(state)
	if lease != nil {
		r.LeaseUntil = *lease
	}
	if completed != nil {
		r.CompletedAt = *completed
	}
	r.RequestBody, r.Fingerprint = req, fp
	if head != nil {
		var h requestHeadJSON
		if err := json.Unmarshal(head, &h); err != nil {
			return dedupe.Record{}, fmt.Errorf("decode stored request head: %w", err)
		}
		r.Request = &dedupe.StoredRequest{Method: h.Method, URI: h.URI, Header: h.Header, RemoteAddr: h.Remote}
	}
	if len(attempts) > 0 && string(attempts) != "[]" { // a new record's are "[]": nothing to decode
		var as []attemptJSON
		if err := json.Unmarshal(attempts, &as); err != nil {
			return dedupe.Record{}, fmt.Errorf("decode stored attempts: %w", err)
		}
		if len(as) > 0 {
			r.Attempts = make([]dedupe.Attempt, len(as))
			for i, a := range as {
				r.Attempts[i] = dedupe.Attempt{At: a.At, By: a.By, Outcome: a.Outcome, Status: a.Status,
					Duration: time.Duration(a.DurationNS), Replica: a.Replica, Wait: time.Duration(a.WaitNS)}
			}
		}
	}
	if status != nil {
		resp := &dedupe.Response{Status: int(*status), Body: body, Truncated: truncated}
		if len(headers) > 0 {
			if err := json.Unmarshal(headers, &resp.Header); err != nil {
				return dedupe.Record{}, fmt.Errorf("decode stored headers: %w", err)
			}
		}
		r.Response = resp
	}
	return r, nil
}

// micros passes a duration to SQL as `$n::bigint * interval '1 microsecond'`.
func micros(d time.Duration) int64 { return d.Microseconds() }

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

const conflictCols = `id, sender, key, stored_hash, received_hash, received_at, changed_paths, expires_at,
	diff_kind, shadow, request_head, request_body, body_truncated, accepted_at, coalesce(accepted_by, ''), answered_duplicate`

func scanConflict(row pgx.Row) (dedupe.Conflict, error) {
	var (
		c          dedupe.Conflict
		id         int64
		head, body []byte
		accepted   *time.Time
	)
	if err := row.Scan(&id, &c.Sender, &c.Key, &c.StoredHash, &c.ReceivedHash, &c.ReceivedAt, &c.ChangedPaths, &c.ExpiresAt,
		&c.DiffKind, &c.Shadow, &head, &body, &c.BodyTruncated, &accepted, &c.AcceptedBy, &c.AnsweredDuplicate); err != nil {
		return c, err
	}
	c.ID = strconv.FormatInt(id, 10)
	if accepted != nil {
		c.AcceptedAt = *accepted
	}
	if head != nil {
		var h requestHeadJSON
		if err := json.Unmarshal(head, &h); err != nil {
			return c, fmt.Errorf("decode conflict request head: %w", err)
		}
		c.Request = &dedupe.StoredRequest{Method: h.Method, URI: h.URI, Header: h.Header}
		c.Body = body
		if c.Body == nil {
			c.Body = []byte{}
		}
	}
	return c, nil
}
