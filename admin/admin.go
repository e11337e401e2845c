// Package admin is hookonce's admin listener: health probes, Prometheus
// metrics, the JSON API over stored records and conflicts, and a read-only
// inspection page (/ui) for people who would rather look than read JSON.
//
// It talks to dedupe.Store only and never imports a backend. It must never
// log or echo the admin token, and it logs no request or response body.
package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"time"

	"github.com/hookonce/hookonce/internal/problem"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/readiness"
)

// Defaults for Options fields left zero.
const (
	DefaultReadyTimeout  = 2 * time.Second
	DefaultStoreTimeout  = 5 * time.Second
	DefaultProbeInterval = 5 * time.Second
	// DefaultLimit is how many records or conflicts a list answers when the
	// caller names no limit; MaxLimit caps what a caller may ask for.
	DefaultLimit = 50
	MaxLimit     = 1000
)

// Options configure the admin handler. Store is required.
type Options struct {
	Store dedupe.Store
	// Gatherer is what /metrics exposes (the registry the proxy registered
	// on); nil serves an empty registry.
	Gatherer prometheus.Gatherer
	// Token, when non-empty, is required as "Authorization: Bearer <Token>"
	// on everything but /healthz and /readyz (/ui also takes the session
	// cookie that /ui/login sets for it). Empty means no authentication:
	// serve refuses that on a non-loopback address, and the handler
	// refuses what a browser could send on another site's behalf (a
	// foreign Host, a cross-origin write, an API write without
	// Content-Type: application/json; see origin.go).
	Token string
	// ListenAddr is the listener's address (host:port); without a token,
	// its host is accepted in the Host header besides the loopback names.
	ListenAddr string
	// SessionTTL is how long a /ui sign-in lasts; 0 means
	// DefaultSessionTTL.
	SessionTTL time.Duration
	// MaxSessions bounds the /ui sessions kept at once (when full, the one
	// closest to its end goes); 0 means DefaultMaxSessions.
	MaxSessions int
	// SecureCookie marks the /ui session cookie Secure even when the login
	// came over plain HTTP: set it when browsers reach the admin listener
	// through a proxy that terminates TLS. A login over TLS gets a Secure
	// cookie anyway.
	SecureCookie bool
	// Logger receives failures of store calls; nil discards.
	Logger *slog.Logger
	// ReadyTimeout bounds the store ping and write probe of /readyz; 0
	// means DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// ProbeInterval is how long /readyz goes by the last write probe
	// (Store.Probe) before it writes again: however often /readyz is
	// polled, the store sees at most one probe per interval. 0 means
	// DefaultProbeInterval.
	ProbeInterval time.Duration
	// StoreTimeout bounds every other store call; 0 means
	// DefaultStoreTimeout.
	StoreTimeout time.Duration
	// Now is the clock of the page's ages, of the write probe's interval
	// and of /ui sessions; nil means time.Now.
	Now func() time.Time
	// Unretried lists the events of a sender ("" for all) that were left
	// released or held past their sender's retry window; nil when this
	// process does not know the senders (status=unretried is then refused).
	Unretried func(ctx context.Context, sender string) ([]dedupe.Record, error)
	// Redeliver sends a stored event to the site again (the proxy's
	// Redeliver); nil disables POST …/redeliver.
	Redeliver func(ctx context.Context, sender, key string, force bool) (Redelivery, error)
	// Site checks that the site behind hookonce answers (serve dials it);
	// /readyz reports it without failing on it (site.go). nil: not
	// reported.
	Site func(ctx context.Context) error
	// Readiness builds the readiness report (serve's senders over the
	// store); nil when this process does not know the senders (the page
	// and GET /v1/readiness then say so).
	// since starts the window (zero: since each sender's rules last
	// changed), from ?since= of the page and the API.
	Readiness func(ctx context.Context, since time.Time) (readiness.Report, error)
	// Accept forwards the refused payload of a conflict to the site as an
	// event of its own, once (the proxy's Accept): id names the conflict,
	// "" the newest of the key; by is who accepts. nil disables
	// POST …/accept and the page's Accept button. Its refusals wrap
	// dedupe.ErrAccepted, dedupe.ErrNotAcceptable, dedupe.ErrNotFound or
	// ErrRefused.
	Accept func(ctx context.Context, sender, key, id, by string) (Acceptance, error)
}

