// Conflicts: the changed payloads refused under a stored key, listed
// through the API (/v1/conflicts) and on the page (/ui/conflicts).

package admin

import (
	"net/http"

	"github.com/hookonce/hookonce/internal/problem"

	"github.com/hookonce/hookonce/dedupe/view"
)

func (h *Handler) listConflicts(w http.ResponseWriter, r *http.Request) {
	f, err := listFilter(r, false)
	if err != nil {
		problem.Write(w, http.StatusBadRequest, "Bad request", err.Error())
		return
	}
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	cs, err := h.o.Store.Conflicts(ctx, f)
	if err != nil {
		h.storeError(w, "conflicts", err)
		return
	}
	out := make([]view.ConflictJSON, 0, len(cs))
	for _, c := range cs {
		out = append(out, view.Conflict(c))
	}
	writeJSON(w, http.StatusOK, out)
}

type conflictsPage struct {
	Title  string
	Sender string
	Key    string // a whole part of the key (or the key)
	Limit  int
	Rows   []conflictRow
	Error  string
	Note   string // what the last accept came to
	CSRF   string // the accept forms' token
	// CanAccept: this listener can accept (it belongs to serve).
	CanAccept bool
}

type conflictRow struct {
	view.ConflictJSON
	Age string
}

func (h *Handler) uiConflicts(w http.ResponseWriter, r *http.Request) {
	p := conflictsPage{Title: "Conflicts", Note: r.URL.Query().Get("note"), CSRF: h.csrfToken(r), CanAccept: h.o.Accept != nil}
	f, err := listFilter(r, false)
	p.Sender, p.Key, p.Limit = f.Sender, f.KeyPart, f.Limit
	if err != nil {
		p.Error = err.Error()
		h.render(w, http.StatusBadRequest, "conflicts.html", p)
		return
	}
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	cs, err := h.o.Store.Conflicts(ctx, f)
	if err != nil {
		h.uiStoreError(w, "conflicts", err)
		return
	}
	now := h.o.Now()
	for _, c := range cs {
		p.Rows = append(p.Rows, conflictRow{ConflictJSON: view.Conflict(c), Age: Age(now, c.ReceivedAt)})
	}
	h.render(w, http.StatusOK, "conflicts.html", p)
}
