package redis

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

func ms(d time.Duration) int64 { return d.Milliseconds() }

func msTime(v string) time.Time {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// decodeRecord reads a flat HGETALL reply (field, value, …).
func decodeRecord(r ref, flat []string) dedupe.Record {
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		m[flat[i]] = flat[i+1]
	}
	return recordFromMap(r, m)
}

func recordFromMap(r ref, m map[string]string) dedupe.Record {
	rec := dedupe.Record{
		Sender:      r.sender,
		Key:         r.key,
		State:       dedupe.State(m["st"]),
		PayloadHash: m["h"],
		Owner:       m["o"],
		LeaseUntil:  msTime(m["lu"]),
		ReceivedAt:  msTime(m["ra"]),
		CompletedAt: msTime(m["ca"]),
		ExpiresAt:   msTime(m["ea"]),
	}
	rec.Hits, _ = strconv.ParseInt(m["hi"], 10, 64)
	rec.Takeovers, _ = strconv.ParseInt(m["to"], 10, 64)
	if b, ok := m["qb"]; ok {
		rec.RequestBody = []byte(b)
	}
	if fp := m["fp"]; fp != "" {
		rec.Fingerprint = []byte(fp)
	}
	if q := m["qm"]; q != "" {
		var sr storedRequest
		if json.Unmarshal([]byte(q), &sr) == nil { // written by Claim; never malformed
			rec.Request = &dedupe.StoredRequest{Method: sr.Method, URI: sr.URI, Header: sr.Header, RemoteAddr: sr.Remote}
		}
	}
	rec.Attempts = decodeAttempts(m["at"])
	if since := msTime(m["p_since"]); !since.IsZero() {
		p := &dedupe.Pending{
			Since: since, NextAt: msTime(m["p_next"]), Until: msTime(m["p_until"]),
			Owner: m["p_owner"], LeaseUntil: msTime(m["p_lease"]),
		}
		p.Tries, _ = strconv.Atoi(m["p_tries"])
		rec.Pending = p
	}
	if rec.State == dedupe.StateDone {
		resp := &dedupe.Response{Header: http.Header{}, Truncated: m["rt"] == "1"}
		resp.Status, _ = strconv.Atoi(m["rs"])
		if h := m["rh"]; h != "" {
			_ = json.Unmarshal([]byte(h), &resp.Header) // written by Complete; never malformed
		}
		if b := m["rb"]; b != "" {
			resp.Body = []byte(b)
		}
		rec.Response = resp
	}
	return rec
}

// storedRequest is dedupe.StoredRequest as the qm field keeps it.
type storedRequest struct {
	Method string      `json:"method"`
	URI    string      `json:"uri"`
	Header http.Header `json:"header,omitempty"`
	Remote string      `json:"remote_addr,omitempty"`
}

// attempt is dedupe.Attempt as one line of the at field keeps it: At in Unix
// milliseconds (0 for the zero time), Duration in nanoseconds.
type attempt struct {
	At       int64  `json:"at"`
	By       string `json:"by,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
	Status   int    `json:"status,omitempty"`
	Duration int64  `json:"duration_ns,omitempty"`
	Replica  string `json:"replica,omitempty"`
	Wait     int64  `json:"wait_ns,omitempty"`
}

// encodeAttempt gives att as one line of JSON (encoding/json escapes every
// newline, so the line never splits).
func encodeAttempt(att dedupe.Attempt) (string, error) {
	a := attempt{By: att.By, Outcome: att.Outcome, Status: att.Status, Duration: int64(att.Duration), Replica: att.Replica, Wait: int64(att.Wait)}
	if !att.At.IsZero() {
		a.At = att.At.UnixMilli()
	}
	b, err := json.Marshal(a)
	return string(b), err
}

// decodeAttempts reads the at field; a line that does not parse is skipped.
func decodeAttempts(v string) []dedupe.Attempt {
	if v == "" {
		return nil
	}
	lines := strings.Split(v, "\n")
	out := make([]dedupe.Attempt, 0, len(lines))
	for _, l := range lines {
		var a attempt
		if l == "" || json.Unmarshal([]byte(l), &a) != nil {
			continue
		}
		att := dedupe.Attempt{By: a.By, Outcome: a.Outcome, Status: a.Status, Duration: time.Duration(a.Duration), Replica: a.Replica, Wait: time.Duration(a.Wait)}
		if a.At != 0 {
			att.At = time.UnixMilli(a.At)
		}
		out = append(out, att)
	}
	return out
}