// Handler serves the admin listener's routes.
type Handler struct {
	o         Options
	mux       *http.ServeMux
	log       *slog.Logger
	token     [sha256.Size]byte // SHA-256 of Options.Token; compared in constant time
	siteState siteState         // the last check of the site, for /readyz
	// sessions are the /ui sign-ins.
	sessions *sessions
	// csrfKey signs the /ui forms' tokens (random per process).
	csrfKey []byte

	probe writeProbe

	// pages are the /ui templates with this listener's signIn.
	pages *template.Template
}

// New builds the admin handler.
func New(o Options) (*Handler, error) {
	if o.Store == nil {
		return nil, errors.New("new admin handler: store is required")
	}
	if o.Gatherer == nil {
		o.Gatherer = prometheus.NewRegistry()
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.StoreTimeout <= 0 {
		o.StoreTimeout = DefaultStoreTimeout
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = DefaultProbeInterval
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &Handler{o: o, mux: http.NewServeMux(), log: o.Logger, sessions: newSessions(o.MaxSessions),
		csrfKey: []byte(rand.Text())}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if o.Token != "" {
		h.token = sha256.Sum256([]byte(o.Token))
	}
	signIn := o.Token != ""
	h.pages = template.Must(pages.Clone()).Funcs(template.FuncMap{"signIn": func() bool { return signIn }})

	h.mux.HandleFunc("GET /healthz", h.healthz)
	h.mux.HandleFunc("GET /readyz", h.readyz)
	h.mux.Handle("GET /metrics", h.bearer(promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(h.log.Handler(), slog.LevelWarn),
	})))
	// {key...}: event ids may contain slashes (escaped or not).
	h.mux.Handle("GET /v1/events/{sender}/{key...}", h.bearer(http.HandlerFunc(h.getEvent)))
	h.mux.Handle("DELETE /v1/events/{sender}/{key...}", h.bearer(h.apiWrite(http.HandlerFunc(h.deleteEvent))))
	h.mux.Handle("POST /v1/redeliver/{sender}/{key...}", h.bearer(h.apiWrite(http.HandlerFunc(h.redeliver))))
	h.mux.Handle("POST /v1/release/{sender}/{key...}", h.bearer(h.apiWrite(http.HandlerFunc(h.releaseEvent))))
	h.mux.Handle("POST /v1/accept/{sender}/{key...}", h.bearer(h.apiWrite(http.HandlerFunc(h.acceptConflict))))
	h.mux.Handle("GET /v1/events", h.bearer(http.HandlerFunc(h.listEvents)))
	h.mux.Handle("GET /v1/conflicts", h.bearer(http.HandlerFunc(h.listConflicts)))
	h.routeUI()
	h.routeReadiness()
	h.routeProfiling()
	// The listener's root is the inspection page's overview: whoever opens
	// http://127.0.0.1:8081/ in a browser lands there, signing in first
	// when there is a token (the redirect itself shows nothing).
	h.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/overview", http.StatusSeeOther)
	})
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		problem.Write(w, http.StatusNotFound, "Not found", "no such admin route")
	})
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.guard(w, r) {
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) storeCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.o.StoreTimeout)
}

// storeError maps a store error to an answer: the one place that does.
func (h *Handler) storeError(w http.ResponseWriter, op string, err error) {
	switch {
	case errors.Is(err, dedupe.ErrNotFound):
		problem.Write(w, http.StatusNotFound, "Not found", "no record for this sender and key")
	case errors.Is(err, dedupe.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		h.log.Warn("admin: store unavailable", "op", op, "err", err)
		w.Header().Set("Retry-After", "5")
		problem.Write(w, http.StatusServiceUnavailable, "Store unavailable", "the store did not answer; retry later")
	default:
		h.log.Error("admin: store call failed", "op", op, "err", err)
		problem.Write(w, http.StatusInternalServerError, "Store error", "the store call failed; see the hookonce log")
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
