// Events: the stored records, read and forgotten through the API
// (/v1/events) and shown on the page (/ui/events).

package admin

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/hookonce/hookonce/internal/problem"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/view"
	"maps"
	"net/url"
	"slices"
)

func (h *Handler) getEvent(w http.ResponseWriter, r *http.Request) {
	sender, key := r.PathValue("sender"), r.PathValue("key")
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	rec, err := h.o.Store.Get(ctx, sender, key)
	if err != nil {
		h.storeError(w, "get", err)
		return
	}
	writeJSON(w, http.StatusOK, view.Record(rec))
}

func (h *Handler) deleteEvent(w http.ResponseWriter, r *http.Request) {
	sender, key := r.PathValue("sender"), r.PathValue("key")
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	if err := h.o.Store.Forget(ctx, sender, key); err != nil {
		h.storeError(w, "forget", err)
		return
	}
	h.log.Info("admin: record forgotten (deleted with its history)", "sender", sender, "key", key)
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) listEvents(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("status") == "unretried" {
		h.listUnretried(w, r)
		return
	}
	f, err := listFilter(r, true)
	if err != nil {
		problem.Write(w, http.StatusBadRequest, "Bad request", err.Error())
		return
	}
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	recs, err := h.o.Store.List(ctx, f)
	if err != nil {
		h.storeError(w, "list", err)
		return
	}
	out := make([]view.RecordJSON, 0, len(recs))
	for _, rec := range recs {
		out = append(out, view.Record(rec))
	}
	writeJSON(w, http.StatusOK, out)
}

// listFilter reads sender=, status= (when withState), key= (a whole part
// of the key, or the key: dedupe.ListFilter.KeyPart) and limit=.
func listFilter(r *http.Request, withState bool) (dedupe.ListFilter, error) {
	q := r.URL.Query()
	f := dedupe.ListFilter{Sender: q.Get("sender"), KeyPart: strings.TrimSpace(q.Get("key")), Limit: DefaultLimit}
	if len(f.KeyPart) > 512 {
		return f, errors.New("key: at most 512 bytes")
	}
	if withState {
		st, err := parseStatus(q.Get("status"))
		if err != nil {
			return f, err
		}
		f.State, f.Pending = st.State, st.Pending
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return f, errors.New("limit: want a positive whole number")
		}
		f.Limit = min(n, MaxLimit)
	}
	return f, nil
}

func parseStatus(s string) (dedupe.Status, error) {
	st, err := dedupe.ParseStatus(s)
	if err != nil || st.Unretried { // unretried lists are answered before a filter is read
		return dedupe.Status{}, errors.New("status: want processing, done, unknown, released, unretried or pending")
	}
	return st, nil
}

type eventsPage struct {
	Title   string
	Sender  string
	Key     string // a whole part of the key (or the key)
	Status  string
	Limit   int
	Senders []string
	States  []string
	Rows    []eventRow
	Error   string
}

type eventRow struct {
	dedupe.Record
	Age          string
	LeaseExpired bool // processing, but its lease ended: the next delivery takes it over
	// Owed: where the durable delivery still owed to the site stands
	// (view.PendingText); "" when none is owed.
	Owed string
}

func (h *Handler) uiEvents(w http.ResponseWriter, r *http.Request) {
	p := eventsPage{Title: "Events", States: []string{"processing", "done", "unknown", "released", dedupe.PendingStatus}}
	if h.o.Unretried != nil {
		p.States = append(p.States, "unretried")
	}
	if r.URL.Query().Get("status") == "unretried" && h.o.Unretried != nil {
		h.uiUnretried(w, r, p)
		return
	}
	f, err := listFilter(r, true)
	p.Sender, p.Key, p.Status, p.Limit = f.Sender, f.KeyPart, string(f.State), f.Limit
	if f.Pending {
		p.Status = dedupe.PendingStatus
	}
	if err != nil {
		p.Error = err.Error()
		h.render(w, http.StatusBadRequest, "events.html", p)
		return
	}
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	recs, err := h.o.Store.List(ctx, f)
	if err != nil {
		h.uiStoreError(w, "list", err)
		return
	}
	now := h.o.Now()
	seen := map[string]bool{}
	for _, rec := range recs {
		row := eventRow{Record: rec, Age: Age(now, rec.ReceivedAt), LeaseExpired: rec.LeaseExpired(now)}
		if rec.Pending != nil {
			row.Owed = view.PendingText(rec.Pending, now)
		}
		p.Rows = append(p.Rows, row)
		if !seen[rec.Sender] {
			seen[rec.Sender] = true
			p.Senders = append(p.Senders, rec.Sender)
		}
	}
	h.render(w, http.StatusOK, "events.html", p)
}

type eventPage struct {
	Title  string
	Record view.RecordJSON
	Age    string
	// Headers are the stored response headers, sorted by name.
	Headers [][2]string
	CSRF    string // the redeliver form's token
	// LeaseExpired: processing, but the lease ended (the proxy died).
	LeaseExpired bool
	Note         string // what the last redelivery came to
	// CanRedeliver: this listener can redeliver (it belongs to serve).
	CanRedeliver bool
	// Owed: where the durable delivery still owed to the site stands
	// (view.PendingText); "" when none is owed.
	Owed string
}

func (h *Handler) uiEvent(w http.ResponseWriter, r *http.Request) {
	sender, key := r.PathValue("sender"), r.PathValue("key")
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	rec, err := h.o.Store.Get(ctx, sender, key)
	if err != nil {
		h.uiStoreError(w, "get", err)
		return
	}
	p := eventPage{Title: sender + " / " + key, Record: view.Record(rec), Age: Age(h.o.Now(), rec.ReceivedAt), LeaseExpired: rec.LeaseExpired(h.o.Now()),
		CSRF: h.csrfToken(r), Note: r.URL.Query().Get("note"), CanRedeliver: h.o.Redeliver != nil}
	if rec.Pending != nil {
		p.Owed = view.PendingText(rec.Pending, h.o.Now())
	}
	if rec.Response != nil {
		for _, name := range slices.Sorted(maps.Keys(rec.Response.Header)) {
			for _, v := range rec.Response.Header[name] {
				p.Headers = append(p.Headers, [2]string{name, v})
			}
		}
	}
	h.render(w, http.StatusOK, "event.html", p)
}

func eventURL(sender, key string) string {
	return "/ui/events/" + url.PathEscape(sender) + "/" + url.PathEscape(key)
}
