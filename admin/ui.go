package admin

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

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/readiness"
	"github.com/hookonce/hookonce/dedupe/view"
)

//go:embed templates/*.html
var templateFS embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"eventURL": eventURL,
	"short":    shortHash,
	"utc":      func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"utcp":     func(t *time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"join":     strings.Join,
	// msDuration prints milliseconds as a duration (readiness_page.go).
	"msDuration": msDuration,
	// codeSpans renders the report's `code spans` as <code> (readiness_page.go).
	"codeSpans": codeSpans,
	"rulesLine": readiness.RulesLine,
	// signIn: whether this listener has sign-ins (an admin token), so the
	// page offers "Sign out"; each Handler replaces it (Handler.pages).
	"signIn": func() bool { return false },
}).ParseFS(templateFS, "templates/*.html"))

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
