// Package view is how records and conflicts are shown: their public JSON
// (the admin API's and every command's --json, docs/operations.md "Record
// JSON") and the short hashes of tables. It reads dedupe's types and
// decides nothing.
package view

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookonce/hookonce/dedupe"
)

// RecordJSON is the record's public JSON form, shared by the CLI and the
// admin API (docs/operations.md, "Record JSON").
type RecordJSON struct {
	Sender        string        `json:"sender"`
	Key           string        `json:"key"`
	State         dedupe.State  `json:"state"`
	PayloadSHA256 string        `json:"payload_sha256"`
	ReceivedAt    time.Time     `json:"received_at"`
	CompletedAt   *time.Time    `json:"completed_at,omitempty"`
	ExpiresAt     time.Time     `json:"expires_at"`
	LeaseUntil    *time.Time    `json:"lease_until,omitempty"`
	Hits          int64         `json:"hits"`
	Takeovers     int64         `json:"takeovers"`
	Response      *ResponseJSON `json:"response,omitempty"`
	Attempts      []AttemptJSON `json:"attempts"`
	// RequestKept says whether the request was kept (store_request_body),
	// so the event can be redelivered.
	RequestKept bool `json:"request_kept"`
	// Unretried is set by callers that know the sender's retry window.
	Unretried bool `json:"unretried,omitempty"`
	// Pending: the durable delivery still owed to the site (ack:
	// durable); absent when none is owed.
	Pending *PendingJSON `json:"pending,omitempty"`
}

// PendingJSON is a durable delivery still owed to the site.
type PendingJSON struct {
	Since  time.Time `json:"since"`   // when the sender was answered
	NextAt time.Time `json:"next_at"` // when the next try is due
	Until  time.Time `json:"until"`   // when hookonce gives it up
	Tries  int       `json:"tries"`   // tries that ended with a retry
	// Held: a try holds it now (a deliverer's lease, until HeldUntil).
	Held      bool       `json:"held"`
	HeldUntil *time.Time `json:"held_until,omitempty"`
}

// AttemptJSON is one delivery attempt's public form.
type AttemptJSON struct {
	At         time.Time `json:"at"`
	By         string    `json:"by"`
	Outcome    string    `json:"outcome"`
	Status     int       `json:"status"`
	DurationMS int64     `json:"duration_ms"`
	Replica    string    `json:"replica"`
	// WaitMS: how long it waited for its business object (serialize).
	WaitMS int64 `json:"wait_ms,omitempty"`
}

// ResponseJSON is a stored answer's JSON form. BodyText is present only when
// the body is valid UTF-8.
type ResponseJSON struct {
	Status     int                 `json:"status"`
	Headers    map[string][]string `json:"headers"`
	BodyBase64 string              `json:"body_base64"`
	BodyText   *string             `json:"body_text,omitempty"`
	Truncated  bool                `json:"truncated"`
}

// ConflictJSON is a conflict's public JSON form. The refused payload's
// values are never shown: only what changed (paths or field names), its
// method, target and redacted headers (RedactHeaders), and its size.
type ConflictJSON struct {
	Sender         string    `json:"sender"`
	Key            string    `json:"key"`
	StoredSHA256   string    `json:"stored_sha256"`
	ReceivedSHA256 string    `json:"received_sha256"`
	ReceivedAt     time.Time `json:"received_at"`
	ChangedPaths   []string  `json:"changed_paths"`
	ID             string    `json:"id"`
	// DiffKind: "json" (changed_paths are JSON paths), "form" (form field
	// names) or "" (nothing compared: a body was not kept, or not JSON or a
	// form).
	DiffKind string `json:"diff_kind"`
	Shadow   bool   `json:"shadow,omitempty"`
	// AnsweredDuplicate: the sender was answered with the stored
	// original's answer (changed_payload: duplicate), not refused; the
	// payload never reached the site unless it is accepted.
	AnsweredDuplicate bool `json:"answered_duplicate,omitempty"`
	// RequestKept: the refused request was kept (store_request_body).
	RequestKept   bool                `json:"request_kept"`
	Method        string              `json:"method,omitempty"`
	URI           string              `json:"uri,omitempty"`
	Headers       map[string][]string `json:"headers,omitempty"`
	BodyBytes     int                 `json:"body_bytes,omitempty"`
	BodyTruncated bool                `json:"body_truncated,omitempty"`
	// Acceptable: hookonce accept would forward it now; otherwise
	// NotAcceptable says why.
	Acceptable    bool       `json:"acceptable"`
	NotAcceptable string     `json:"not_acceptable,omitempty"`
	AcceptedAt    *time.Time `json:"accepted_at,omitempty"`
	AcceptedBy    string     `json:"accepted_by,omitempty"`
	// AcceptedKey is the key the accepted copy runs under (KEY:accepted-ID).
	AcceptedKey string `json:"accepted_key,omitempty"`
}

