// Redelivery: the unretried events (/v1/events?status=unretried, the
// page's list) and an operator's redelivery of a kept request
// (/v1/redeliver, /ui/redeliver), through the function internal/cli hands
// in (admin never imports proxy).

package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hookonce/hookonce/internal/problem"

	"github.com/hookonce/hookonce/dedupe/view"
	"net/url"
)

// Redelivery is what an operator's redelivery came to.
type Redelivery struct {
	Outcome string `json:"outcome"`
	Status  int    `json:"status"`
	Body    string `json:"body,omitempty"`
}

// Redelivery refusals the Redeliver function wraps, mapped to 409/422.
var (
	ErrRefused = errors.New("redelivery refused")
)

// listUnretried answers status=unretried: events whose senders gave up.
func (h *Handler) listUnretried(w http.ResponseWriter, r *http.Request) {
	if h.o.Unretried == nil {
		problem.Write(w, http.StatusBadRequest, "Bad request", "status=unretried needs the senders' retry windows: ask the admin listener of hookonce serve")
		return
	}
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	recs, err := h.o.Unretried(ctx, r.URL.Query().Get("sender"))
	if err != nil {
		h.storeError(w, "list", err)
		return
	}
	out := make([]view.RecordJSON, 0, len(recs))
	for _, rec := range recs {
		j := view.Record(rec)
		j.Unretried = true
		out = append(out, j)
	}
	writeJSON(w, http.StatusOK, out)
}

// redeliver answers POST /v1/redeliver/{sender}/{key}[?force=true].
func (h *Handler) redeliver(w http.ResponseWriter, r *http.Request) {
	if h.o.Redeliver == nil {
		problem.Write(w, http.StatusNotImplemented, "Not available", "redelivery needs the admin listener of hookonce serve")
		return
	}
	sender, key := r.PathValue("sender"), r.PathValue("key")
	force := r.URL.Query().Get("force") == "true"
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute) // the site's time, not a store call's
	defer cancel()
	res, err := h.o.Redeliver(ctx, sender, key, force)
	switch {
	case errors.Is(err, ErrRefused):
		problem.Write(w, http.StatusConflict, "Redelivery refused", err.Error())
		return
	case err != nil:
		h.storeError(w, "redeliver", err)
		return
	}
	h.log.Warn("admin: event redelivered by an operator", "sender", sender, "key", key, "force", force, "outcome", res.Outcome, "status", res.Status)
	writeJSON(w, http.StatusOK, res)
}

// uiRedeliver sends a stored event to the site again, for an operator on
// the event's page.
func (h *Handler) uiRedeliver(w http.ResponseWriter, r *http.Request) {
	if !h.validCSRF(w, r) {
		return
	}
	sender, key, ok := h.formTarget(w, r)
	if !ok {
		return
	}
	if h.o.Redeliver == nil {
		h.render(w, http.StatusNotImplemented, "error.html", errorPage{Title: "Not available", Message: "Redelivery needs the admin listener of hookonce serve."})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	force := r.PostFormValue("force") == "true"
	res, err := h.o.Redeliver(ctx, sender, key, force)
	msg := ""
	switch {
	case errors.Is(err, ErrRefused):
		msg = "Not redelivered: " + err.Error()
	case err != nil:
		h.uiStoreError(w, "redeliver", err)
		return
	default:
		h.log.Warn("admin: event redelivered by an operator (page)", "sender", sender, "key", key, "force", force, "outcome", res.Outcome, "status", res.Status)
		msg = fmt.Sprintf("Redelivered: %s, the site answered %d.", res.Outcome, res.Status)
	}
	http.Redirect(w, r, eventURL(sender, key)+"?note="+url.QueryEscape(msg), http.StatusSeeOther)
}

// uiUnretried lists the events whose senders gave up.
func (h *Handler) uiUnretried(w http.ResponseWriter, r *http.Request, p eventsPage) {
	p.Sender, p.Status, p.Limit = r.URL.Query().Get("sender"), "unretried", MaxLimit
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	recs, err := h.o.Unretried(ctx, p.Sender)
	if err != nil {
		h.uiStoreError(w, "list", err)
		return
	}
	now := h.o.Now()
	for _, rec := range recs {
		p.Rows = append(p.Rows, eventRow{Record: rec, Age: Age(now, rec.ReceivedAt)})
	}
	h.render(w, http.StatusOK, "events.html", p)
}
