// Accepting a conflict: an operator marks a refused changed payload
// accepted and has it delivered under its accepted key (/v1/accept,
// /ui/accept), through the function internal/cli hands in.

package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hookonce/hookonce/internal/problem"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/view"
	"net"
	"net/url"
)

// Acceptance is what an operator's acceptance of a conflict came to: the
// conflict as marked, and the delivery of its payload under
// conflict.accepted_key.
type Acceptance struct {
	Conflict view.ConflictJSON `json:"conflict"`
	Redelivery
}

// acceptConflict answers POST /v1/accept/{sender}/{key}[?id=ID][&by=NAME]:
// 200 with the acceptance, 404 when there is no such conflict, 409 when
// it was accepted already or cannot be accepted (the detail says why).
func (h *Handler) acceptConflict(w http.ResponseWriter, r *http.Request) {
	if h.o.Accept == nil {
		problem.Write(w, http.StatusNotImplemented, "Not available", "accepting a conflict needs the admin listener of hookonce serve")
		return
	}
	sender, key := r.PathValue("sender"), r.PathValue("key")
	by := r.URL.Query().Get("by")
	if by == "" {
		by = "admin API"
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute) // the site's time, not a store call's
	defer cancel()
	res, err := h.o.Accept(ctx, sender, key, r.URL.Query().Get("id"), by)
	if err != nil {
		status, title := acceptRefusal(err)
		if status == 0 {
			h.storeError(w, "accept", err)
			return
		}
		problem.Write(w, status, title, err.Error())
		return
	}
	h.log.Warn("admin: conflict accepted by an operator", "sender", sender, "key", key, "conflict", res.Conflict.ID,
		"accepted_key", res.Conflict.AcceptedKey, "by", by, "outcome", res.Outcome, "status", res.Status)
	writeJSON(w, http.StatusOK, res)
}

// acceptRefusal maps an Accept refusal to its status and title; 0 for an
// error that is not a refusal.
func acceptRefusal(err error) (int, string) {
	switch {
	case errors.Is(err, dedupe.ErrNotFound):
		return http.StatusNotFound, "No such conflict"
	case errors.Is(err, dedupe.ErrAccepted):
		return http.StatusConflict, "Already accepted"
	case errors.Is(err, dedupe.ErrNotAcceptable), errors.Is(err, ErrRefused):
		return http.StatusConflict, "Cannot be accepted"
	}
	return 0, ""
}

// uiAccept accepts a conflict for an operator on the conflicts page: its
// refused payload goes to the site once, as an event of its own. The form
// names the conflict by its id, so the button accepts the row it is on.
func (h *Handler) uiAccept(w http.ResponseWriter, r *http.Request) {
	if !h.validCSRF(w, r) {
		return
	}
	sender, key, ok := h.formTarget(w, r)
	if !ok {
		return
	}
	if h.o.Accept == nil {
		h.render(w, http.StatusNotImplemented, "error.html", errorPage{Title: "Not available", Message: "Accepting a conflict needs the admin listener of hookonce serve."})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	by := "admin page"
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		by += " from " + host
	}
	res, err := h.o.Accept(ctx, sender, key, r.PostFormValue("id"), by)
	msg := ""
	if err != nil {
		if status, _ := acceptRefusal(err); status == 0 {
			h.uiStoreError(w, "accept", err)
			return
		}
		msg = "Not accepted: " + err.Error()
	} else {
		h.log.Warn("admin: conflict accepted by an operator (page)", "sender", sender, "key", key, "conflict", res.Conflict.ID,
			"accepted_key", res.Conflict.AcceptedKey, "by", by, "outcome", res.Outcome, "status", res.Status)
		msg = fmt.Sprintf("Accepted: sent to the site as %s:%s, %s, the site answered %d.", sender, res.Conflict.AcceptedKey, res.Outcome, res.Status)
	}
	q := url.Values{"sender": {sender}, "key": {key}, "note": {msg}}
	http.Redirect(w, r, "/ui/conflicts?"+q.Encode(), http.StatusSeeOther)
}
