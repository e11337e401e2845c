package sqlite

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

const recordCols = `sender, key, state, payload_hash, owner, lease_until, received_at, completed_at,
	expires_at, hits, takeovers, status, headers, body, truncated, request_body, attempts, request_head, fingerprint,
	pending_since, pending_next_at, pending_until, pending_tries, pending_owner, pending_lease_until`

type scanner interface{ Scan(dest ...any) error }

func scanRecord(row scanner) (dedupe.Record, error) {
	// The destinations in one struct: Scan takes them as interfaces, so
	// each would otherwise be an allocation of its own.
	var d struct {
		rec                                         dedupe.Record
		state                                       string
		lease, received, completed, expires, status int64
		headers, body, reqBody, attempts, head, fp  []byte
		truncated                                   bool
		pTries                                      int
		pOwner                                      string
		pSince, pNext, pUntil, pLease               int64
	}
	err := row.Scan(&d.rec.Sender, &d.rec.Key, &d.state, &d.rec.PayloadHash, &d.rec.Owner, &d.lease, &d.received, &d.completed,
		&d.expires, &d.rec.Hits, &d.rec.Takeovers, &d.status, &d.headers, &d.body, &d.truncated, &d.reqBody, &d.attempts, &d.head, &d.fp,
		&d.pSince, &d.pNext, &d.pUntil, &d.pTries, &d.pOwner, &d.pLease)
	rec := d.rec
	if err != nil {
		return rec, err
	}
	state, lease, received, completed, expires, status := d.state, d.lease, d.received, d.completed, d.expires, d.status
	headers, body, reqBody, attempts, head, fp, truncated := d.headers, d.body, d.reqBody, d.attempts, d.head, d.fp, d.truncated
	if d.pSince != 0 {
		rec.Pending = &dedupe.Pending{Tries: d.pTries, Owner: d.pOwner,
			Since: fromMS(d.pSince), NextAt: fromMS(d.pNext), Until: fromMS(d.pUntil), LeaseUntil: fromMS(d.pLease)}
	}
	rec.State = dedupe.State(state)
	rec.LeaseUntil, rec.ReceivedAt, rec.CompletedAt, rec.ExpiresAt = fromMS(lease), fromMS(received), fromMS(completed), fromMS(expires)
	rec.RequestBody, rec.Fingerprint = reqBody, fp
	if rec.Attempts, err = decodeAttempts(attempts); err != nil {
		return rec, err
	}
	if rec.Request, err = decodeHead(head); err != nil {
		return rec, err
	}
	if rec.State == dedupe.StateDone {
		h := http.Header{}
		if len(headers) > 0 {
			if err := json.Unmarshal(headers, &h); err != nil {
				return rec, fmt.Errorf("decode stored headers: %w", err)
			}
		}
		if body == nil {
			body = []byte{}
		}
		rec.Response = &dedupe.Response{Status: int(status), Header: h, Body: body, Truncated: truncated}
	}
	return rec, nil
}

// attemptJSON is an Attempt as the attempts column keeps it: At in Unix
// milliseconds like every other time here (0 for the zero time), Duration
// in nanoseconds so it round-trips exactly.
type attemptJSON struct {
	At       int64  `json:"at_ms"`
	By       string `json:"by,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
	Status   int    `json:"status,omitempty"`
	Duration int64  `json:"duration_ns,omitempty"`
	Replica  string `json:"replica,omitempty"`
	Wait     int64  `json:"wait_ns,omitempty"`
}

func decodeAttempts(raw []byte) ([]dedupe.Attempt, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var stored []attemptJSON
	if err := json.Unmarshal(raw, &stored); err != nil {
		return nil, fmt.Errorf("decode stored attempts: %w", err)
	}
	if len(stored) == 0 {
		return nil, nil
	}
	out := make([]dedupe.Attempt, len(stored))
	for i, a := range stored {
		out[i] = dedupe.Attempt{At: fromMS(a.At), By: a.By, Outcome: a.Outcome, Status: a.Status,
			Duration: time.Duration(a.Duration), Replica: a.Replica, Wait: time.Duration(a.Wait)}
	}
	return out, nil
}

// appendAttempt adds att to the stored attempts and keeps the latest
// dedupe.MaxAttempts, oldest first. The result is TEXT, like request_head.
func appendAttempt(raw []byte, att dedupe.Attempt) (string, error) {
	var stored []attemptJSON
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &stored); err != nil {
			return "", fmt.Errorf("decode stored attempts: %w", err)
		}
	}
	at := int64(0)
	if !att.At.IsZero() {
		at = ms(att.At)
	}
	stored = append(stored, attemptJSON{At: at, By: att.By, Outcome: att.Outcome, Status: att.Status,
		Duration: int64(att.Duration), Replica: att.Replica, Wait: int64(att.Wait)})
	if n := len(stored) - dedupe.MaxAttempts; n > 0 {
		stored = stored[n:]
	}
	b, err := json.Marshal(stored)
	return string(b), err
}

// headJSON is a StoredRequest as the request_head column keeps it.
type headJSON struct {
	Method string      `json:"method"`
	URI    string      `json:"uri"`
	Header http.Header `json:"header,omitempty"`
	Remote string      `json:"remote_addr,omitempty"`
}

// encodeHead returns the request_head value: NULL when nothing is kept.
func encodeHead(r *dedupe.StoredRequest) (any, error) {
	if r == nil {
		return nil, nil
	}
	b, err := json.Marshal(headJSON{Method: r.Method, URI: r.URI, Header: r.Header, Remote: r.RemoteAddr})
	if err != nil {
		return nil, fmt.Errorf("encode request head: %w", err)
	}
	return string(b), nil // TEXT, so the sqlite3 shell's JSON functions read it
}

func decodeHead(raw []byte) (*dedupe.StoredRequest, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var h headJSON
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("decode stored request head: %w", err)
	}
	return &dedupe.StoredRequest{Method: h.Method, URI: h.URI, Header: h.Header, RemoteAddr: h.Remote}, nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// conflictID reads a conflict id as AcceptConflict takes it: "" is 0 (the
// newest), else a positive row id.
func conflictID(id string) (int64, bool) {
	if id == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(id, 10, 64)
	return n, err == nil && n > 0
}

const conflictCols = `id, sender, key, stored_hash, received_hash, received_at, changed_paths, expires_at,
	diff_kind, shadow, request_head, request_body, body_truncated, accepted_at, accepted_by, answered_duplicate`

func scanConflict(row scanner) (dedupe.Conflict, error) {
	var (
		c                          dedupe.Conflict
		id, received, expires, acc int64
		paths                      string
		head, body                 []byte
	)
	err := row.Scan(&id, &c.Sender, &c.Key, &c.StoredHash, &c.ReceivedHash, &received, &paths, &expires,
		&c.DiffKind, &c.Shadow, &head, &body, &c.BodyTruncated, &acc, &c.AcceptedBy, &c.AnsweredDuplicate)
	if err != nil {
		return c, err
	}
	c.ID = strconv.FormatInt(id, 10)
	c.ReceivedAt, c.ExpiresAt, c.AcceptedAt = fromMS(received), fromMS(expires), fromMS(acc)
	if paths != "" {
		c.ChangedPaths = strings.Split(paths, "\n")
	}
	if c.Request, err = decodeHead(head); err != nil {
		return c, err
	}
	if c.Request != nil {
		c.Body = nonNil(body)
	}
	return c, nil
}
