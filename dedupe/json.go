package dedupe

import (
	"encoding/base64"
	"time"
	"unicode/utf8"
)

// RecordJSON is the record's public JSON form, shared by the CLI and the
// admin API (docs/operations.md, "Record JSON").
type RecordJSON struct {
	Sender        string        `json:"sender"`
	Key           string        `json:"key"`
	State         State         `json:"state"`
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

// ConflictJSON is a conflict's public JSON form.
type ConflictJSON struct {
	Sender         string    `json:"sender"`
	Key            string    `json:"key"`
	StoredSHA256   string    `json:"stored_sha256"`
	ReceivedSHA256 string    `json:"received_sha256"`
	ReceivedAt     time.Time `json:"received_at"`
	ChangedPaths   []string  `json:"changed_paths"`
}

// JSON renders r in its public form (times in UTC).
func (r Record) JSON() RecordJSON {
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
	if r.State == StateProcessing && !r.LeaseUntil.IsZero() {
		t := r.LeaseUntil.UTC()
		out.LeaseUntil = &t
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

// JSON renders c in its public form.
func (c Conflict) JSON() ConflictJSON {
	paths := c.ChangedPaths
	if paths == nil {
		paths = []string{}
	}
	return ConflictJSON{
		Sender: c.Sender, Key: c.Key, StoredSHA256: c.StoredHash,
		ReceivedSHA256: c.ReceivedHash, ReceivedAt: c.ReceivedAt.UTC(), ChangedPaths: paths,
	}
}
