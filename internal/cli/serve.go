package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v2"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/cache"
	"github.com/hookonce/hookonce/dedupe/readiness"
	"github.com/hookonce/hookonce/dedupe/retention"
	"github.com/hookonce/hookonce/dedupe/view"
	"github.com/hookonce/hookonce/proxy"
)

// storeWarner is a store with something to say at start (postgres.Store).
type storeWarner interface {
	Warnings(ctx context.Context) []string
}

func serveCommand(b Build) *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the sidecar in front of the site",
		Flags: serveFlags(),
		Action: func(c *cli.Context) error {
			cfg := configFromFlags(c)
			if err := cfg.Validate(); err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			return serve(c.Context, cfg, b, c.App.ErrWriter)
		},
	}
}

// serve runs Main until SIGINT or SIGTERM, reloading the config file on
// SIGHUP.
func serve(ctx context.Context, cfg Config, b Build, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Registered before anything slow: an early SIGHUP (systemd's reload)
	// must not kill the process with the signal's default action.
	reloads := make(chan os.Signal, 1)
	signal.Notify(reloads, syscall.SIGHUP)
	defer signal.Stop(reloads)

	m := NewMain(cfg, b.Version, stderr)
	m.Revision = b.Revision
	if err := m.Run(ctx); err != nil {
		return cli.Exit(err.Error(), exitRuntime)
	}
	for {
		select {
		case err := <-m.Failed():
			_ = m.Close()
			return cli.Exit(err.Error(), exitRuntime)
		case <-reloads:
			m.Reload()
		case <-ctx.Done():
			return m.Close()
		}
	}
}

// Main is a running `hookonce serve`: the proxy on Config.Listen, the
// admin listener beside it, and their background loops, over one store.
// Run starts it and returns once both listeners accept; Close drains it.
// Tests run it in-process with both addresses on 127.0.0.1:0.
type Main struct {
	Config   Config
	Version  string
	Revision string    // the commit, in hookonce_build_info; "" when unknown
	Stderr   io.Writer // where the logs go

	log     *slog.Logger
	store   dedupe.Store
	proxy   *proxy.Proxy
	srv     *http.Server
	ln      net.Listener
	admin   *admin.Server
	failed  chan error
	served  chan struct{} // closed when srv.Serve returned
	err     error         // srv.Serve's, read after served is closed
	cancel  context.CancelFunc
	loops   sync.WaitGroup
	closing sync.Once
	// reloadOK and reloadAt are hookonce_config_last_reload_successful
	// and …_success_timestamp_seconds.
	reloadOK, reloadAt prometheus.Gauge

	readinessSenders atomic.Pointer[[]readiness.Sender] // the senders the readiness report judges (readiness.go)
	notifyState                                         // the operator's notices (notify.go)
}

// siteCheckTimeout bounds the dial that tells whether the site answers.
const siteCheckTimeout = 2 * time.Second

// siteCheck dials the site: it answers when a TCP connection to the
// upstream's host and port opens. Nothing is sent (a request would run
// the site's code), and the connection is closed at once.
func (m *Main) siteCheck(ctx context.Context) error {
	u := m.Config.upstream
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return err
	}
	return conn.Close()
}

// NewMain returns a Main that logs to stderr.
func NewMain(cfg Config, version string, stderr io.Writer) *Main {
	return &Main{Config: cfg, Version: version, Stderr: stderr}
}

