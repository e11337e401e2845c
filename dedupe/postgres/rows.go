package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
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
	v := attemptJSON{At: a.At.UTC(), By: a.By, Outcome: a.Outcome, Status: a.Status,
		DurationNS: int64(a.Duration), Replica: a.Replica, WaitNS: int64(a.Wait)}
	if y := v.At.Year(); y < 0 || y > 9999 {
		// encoding/json's own error for a time it cannot write.
		_, err := json.Marshal(v)
		return "", fmt.Errorf("encode attempt: %w", err)
	}
	return ownedString(appendAttemptJSON(make([]byte, 0, 160), v)), nil
}

// appendAttemptJSON appends v as encoding/json writes it (the same bytes:
// TestAttemptJSONAsEncodingJSON), without its reflection: every completed
// delivery writes one. v.At's year is within 0–9999.
func appendAttemptJSON(b []byte, v attemptJSON) []byte {
	b = append(b, `{"at":"`...)
	b = v.At.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","by":`...)
	b = appendJSONString(b, v.By)
	b = append(b, `,"outcome":`...)
	b = appendJSONString(b, v.Outcome)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(v.Status), 10)
	b = append(b, `,"duration_ns":`...)
	b = strconv.AppendInt(b, v.DurationNS, 10)
	b = append(b, `,"replica":`...)
	b = appendJSONString(b, v.Replica)
	if v.WaitNS != 0 {
		b = append(b, `,"wait_ns":`...)
		b = strconv.AppendInt(b, v.WaitNS, 10)
	}
	return append(b, '}')
}

// encodeHeader is h as encoding/json writes an http.Header (names sorted,
// each a list of values; a nil list null), as a string parameter (see
// jsonParam): every stored answer writes one.
func encodeHeader(h http.Header) string {
	var names [32]string
	ks := names[:0]
	n := 2
	for k, vs := range h {
		ks = append(ks, k)
		n += len(k) + 6
		for _, v := range vs {
			n += len(v) + 3
		}
	}
	slices.Sort(ks)
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, k := range ks {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		vs := h[k]
		if vs == nil {
			b = append(b, "null"...)
			continue
		}
		b = append(b, '[')
		for j, v := range vs {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, v)
		}
		b = append(b, ']')
	}
	return ownedString(append(b, '}'))
}

// ownedString is b as a string without a copy: for a buffer made by its
// caller for this string alone, never written again (nor kept) once
// passed here.
func ownedString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// appendJSONString appends s quoted as encoding/json quotes it: a string
// of printable ASCII that needs no escape as it is, any other through
// encoding/json itself (its escapes of <, >, &, control characters,
// U+2028/U+2029 and invalid UTF-8 are kept exactly).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
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
	return scanRecordRow(row, nil, tail, extra...)
}

// scanFirst scans a row of firstSQL: won, claimable and the record, of
// which a won row (an insert) has only the times.
func scanFirst(row pgx.Row, won, claimable *bool) (dedupe.Record, error) {
	return scanRecordRow(row, won, nil, won, claimable)
}

// scanRecordRow is scanRecordTail; when won (one of extra) is set by the
// scan, the row is firstSQL's insert and answers only its times.
func scanRecordRow(row pgx.Row, won *bool, tail []any, extra ...any) (dedupe.Record, error) {
	rs := recordScans.Get().(*recordScan)
	defer rs.put()
	dest := append(rs.dest[:0], extra...)
	dest = append(dest, &rs.sender, &rs.key, &rs.state, &rs.hash, &rs.owner, &rs.lease,
		&rs.received, &rs.completed, &rs.expires, &rs.hits, &rs.takeovers,
		&rs.status, &rs.headers, &rs.body, &rs.truncated, &rs.req, &rs.head, &rs.attempts, &rs.fp)
	dest = append(dest, tail...)
	if err := row.Scan(dest...); err != nil {
		return dedupe.Record{}, err
	}
	if won != nil && *won {
		// firstSQL's insert: the times alone (claimWon adds the rest).
		return dedupe.Record{LeaseUntil: rs.lease.Time, ReceivedAt: rs.received.Time, ExpiresAt: rs.expires.Time}, nil
	}
	if !rs.sender.Valid || !rs.key.Valid || !rs.state.Valid || !rs.hash.Valid || !rs.owner.Valid || !rs.received.Valid ||
		!rs.expires.Valid || !rs.hits.Valid || !rs.takeovers.Valid || !rs.truncated.Valid {
		return dedupe.Record{}, errors.New("scan record: NULL in a column that has none")
	}
	r := dedupe.Record{Sender: rs.sender.String, Key: rs.key.String, State: dedupe.State(rs.state.String),
		PayloadHash: rs.hash.String, Owner: rs.owner.String, ReceivedAt: rs.received.Time, ExpiresAt: rs.expires.Time,
		Hits: rs.hits.Int64, Takeovers: rs.takeovers.Int64}
	if rs.lease.Valid {
		r.LeaseUntil = rs.lease.Time
	}
	if rs.completed.Valid {
		r.CompletedAt = rs.completed.Time
	}
	r.RequestBody, r.Fingerprint = rs.req, rs.fp
	if head := rs.head; head != nil {
		var h requestHeadJSON
		if err := json.Unmarshal(head, &h); err != nil {
			return dedupe.Record{}, fmt.Errorf("decode stored request head: %w", err)
		}
		r.Request = &dedupe.StoredRequest{Method: h.Method, URI: h.URI, Header: h.Header, RemoteAddr: h.Remote}
	}
	if attempts := rs.attempts; len(attempts) > 0 && string(attempts) != "[]" { // a new record's are "[]": nothing to decode
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
	if rs.status.Valid {
		resp := &dedupe.Response{Status: int(rs.status.Int32), Body: rs.body, Truncated: rs.truncated.Bool}
		if len(rs.headers) > 0 {
			if err := json.Unmarshal(rs.headers, &resp.Header); err != nil {
				return dedupe.Record{}, fmt.Errorf("decode stored headers: %w", err)
			}
		}
		r.Response = resp
	}
	return r, nil
}

// recordScan is where scanRecordTail scans a row's recordCols: pooled, so
// that a scan does not allocate each destination (and the slice of them)
// on its own. Every column is a pgtype value (Valid), which scans as a
// string, *time.Time or *int32 does, without allocating the value pointed
// to, and takes the NULLs of firstSQL's won row; a NULL anywhere else in a
// NOT NULL column is an error, as it was scanned into a string. What the
// record keeps (strings, byte slices) pgx allocates anew for each row.
type recordScan struct {
	sender, key, state, hash, owner pgtype.Text
	lease, received                 pgtype.Timestamptz
	completed, expires              pgtype.Timestamptz
	hits, takeovers                 pgtype.Int8
	status                          pgtype.Int4
	headers, body, req              []byte
	head, attempts, fp              []byte
	truncated                       pgtype.Bool
	dest                            [32]any
}

var recordScans = sync.Pool{New: func() any { return new(recordScan) }}

// put clears rs (no reference kept to a record's values) and pools it.
func (rs *recordScan) put() {
	*rs = recordScan{}
	recordScans.Put(rs)
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
