package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The site behind hookonce in /readyz. A site that does not answer does
// NOT fail /readyz: hookonce still answers every repeat of a finished
// event from the store, refuses changed payloads and bad signatures, and
// answers new events 502 so the sender retries. Taking hookonce out of
// rotation would turn those answers into connection errors and help no
// one; a load balancer in front of several replicas of one site gains
// nothing either (they share the site). So the site is reported in the
// body (text, or JSON on Accept: application/json) and logged when it
// changes, and alerts go by the log or by hookonce_requests_total.

// siteCheckEvery is how long /readyz goes by the last check of the site
// before it dials again: probes polled every second cost the site at most
// one connection a second.
const siteCheckEvery = 2 * time.Second

// siteState is the last check of the site, shared by every /readyz.
type siteState struct {
	mu     sync.Mutex
	at     time.Time
	err    error
	known  bool // at least one check ran
	wasErr bool // the last check failed (to log changes only)
}

// site checks the site (Options.Site), at most once per siteCheckEvery,
// and logs when it stops or starts answering. ok is false when no check is
// configured.
func (h *Handler) site(ctx context.Context) (err error, ok bool) {
	if h.o.Site == nil {
		return nil, false
	}
	s := &h.siteState
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.known && now.Sub(s.at) < siteCheckEvery {
		return s.err, true
	}
	cctx, cancel := context.WithTimeout(ctx, h.o.ReadyTimeout)
	err = h.o.Site(cctx)
	cancel()
	switch {
	case err != nil && (!s.known || !s.wasErr):
		h.log.Warn("the site does not answer: hookonce stays ready (repeats are still answered from the store; new events get 502 and the sender retries)", "err", err)
	case err == nil && s.wasErr:
		h.log.Info("the site answers again")
	}
	s.at, s.err, s.known, s.wasErr = now, err, true, err != nil
	return err, true
}

// readyBody is /readyz's JSON answer (Accept: application/json).
type readyBody struct {
	Status string `json:"status"`           // "ok" or "not ready"
	Store  string `json:"store"`            // "ok", or why not
	Site   string `json:"site,omitempty"`   // "reachable" or "unreachable"; absent when not checked
	Detail string `json:"detail,omitempty"` // the site's error, for a caller with the token
}

// ready writes the 200 answer of /readyz with the site's state.
func (h *Handler) ready(w http.ResponseWriter, r *http.Request) {
	siteErr, checked := h.site(r.Context())
	body := readyBody{Status: "ok", Store: "ok"}
	if checked {
		body.Site = "reachable"
		if siteErr != nil {
			body.Site = "unreachable"
			if h.authorized(r) {
				body.Detail = siteErr.Error()
			}
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	text := "ok\n"
	switch {
	case !checked:
	case siteErr == nil:
		text += "site: reachable\n"
	default:
		text += "site: unreachable"
		if body.Detail != "" {
			text += ": " + body.Detail
		}
		text += " (hookonce stays ready: repeats are answered from the store, new events get 502 until the site answers)\n"
	}
	_, _ = w.Write([]byte(text))
}

func wantsJSON(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(strings.ToLower(v), "application/json") {
			return true
		}
	}
	return false
}
