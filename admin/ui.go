package admin

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/readiness"
	"github.com/hookonce/hookonce/dedupe/view"
)

// The inspection page: server-rendered, read-only, no JavaScript.
//
// A browser cannot send a bearer header from its address bar, so /ui also
// accepts a session cookie, set by /ui/login when it is given the admin
// token (a form POST, or GET ?token= for scripts and headless browsers).
// Each login gets a new random session id, kept server-side until it
// expires (Options.SessionTTL) or /ui/logout ends it; the cookie carries
// only that id, never the token. It is HttpOnly, SameSite=Strict, scoped
// to Path=/ui, and Secure when the login came over TLS or
// Options.SecureCookie says a proxy terminates TLS. The one thing the page
// changes are a redelivery, the release of a held event and the
// acceptance of a conflict, POSTs whose
// forms carry a CSRF token bound to the session (an HMAC of the session id
// under a per-process key), so another site cannot make a signed-in browser
// send them. Without a token there is no session and the CSRF token is
// the same for every visitor of the page; the Host rule of origin.go keeps
// the page to loopback names, so only a page of the listener's own origin
// can read it, and the origin rule refuses another site's form anyway.

//go:embed templates/*.html
var templateFS embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"eventURL": eventURL,
	"short":    shortHash,
	"utc":      func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"utcp":     func(t *time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"join":     strings.Join,
	// msDuration prints milliseconds as a duration (readiness.go).
	"msDuration": msDuration,
	// codeSpans renders the report's `code spans` as <code> (readiness.go).
	"codeSpans": codeSpans,
	"rulesLine": readiness.RulesLine,
	// signIn: whether this listener has sign-ins (an admin token), so the
	// page offers "Sign out"; each Handler replaces it (Handler.pages).
	"signIn": func() bool { return false },
}).ParseFS(templateFS, "templates/*.html"))

// CookieName is the /ui session cookie.
const CookieName = "hookonce_admin"

func (h *Handler) routeUI() {
	h.mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/events", http.StatusSeeOther)
	})
	h.mux.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/events", http.StatusSeeOther)
	})
	h.mux.HandleFunc("GET /ui/login", h.login)
	h.mux.HandleFunc("POST /ui/login", h.login)
	h.mux.HandleFunc("GET /ui/logout", h.logout)
	h.mux.Handle("GET /ui/events", h.uiAuth(h.uiEvents))
	h.mux.Handle("GET /ui/events/{sender}/{key...}", h.uiAuth(h.uiEvent))
	h.mux.Handle("GET /ui/conflicts", h.uiAuth(h.uiConflicts))
	h.mux.Handle("GET /ui/overview", h.uiAuth(h.uiOverview))
	// The page's forms carry the sender and the key in their bodies, never
	// in the action's path, where a key such as ../../release/shop/o1
	// would make the browser post to another operation. The path forms
	// stay for links and scripts that escape their parts.
	h.mux.Handle("POST /ui/redeliver", h.uiAuth(h.uiRedeliver))
	h.mux.Handle("POST /ui/release", h.uiAuth(h.uiRelease))
	h.mux.Handle("POST /ui/accept", h.uiAuth(h.uiAccept))
	h.mux.Handle("POST /ui/redeliver/{sender}/{key...}", h.uiAuth(h.uiRedeliver))
	h.mux.Handle("POST /ui/release/{sender}/{key...}", h.uiAuth(h.uiRelease))
	h.mux.Handle("POST /ui/accept/{sender}/{key...}", h.uiAuth(h.uiAccept))
}

// csrfToken is the token the page's forms carry for r's session: an HMAC of
// the session id (empty when the listener needs no sign-in) under a key
// made at start. Another origin can neither read nor compute it.
func (h *Handler) csrfToken(r *http.Request) string {
	id := ""
	if c, err := r.Cookie(CookieName); err == nil {
		id = c.Value
	}
	m := hmac.New(sha256.New, h.csrfKey)
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil))
}

// validCSRF checks the form's CSRF token; a refusal is answered.
func (h *Handler) validCSRF(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(h.csrfToken(r))) != 1 {
		h.render(w, http.StatusForbidden, "error.html", errorPage{Title: "Refused", Message: "The form is missing its CSRF token or it is stale: reload the event's page and try again."})
		return false
	}
	return true
}

// formTarget is the event a page's form acts on: the sender and key of
// its body (the page's forms), else of its path (escaped by whoever
// built it). A form without them is answered 400.
func (h *Handler) formTarget(w http.ResponseWriter, r *http.Request) (sender, key string, ok bool) {
	sender, key = r.PathValue("sender"), r.PathValue("key")
	if sender == "" && key == "" {
		sender, key = r.PostFormValue("sender"), r.PostFormValue("key")
	}
	if sender == "" || key == "" {
		h.render(w, http.StatusBadRequest, "error.html", errorPage{Title: "Refused", Message: "The form names no sender and key: reload the page and try again."})
		return "", "", false
	}
	return sender, key, true
}

