// Sessions: the /ui sign-in (login, logout, the cookie and the table of
// sessions behind it) and the CSRF token bound to a session.

package admin

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Defaults for the /ui sessions.
const (
	DefaultSessionTTL  = 12 * time.Hour
	DefaultMaxSessions = 1000
)

// sessions are the /ui sign-ins: a random id per login, kept here (only
// its SHA-256, so a lookup's timing tells nothing about stored ids) with
// its expiry. Logging out or expiring removes an id for good; a restart
// signs everybody out.
type sessions struct {
	mu  sync.Mutex
	ids map[[sha256.Size]byte]time.Time // SHA-256 of the id → expiry
	max int
}

func newSessions(max int) *sessions {
	return &sessions{ids: map[[sha256.Size]byte]time.Time{}, max: max}
}

// start makes a session that ends at expires and returns its id. When the
// table is full the session closest to its end goes.
func (s *sessions) start(now, expires time.Time) string {
	id := rand.Text() // 26 base32 characters: 130 random bits
	key := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, exp := range s.ids {
		if !now.Before(exp) {
			delete(s.ids, k)
		}
	}
	for len(s.ids) >= s.max {
		var first [sha256.Size]byte
		var firstExp time.Time
		for k, exp := range s.ids {
			if firstExp.IsZero() || exp.Before(firstExp) {
				first, firstExp = k, exp
			}
		}
		delete(s.ids, first)
	}
	s.ids[key] = expires
	return id
}

// valid reports whether id is a session that has not ended by now.
func (s *sessions) valid(id string, now time.Time) bool {
	key := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.ids[key]
	if ok && !now.Before(exp) {
		delete(s.ids, key)
		return false
	}
	return ok
}

// end removes the session id, if there is one.
func (s *sessions) end(id string) {
	key := sha256.Sum256([]byte(id))
	s.mu.Lock()
	delete(s.ids, key)
	s.mu.Unlock()
}

// CookieName is the /ui session cookie.
const CookieName = "hookonce_admin"

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
