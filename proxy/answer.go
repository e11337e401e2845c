package proxy

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookonce/hookonce/internal/problem"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
)

// ReplayHeader marks an answer served from the store instead of the site.
const ReplayHeader = "Idempotent-Replayed"

// This file is the one place where decisions become HTTP answers.

func retryAfter(w http.ResponseWriter, d time.Duration) {
	secs := int((d + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
}

func answerTooLarge(w http.ResponseWriter, limit int64) {
	// Do not wait for the rest of a body we refuse: close the connection.
	w.Header().Set("Connection", "close")
	problem.Write(w, http.StatusRequestEntityTooLarge, "Payload too large",
		"the body is larger than max_body ("+strconv.FormatInt(limit, 10)+" bytes)")
}

func answerBadPath(w http.ResponseWriter, err error) {
	w.Header().Set("Connection", "close")
	if errors.Is(err, contract.ErrLookalikePath) {
		problem.Write(w, http.StatusBadRequest, "Ambiguous path",
			"the request path differs from a webhook path only in case, trailing dots or spaces")
		return
	}
	problem.Write(w, http.StatusBadRequest, "Malformed path",
		"the request path has a malformed escape, a NUL or a .. above the root")
}

// answerBodyUnread: the body stalled or broke its framing. Never an empty
// 200: the sender must not take it for delivered.
func answerBodyUnread(w http.ResponseWriter, status int) {
	w.Header().Set("Connection", "close")
	problem.Write(w, status, http.StatusText(status), "the request body could not be read whole; the delivery was not passed on")
}

// answerUnreadable: the body is a form PHP would parse in a way hookonce
// cannot reproduce: refused, rather than judged on what hookonce could read.
func answerUnreadable(w http.ResponseWriter, reason string) {
	problem.Write(w, http.StatusBadRequest, "Body not readable as the site reads it", reason)
}

// answerUndecided: the route cannot tell whether a sender takes the
// request (contract.Choice.Undecided); refused rather than forwarded as
// no sender's.
func answerUndecided(w http.ResponseWriter, reason string) {
	problem.Write(w, http.StatusBadRequest, "Request not readable as the site reads it", reason)
}

// answerObjectBusy: the delivery's business object (serialize) stayed
// busy past serialize.wait; its claim was freed, so a retry runs it.
func answerObjectBusy(w http.ResponseWriter) {
	retryAfter(w, 5*time.Second)
	problem.Write(w, http.StatusServiceUnavailable, "Business object busy",
		"another delivery about the same object is at the site; retry later")
}

func answerOverloaded(w http.ResponseWriter) {
	retryAfter(w, 5*time.Second)
	problem.Write(w, http.StatusServiceUnavailable, "Too many deliveries at once",
		"max_inflight deliveries are being handled; retry later")
}

func answerMethodNotAllowed(w http.ResponseWriter, allowed []string) {
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
	}
	problem.Write(w, http.StatusMethodNotAllowed, "Method not allowed",
		"this is a webhook path; no sender rule on it accepts this method")
}

func answerUnmatched(w http.ResponseWriter) {
	problem.Write(w, http.StatusForbidden, "No sender rule matches",
		"this is a webhook path; the request matches no sender rule on it, so it was not passed on")
}

func answerBadSignature(w http.ResponseWriter, reason string) {
	problem.Write(w, http.StatusUnauthorized, "Invalid signature", reason)
}

func answerMissingKey(w http.ResponseWriter, reason string) {
	problem.Write(w, http.StatusBadRequest, "Event id missing", reason)
}

// answerStoreDown: fail closed, the sender retries later.
func answerStoreDown(w http.ResponseWriter) {
	retryAfter(w, 5*time.Second)
	problem.Write(w, http.StatusServiceUnavailable, "Idempotency store unavailable",
		"the delivery was not passed on; retry later")
}

// answerLeaseLost: the claim's lease ran out before the site was called
// (the process was paused); nothing was forwarded.
func answerLeaseLost(w http.ResponseWriter) {
	retryAfter(w, 5*time.Second)
	problem.Write(w, http.StatusServiceUnavailable, "Claim expired before the forward",
		"the delivery was not passed on; retry later")
}

func answerShuttingDown(w http.ResponseWriter) {
	retryAfter(w, 5*time.Second)
	problem.Write(w, http.StatusServiceUnavailable, "Shutting down",
		"the delivery was aborted and its claim released; retry later")
}

func answerInProgress(w http.ResponseWriter, s *contract.Sender) {
	retryAfter(w, s.Lease/3)
	problem.Write(w, http.StatusConflict, "Delivery in progress",
		"another delivery of this event is being processed; retry later")
}

func answerHeld(w http.ResponseWriter) {
	retryAfter(w, time.Minute)
	problem.Write(w, http.StatusConflict, "Delivery outcome unknown",
		"an earlier delivery of this event may have been processed; it is held until an operator releases or completes it")
}

func answerConflict(w http.ResponseWriter, s *contract.Sender) {
	if s.ConflictBody != "" {
		ct := "text/plain; charset=utf-8"
		if json.Valid([]byte(s.ConflictBody)) {
			ct = "application/problem+json"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(s.ConflictStatus)
		_, _ = w.Write([]byte(s.ConflictBody))
		return
	}
	problem.Write(w, s.ConflictStatus, "Idempotency key reused with a different payload",
		"this event id was already received with another payload; the original is kept")
}

func answerSiteError(w http.ResponseWriter, status int, detail string) {
	problem.Write(w, status, http.StatusText(status), detail)
}

// answerPassThroughError: a request on no sender's path could not be
// passed to the site. Bare 502, as a plain reverse proxy answers: this is
// the site's traffic, not a webhook decision.
func answerPassThroughError(w http.ResponseWriter) {
	w.WriteHeader(http.StatusBadGateway)
}

// answerCut ends an answer that was being streamed when the site's side
// broke: the sender must see it cut short, never complete.
func answerCut() { panic(http.ErrAbortHandler) }

// replay writes a stored answer, or the sender's fixed duplicate status.
func replay(w http.ResponseWriter, s *contract.Sender, resp *dedupe.Response) {
	h := w.Header()
	h[ReplayHeader] = replayTrue
	if s.DuplicateStatus != 0 {
		h["Content-Length"] = contentLengthZero
		w.WriteHeader(s.DuplicateStatus)
		return
	}
	// The stored answer's header values are shared by every replay of it,
	// never copied: a slice capped at its length makes any append to one
	// of them (net/http's or a wrapper's) allocate its own.
	for k, vs := range resp.Header {
		h[k] = vs[:len(vs):len(vs)]
	}
	body := resp.Body
	if resp.Truncated {
		body = nil
	}
	if len(body) == 0 {
		h["Content-Length"] = contentLengthZero
	} else {
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	// Headers and body leave in one write: net/http holds both in the
	// connection's buffer until the handler returns (TestReplayOneWrite).
	w.WriteHeader(resp.Status)
	_, _ = w.Write(body)
}

// Header values replay shares between answers (capped: see replay).
var (
	replayTrue        = []string{"true"}[:1:1]
	contentLengthZero = []string{"0"}[:1:1]
)

// writeCaptured passes the site's answer on as it came (a streamed one is
// already on its way).
func writeCaptured(w http.ResponseWriter, c *capture) {
	if c.streamed() {
		return
	}
	h := w.Header()
	for k, vs := range c.header {
		h[k] = vs
	}
	h.Set("Content-Length", strconv.Itoa(c.body.Len()))
	w.WriteHeader(c.status)
	_, _ = w.Write(c.body.Bytes())
}

// unstored headers never go into a stored answer: they describe one
// connection or one moment, or hand out a session.
var unstored = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Transfer-Encoding": true,
	"Te": true, "Trailer": true, "Upgrade": true, "Proxy-Authenticate": true,
	"Set-Cookie": true, "Date": true, "Content-Length": true,
}

// storable turns a captured answer into what is kept for replay.
func storable(s *contract.Sender, c *capture) dedupe.Response {
	// The capture is this delivery's alone and never written again once
	// the forward returned: the stored answer shares its body and header
	// values rather than copying them (each capped at its length, so an
	// append to one, here or to the live answer, copies it first).
	h := make(http.Header, len(c.header))
	for k, vs := range c.header {
		if !unstored[k] && !stripped(s, k) {
			h[k] = vs[:len(vs):len(vs)]
		}
	}
	// The capture held at most max_stored_body; a longer answer was
	// streamed on and is stored truncated.
	return dedupe.Response{Status: c.status, Header: h, Body: c.body.Bytes(), Truncated: c.streamed()}
}

// stripped reports whether the sender's strip_response_headers names the
// canonical header name k.
func stripped(s *contract.Sender, k string) bool {
	for _, name := range s.StripResponseHeaders {
		if strings.EqualFold(strings.TrimSpace(name), k) {
			return true
		}
	}
	return false
}
