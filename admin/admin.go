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
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookonce/hookonce/internal/problem"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/readiness"
	"github.com/hookonce/hookonce/dedupe/view"
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
	// (Store.Probe) before it writes again: however often readiness is
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

// Acceptance is what an operator's acceptance of a conflict came to: the
// conflict as marked, and the delivery of its payload under
// conflict.accepted_key.
type Acceptance struct {
	Conflict view.ConflictJSON `json:"conflict"`
	Redelivery
}

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

// writeProbe is the last result of Store.Probe, shared by every /readyz.
type writeProbe struct {
	mu      sync.Mutex
	at      time.Time     // when err was found; zero before the first probe
	err     error         // nil: the store took the write
	running chan struct{} // closed when the probe under way ends; nil when none runs
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

// authorized reports whether r carries the bearer token (or no token is
// configured).
func (h *Handler) authorized(r *http.Request) bool {
	if h.o.Token == "" {
		return true
	}
	scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	// Hashing first makes the comparison independent of the length of
	// either side.
	got := sha256.Sum256([]byte(strings.TrimSpace(cred)))
	return subtle.ConstantTimeCompare(got[:], h.token[:]) == 1
}

// bearer guards next with the admin token.
func (h *Handler) bearer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.authorized(r) {
			unauthorized(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="hookonce admin"`)
	problem.Write(w, http.StatusUnauthorized, "Unauthorized", "send Authorization: Bearer <admin token>")
}

func (h *Handler) healthz(w http.ResponseWriter, r *http.Request) {
	h.ready(w, r)
}

// readyz answers 200 when the store answers, is migrated (Ping) and takes
// writes (the write probe), 503 otherwise.
func (h *Handler) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.o.ReadyTimeout)
	defer cancel()
	if err := h.o.Store.Ping(ctx); err != nil {
		h.log.Warn("admin: store not ready", "err", err)
		h.notReady(w, r, "the store is unreachable or not migrated", err)
		return
	}
	if err := h.writable(ctx); err != nil {
		h.notReady(w, r, "the store answers but does not take writes", err)
		return
	}
	h.ready(w, r)
}

// notReady answers 503 with the reason. The probe is unauthenticated: the
// store's error goes only to a caller with the token (or to any caller
// when none is configured, on loopback), and always to the log.
func (h *Handler) notReady(w http.ResponseWriter, r *http.Request, reason string, err error) {
	detail := reason
	if h.authorized(r) {
		detail += ": " + err.Error()
	} else {
		detail += " (see the hookonce log)"
	}
	w.Header().Set("Retry-After", "5")
	problem.Write(w, http.StatusServiceUnavailable, "Not ready", detail)
}

// writable answers from the last write probe while it is younger than
// ProbeInterval, and otherwise probes, one caller at a time: callers that
// arrive meanwhile wait for that probe's result.
func (h *Handler) writable(ctx context.Context) error {
	p := &h.probe
	p.mu.Lock()
	for {
		if !p.at.IsZero() && h.o.Now().Sub(p.at) < h.o.ProbeInterval {
			err := p.err
			p.mu.Unlock()
			return err
		}
		if p.running == nil {
			break
		}
		wait := p.running
		p.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the write probe: %w", ctx.Err())
		}
		p.mu.Lock()
	}
	done := make(chan struct{})
	p.running = done
	was := p.err
	p.mu.Unlock()

	// The probe's result is shared: a caller that hangs up must not make
	// it a failure.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.o.ReadyTimeout)
	err := h.o.Store.Probe(pctx)
	cancel()

	p.mu.Lock()
	p.at, p.err, p.running = h.o.Now(), err, nil
	close(done)
	p.mu.Unlock()
	switch {
	case err != nil:
		h.log.Warn("admin: the store does not take writes", "err", err)
	case was != nil:
		h.log.Info("admin: the store takes writes again")
	}
	return err
}

func (h *Handler) storeCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.o.StoreTimeout)
}

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

// release frees a record for an operator (Store.Free), recorded as the
// operator's attempt, and logs it.
func (h *Handler) release(ctx context.Context, sender, key string) (dedupe.State, error) {
	was, err := h.o.Store.Free(ctx, sender, key, dedupe.OperatorRelease(h.o.Now()))
	if err == nil {
		h.log.Warn("admin: record released by an operator", "sender", sender, "key", key, "was", was)
	}
	return was, err
}

// releaseEvent is POST /v1/release/{sender}/{key}: the record stays,
// released, with its history (DELETE forgets it).
func (h *Handler) releaseEvent(w http.ResponseWriter, r *http.Request) {
	sender, key := r.PathValue("sender"), r.PathValue("key")
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	was, err := h.release(ctx, sender, key)
	if err != nil {
		h.storeError(w, "release", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sender": sender, "key": key, "released": true, "was": was})
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

// listFilter reads sender=, status= (when withState), key= (a whole part
// of the key, or the key: dedupe.ListFilter.KeyPart) and limit=.
func listFilter(r *http.Request, withState bool) (dedupe.ListFilter, error) {
	q := r.URL.Query()
	f := dedupe.ListFilter{Sender: q.Get("sender"), KeyPart: strings.TrimSpace(q.Get("key")), Limit: DefaultLimit}
	if len(f.KeyPart) > 512 {
		return f, errors.New("key: at most 512 bytes")
	}
	if withState {
		st, err := parseState(q.Get("status"))
		if err != nil {
			return f, err
		}
		f.State = st
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

func parseState(s string) (dedupe.State, error) {
	st, unretried, err := dedupe.ParseState(s)
	if err != nil || unretried { // unretried lists are answered before a filter is read
		return "", errors.New("status: want processing, done, unknown, released or unretried")
	}
	return st, nil
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