// Record renders r in its public form (times in UTC).
func Record(r dedupe.Record) RecordJSON {
	out := RecordJSON{
		Sender: r.Sender, Key: r.Key, State: r.State, PayloadSHA256: r.PayloadHash,
		ReceivedAt: r.ReceivedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC(),
		Hits: r.Hits, Takeovers: r.Takeovers, Attempts: []AttemptJSON{},
		RequestKept: r.Request != nil && r.RequestBody != nil,
	}
	for _, a := range r.Attempts {
		out.Attempts = append(out.Attempts, AttemptJSON{At: a.At.UTC(), By: a.By, Outcome: a.Outcome, Status: a.Status,
			DurationMS: a.Duration.Milliseconds(), Replica: a.Replica, WaitMS: a.Wait.Milliseconds()})
	}
	if !r.CompletedAt.IsZero() {
		t := r.CompletedAt.UTC()
		out.CompletedAt = &t
	}
	if r.State == dedupe.StateProcessing && !r.LeaseUntil.IsZero() {
		t := r.LeaseUntil.UTC()
		out.LeaseUntil = &t
	}
	if p := r.Pending; p != nil {
		out.Pending = &PendingJSON{Since: p.Since.UTC(), NextAt: p.NextAt.UTC(), Until: p.Until.UTC(), Tries: p.Tries}
		if PendingHeld(p, time.Now()) {
			t := p.LeaseUntil.UTC()
			out.Pending.Held, out.Pending.HeldUntil = true, &t
		}
	}
	if r.Response != nil {
		resp := &ResponseJSON{
			Status:     r.Response.Status,
			Headers:    map[string][]string(r.Response.Header),
			BodyBase64: base64.StdEncoding.EncodeToString(r.Response.Body),
			Truncated:  r.Response.Truncated,
		}
		if resp.Headers == nil {
			resp.Headers = map[string][]string{}
		}
		if utf8.Valid(r.Response.Body) {
			s := string(r.Response.Body)
			resp.BodyText = &s
		}
		out.Response = resp
	}
	return out
}

// PendingHeld says whether a try holds the owed delivery p at now (its
// deliverer's lease has not ended).
func PendingHeld(p *dedupe.Pending, now time.Time) bool {
	return p != nil && p.Owner != "" && now.Before(p.LeaseUntil)
}

// OwedState is a record's state as tables show it: "done, owed to the
// site" while a durable delivery is owed, else the state.
func OwedState(r dedupe.Record) string {
	if r.Pending != nil {
		return string(r.State) + ", owed to the site"
	}
	return string(r.State)
}

// PendingText says in a line where the owed delivery p stands at now: the
// tries so far, whether one holds it now or when the next is due, and
// when hookonce gives it up.
func PendingText(p *dedupe.Pending, now time.Time) string {
	var parts []string
	if f := FailedTries(p); f != "" {
		parts = append(parts, f)
	}
	switch {
	case PendingHeld(p, now):
		parts = append(parts, "a try holds it now")
	case !p.NextAt.After(now):
		parts = append(parts, "next try due now")
	default:
		parts = append(parts, fmt.Sprintf("next try %s (in %s)", p.NextAt.UTC().Format(time.RFC3339), roundDur(p.NextAt.Sub(now))))
	}
	parts = append(parts, "given up at "+p.Until.UTC().Format(time.RFC3339))
	return strings.Join(parts, "; ")
}

// roundDur rounds d to what a reader needs: seconds under an hour,
// minutes above.
func roundDur(d time.Duration) time.Duration {
	if d < time.Hour {
		return d.Round(time.Second)
	}
	return d.Round(time.Minute)
}

// Conflict renders c in its public form.
func Conflict(c dedupe.Conflict) ConflictJSON {
	paths := c.ChangedPaths
	if paths == nil {
		paths = []string{}
	}
	out := ConflictJSON{
		Sender: c.Sender, Key: c.Key, StoredSHA256: c.StoredHash,
		ReceivedSHA256: c.ReceivedHash, ReceivedAt: c.ReceivedAt.UTC(), ChangedPaths: paths,
		ID: c.ID, DiffKind: c.DiffKind, Shadow: c.Shadow, AnsweredDuplicate: c.AnsweredDuplicate, RequestKept: c.Request != nil && c.Body != nil,
		BodyBytes: len(c.Body), BodyTruncated: c.BodyTruncated,
	}
	if c.Request != nil {
		out.Method, out.URI, out.Headers = c.Request.Method, c.Request.URI, dedupe.RedactHeaders(c.Request.Header)
	}
	if err := c.Acceptable(); err != nil {
		out.NotAcceptable = err.Error()
	} else {
		out.Acceptable = true
	}
	if c.Accepted() {
		t := c.AcceptedAt.UTC()
		out.AcceptedAt, out.AcceptedBy, out.AcceptedKey = &t, c.AcceptedBy, c.AcceptedKey()
	}
	return out
}

// ShortHash is a payload hash's first 12 hex digits, for tables.
func ShortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// FailedTries says how many tries of the owed delivery p failed: "" for
// none, "1 try failed", "3 tries failed".
func FailedTries(p *dedupe.Pending) string {
	switch p.Tries {
	case 0:
		return ""
	case 1:
		return "1 try failed"
	}
	return fmt.Sprintf("%d tries failed", p.Tries)
}