// Run validates the Config (unless Validate already succeeded), opens the
// store (Open migrates it), and starts the listeners and the background loops,
// which stop when ctx is done or at Close. It returns once serving; an
// error means nothing is left running.
func (m *Main) Run(ctx context.Context) (err error) {
	cfg := &m.Config
	if cfg.contract == nil {
		if err := cfg.Validate(); err != nil {
			return err
		}
	}
	log, err := newLogger(m.Stderr, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return err
	}
	m.log = log
	if cfg.envNote != "" {
		log.Warn(cfg.envNote)
	}
	for _, w := range cfg.contract.Warnings {
		log.Warn(w)
	}
	if cfg.ConfigPath != "" {
		for _, w := range secretFileWarnings(cfg.ConfigPath) {
			log.Warn(w)
		}
	}
	if len(cfg.contract.Senders) == 0 {
		log.Warn("no senders configured: every request passes through untouched")
	}

	store, err := openStore(ctx, cfg.Store, readWrite)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer func() {
		if err != nil {
			store.Close()
		}
	}()
	// Settings the store's sessions lack (PostgreSQL behind a pooler).
	if w, ok := store.(storeWarner); ok {
		for _, msg := range w.Warnings(ctx) {
			log.Warn(msg)
		}
	}
	// Repeats of finished events are answered from memory; the admin API
	// goes through the same cache, so its deletes evict at once.
	if cfg.ReplayCacheSize != 0 {
		store = cache.New(store, cache.Options{Size: cfg.ReplayCacheSize, TTL: cfg.ReplayCacheTTL})
	}
	m.store = store

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(Build{Version: m.Version, Revision: m.Revision}.collector())
	if err := m.startNotify(reg); err != nil {
		return err
	}
	p, err := proxy.New(proxy.Options{Upstream: cfg.upstream, Contract: cfg.contract, Store: store, Logger: log, Registerer: reg,
		KeepIdle: cfg.UpstreamKeepIdle, Failpoint: failpoint(cfg.Failpoint), Notice: m.proxyNotice, DurableBackoff: cfg.backoff})
	if err != nil {
		return err
	}
	m.proxy = p
	m.reloadOK = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hookonce_config_last_reload_successful",
		Help: "Whether the last reload of the config file (SIGHUP) was taken (1) or refused, the previous rules staying in force (0); 1 at start.",
	})
	m.reloadAt = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hookonce_config_last_reload_success_timestamp_seconds",
		Help: "When the config in force was loaded (at start or by the last successful reload), Unix seconds.",
	})
	reg.MustRegister(m.reloadOK, m.reloadAt)
	m.reloadOK.Set(1)
	m.reloadAt.SetToCurrentTime()
	m.setReadinessSenders(cfg.contract)
	gauge := readiness.NewGauge(reg)

	as, err := m.startAdmin(reg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		m.stopAdmin(as)
		return fmt.Errorf("listen: %w", err)
	}
	m.admin, m.ln = as, ln
	m.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// No ReadTimeout/WriteTimeout: pass-through uploads and streams may
		// be long. Webhook deliveries get per-request deadlines instead.
	}
	m.failed = make(chan error, 2)
	m.served = make(chan struct{})
	go func() {
		m.err = m.srv.Serve(ln)
		close(m.served)
		if !errors.Is(m.err, http.ErrServerClosed) {
			m.failed <- fmt.Errorf("serve: %w", m.err)
		}
	}()
	log.Info("hookonce serving", "listen", ln.Addr().String(), "upstream", cfg.upstream.Redacted(),
		"store", dedupe.RedactDSN(cfg.Store), "senders", len(cfg.contract.Senders), "version", m.Version, "revision", m.Revision)

	loopCtx, cancel := context.WithCancel(ctx)
	m.cancel = cancel
	m.loops.Add(7)
	go func() { defer m.loops.Done(); m.notifier.Run(loopCtx) }()
	go func() {
		// Said at start, so a site that is not up yet (or an upstream
		// written wrong) is in the first lines of the log, not found at
		// the first lost delivery.
		defer m.loops.Done()
		cctx, ccancel := context.WithTimeout(loopCtx, siteCheckTimeout)
		defer ccancel()
		if err := m.siteCheck(cctx); err != nil && loopCtx.Err() == nil {
			log.Warn("the site does not answer at start: new events will get 502 (and the sender retries) until it does",
				"upstream", cfg.upstream.Redacted(), "err", err)
		}
	}()
	go func() {
		defer m.loops.Done()
		select {
		case err := <-as.Done():
			m.failed <- fmt.Errorf("admin listener: %w", err)
		case <-loopCtx.Done():
		}
	}()
	go func() { defer m.loops.Done(); purgeLoop(loopCtx, store, !isSQLite(cfg.Store), log) }()
	go func() { defer m.loops.Done(); p.WatchUnretried(loopCtx, cfg.UnretriedEvery) }()
	go func() { defer m.loops.Done(); p.RunDurable(loopCtx) }()
	go func() {
		defer m.loops.Done()
		gauge.Watch(loopCtx, readinessEvery, func(ctx context.Context) (readiness.Report, error) {
			r, err := m.readinessReport(ctx, false, time.Time{})
			if err == nil {
				m.noticeReadiness(r)
			}
			return r, err
		}, log)
	}()
	return nil
}

// Addr is the proxy's address (after Run).
func (m *Main) Addr() net.Addr { return m.ln.Addr() }

// AdminAddr is the admin listener's address (after Run).
func (m *Main) AdminAddr() net.Addr { return m.admin.Addr() }

// Failed delivers an error when a listener stops serving on its own.
func (m *Main) Failed() <-chan error { return m.failed }

// Reload swaps in the config file's current rules (serve does on SIGHUP),
// with the secrets as the environment file (Config.EnvFile) and the
// secret files hold them now; an invalid file is refused and the rules in
// force stay.
func (m *Main) Reload() {
	path, log := m.Config.ConfigPath, m.log
	if path == "" {
		log.Info("SIGHUP: no config file to reload")
		return
	}
	ct, note, err := m.Config.loadContract()
	if note != "" {
		log.Warn(note)
	}
	if err != nil {
		m.reloadOK.Set(0)
		log.Error("config reload refused; the previous rules stay in force", "file", path,
			"problems", strings.ReplaceAll(err.Error(), "\n", "; "))
		m.noticeReload(path, err)
		return
	}
	m.reloadOK.Set(1)
	m.reloadAt.SetToCurrentTime()
	for _, w := range ct.Warnings {
		log.Warn(w)
	}
	m.proxy.SetContract(ct)
	m.setReadinessSenders(ct)
	m.reloadNotify(ct)
	log.Info("config reloaded", "file", path, "senders", len(ct.Senders))
}