// uiRelease frees a held event for an operator on the event's page, as
// hookonce release does: the record stays, released, with its history.
func (h *Handler) uiRelease(w http.ResponseWriter, r *http.Request) {
	if !h.validCSRF(w, r) {
		return
	}
	sender, key, ok := h.formTarget(w, r)
	if !ok {
		return
	}
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	was, err := h.release(ctx, sender, key)
	if err != nil {
		h.uiStoreError(w, "release", err)
		return
	}
	msg := fmt.Sprintf("Released (was %s): the next delivery of this event runs the site's handler.", was)
	http.Redirect(w, r, eventURL(sender, key)+"?note="+url.QueryEscape(msg), http.StatusSeeOther)
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

// uiAuthorized accepts the bearer header or the session cookie.
func (h *Handler) uiAuthorized(r *http.Request) bool {
	if h.authorized(r) {
		return true
	}
	c, err := r.Cookie(CookieName)
	if err != nil || h.o.Token == "" {
		return false
	}
	return h.sessions.valid(c.Value, h.o.Now())
}

// sessionCookie is the /ui cookie carrying value, which a browser keeps
// for maxAge seconds (-1: drop it now).
func (h *Handler) sessionCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: CookieName, Value: value, Path: "/ui", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || h.o.SecureCookie,
	}
}

func (h *Handler) uiAuth(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.uiAuthorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hookonce admin"`)
			h.render(w, http.StatusUnauthorized, "login.html", loginPage{Title: "Sign in", Next: nextPage(r.URL.RequestURI())})
			return
		}
		next(w, r)
	})
}

type loginPage struct {
	Title string
	Wrong bool
	Next  string // the page to go on to after signing in
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	if h.o.Token == "" {
		http.Redirect(w, r, "/ui/events", http.StatusSeeOther)
		return
	}
	var given string
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
		given = r.PostFormValue("token")
	} else {
		given = r.URL.Query().Get("token")
	}
	if given == "" {
		h.render(w, http.StatusOK, "login.html", loginPage{Title: "Sign in", Next: nextPage(r.FormValue("next"))})
		return
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(given)))
	if subtle.ConstantTimeCompare(got[:], h.token[:]) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hookonce admin"`)
		h.render(w, http.StatusUnauthorized, "login.html", loginPage{Title: "Sign in", Wrong: true, Next: nextPage(r.FormValue("next"))})
		return
	}
	now := h.o.Now()
	id := h.sessions.start(now, now.Add(h.o.SessionTTL))
	http.SetCookie(w, h.sessionCookie(r, id, int(h.o.SessionTTL/time.Second)))
	// Redirect so the token leaves the address bar and the history entry.
	http.Redirect(w, r, nextPage(r.FormValue("next")), http.StatusSeeOther)
}

// nextPage is where a login goes on: a page of this UI (so that a link to a
// record can be opened with ?next=), never another site.
func nextPage(next string) string {
	u, err := url.Parse(next)
	if err != nil || next == "" || u.Scheme != "" || u.Host != "" || u.User != nil ||
		!strings.HasPrefix(next, "/ui/") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/events"
	}
	return next
}

// logout ends the session for good (a copy of the cookie is worth nothing
// after it) and tells the browser to drop the cookie.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(CookieName); err == nil {
		h.sessions.end(c.Value)
	}
	http.SetCookie(w, h.sessionCookie(r, "", -1))
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
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
}

func (h *Handler) uiEvents(w http.ResponseWriter, r *http.Request) {
	p := eventsPage{Title: "Events", States: []string{"processing", "done", "unknown", "released"}}
	if h.o.Unretried != nil {
		p.States = append(p.States, "unretried")
	}
	if r.URL.Query().Get("status") == "unretried" && h.o.Unretried != nil {
		h.uiUnretried(w, r, p)
		return
	}
	f, err := listFilter(r, true)
	p.Sender, p.Key, p.Status, p.Limit = f.Sender, f.KeyPart, string(f.State), f.Limit
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
		p.Rows = append(p.Rows, eventRow{Record: rec, Age: Age(now, rec.ReceivedAt), LeaseExpired: rec.LeaseExpired(now)})
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
	if rec.Response != nil {
		for _, name := range slices.Sorted(maps.Keys(rec.Response.Header)) {
			for _, v := range rec.Response.Header[name] {
				p.Headers = append(p.Headers, [2]string{name, v})
			}
		}
	}
	h.render(w, http.StatusOK, "event.html", p)
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

type errorPage struct {
	Title   string
	Message string
}

func (h *Handler) uiStoreError(w http.ResponseWriter, op string, err error) {
	switch {
	case errors.Is(err, dedupe.ErrNotFound):
		h.render(w, http.StatusNotFound, "error.html", errorPage{Title: "Not found",
			Message: "No record for this sender and key: it was never claimed, was deleted, or expired."})
	default:
		h.log.Warn("admin: store call failed", "op", op, "err", err)
		h.render(w, http.StatusServiceUnavailable, "error.html", errorPage{Title: "Store unavailable",
			Message: "The store did not answer; see the hookonce log and retry."})
	}
}

// render executes a page into a buffer first, so a template error never
// leaves half a page behind.
func (h *Handler) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := h.pages.ExecuteTemplate(&buf, name, data); err != nil {
		h.log.Error("admin: page not rendered", "page", name, "err", err)
		http.Error(w, "page not rendered", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	// same-origin, not no-referrer: under no-referrer a browser sends
	// "Origin: null" on the page's own form POSTs, which a listener
	// without a token refuses unless Sec-Fetch-Site vouches for them.
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

func eventURL(sender, key string) string {
	return "/ui/events/" + url.PathEscape(sender) + "/" + url.PathEscape(key)
}

func shortHash(h string) string {
	if short := view.ShortHash(h); short != h {
		return short + "…"
	}
	return h
}

// Age renders how long ago t was, coarsely (42s, 5m, 3h, 4d), as the page
// and the CLI tables show it; "-" for a zero time.
func Age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