// Close stops accepting, lets deliveries at the site finish for up to
// Config.DrainTimeout, then aborts the rest (releasing their claims),
// stops the admin listener and the loops, and closes the store. Safe to
// call twice, and a no-op when Run did not succeed.
func (m *Main) Close() error {
	if m.cancel == nil {
		return nil
	}
	m.closing.Do(func() {
		m.cancel()
		m.shutdown()
		m.stopAdmin(m.admin)
		m.loops.Wait()
		m.store.Close()
	})
	return nil
}

func (m *Main) shutdown() {
	drain, log := m.Config.DrainTimeout, m.log
	log.Info("shutting down: draining deliveries", "drain_timeout", drain)
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	shut := make(chan error, 1)
	// The server waits a little longer than the drain, so that deliveries
	// aborted at its end still write their 503 before connections close.
	sctx, scancel := context.WithTimeout(context.Background(), drain+2*time.Second)
	defer scancel()
	go func() { shut <- m.srv.Shutdown(sctx) }()
	if err := m.proxy.Close(ctx); err != nil {
		log.Warn("deliveries aborted at shutdown; their claims were released", "err", err)
	}
	select {
	case <-shut:
	case <-time.After(2 * time.Second):
	}
	_ = m.srv.Close()
	<-m.served
	if err := m.err; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("server stopped", "err", err)
	}
	log.Info("stopped")
}

// purgeLoop removes expired records every minute, in batches of
// retention.BackgroundBatch so it never holds the store long, paced by
// retention.Background so the claims meanwhile hardly notice (perClaim:
// the store is not SQLite; the pace then begins at one batch a second
// and goes faster only while it has not caught up).
func purgeLoop(ctx context.Context, store dedupe.Store, perClaim bool, log *slog.Logger) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	purger := retention.Background(store, perClaim)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		total, err := purger.Run(ctx, dedupe.PurgeRequest{Limit: retention.BackgroundBatch})
		if err != nil && ctx.Err() == nil { // not the shutdown's
			log.Warn("purge of expired records failed", "err", err)
		}
		if total > 0 {
			log.Info("purged expired records", "records", total)
		}
	}
}

// failpoint returns, for HOOKONCE_TEST_FAILPOINT=claimed|answered, a hook
// that announces the point on stderr and then blocks the delivery for
// good, so a fault test can kill -9 the process exactly there; nil
// otherwise. It is a test seam: never set it in production.
func failpoint(name string) func(string) {
	if name == "" {
		return nil
	}
	return func(point string) {
		if point == name {
			fmt.Fprintf(os.Stderr, "hookonce: failpoint %s reached\n", point)
			select {}
		}
	}
}

// startAdmin starts the admin listener over the (cached) store and the
// proxy's unretried list and redelivery.
func (m *Main) startAdmin(reg *prometheus.Registry) (*admin.Server, error) {
	ac, p, log := &m.Config, m.proxy, m.log
	alog := log.With("component", "admin")
	h, err := admin.New(admin.Options{Store: m.store, Gatherer: reg, Token: ac.adminToken, Logger: alog, ListenAddr: ac.AdminListen,
		ProbeInterval: ac.AdminWriteProbeInterval, SessionTTL: ac.AdminSessionTTL, SecureCookie: ac.AdminSecureCookie,
		Site: m.siteCheck,
		Unretried: func(ctx context.Context, sender string) ([]dedupe.Record, error) {
			return p.Unretried(ctx, sender, time.Now())
		},
		Redeliver: func(ctx context.Context, sender, key string, force bool) (admin.Redelivery, error) {
			res, err := p.Redeliver(ctx, sender, key, force)
			for _, refusal := range []error{proxy.ErrNotKept, proxy.ErrDone, proxy.ErrInProgress, proxy.ErrNoSender, proxy.ErrOwed} {
				if errors.Is(err, refusal) {
					return admin.Redelivery{}, fmt.Errorf("%w: %w", admin.ErrRefused, err)
				}
			}
			if err != nil {
				return admin.Redelivery{}, err
			}
			return admin.Redelivery{Outcome: res.Outcome, Status: res.Status, Body: string(res.Body)}, nil
		},
		Readiness: func(ctx context.Context, since time.Time) (readiness.Report, error) {
			return m.readinessReport(ctx, true, since)
		},
		Accept: func(ctx context.Context, sender, key, id, by string) (admin.Acceptance, error) {
			res, err := p.Accept(ctx, sender, key, id, by)
			if errors.Is(err, proxy.ErrNoSender) {
				err = fmt.Errorf("%w: %w", admin.ErrRefused, err)
			}
			return admin.Acceptance{Conflict: view.Conflict(res.Conflict),
				Redelivery: admin.Redelivery{Outcome: res.Outcome, Status: res.Status, Body: string(res.Body)}}, err
		},
	})
	if err != nil {
		return nil, err
	}
	as, err := admin.Listen(ac.AdminListen, h, alog)
	if err != nil {
		return nil, err
	}
	log.Info("admin listener serving", "listen", as.Addr().String(), "auth", ac.adminToken != "")
	return as, nil
}

func (m *Main) stopAdmin(as *admin.Server) {
	log := m.log
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := as.Shutdown(ctx); err != nil {
		log.Warn("admin listener stopped", "err", err)
	}
}
