package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v2"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/cache"
	"github.com/hookonce/hookonce/proxy"
)

func logFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-format", Value: "text", EnvVars: []string{"HOOKONCE_LOG_FORMAT"}, Usage: "text or json"},
		&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: []string{"HOOKONCE_LOG_LEVEL"}, Usage: "debug, info, warn or error"},
	}
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the sidecar in front of the site",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "upstream", EnvVars: []string{"HOOKONCE_UPSTREAM"}, Usage: "the site's base URL, e.g. http://127.0.0.1:8000"},
			&cli.StringFlag{Name: "listen", EnvVars: []string{"HOOKONCE_LISTEN"}, Usage: "address senders reach (default " + contract.DefaultListen + ")"},
			&cli.StringFlag{Name: "config", EnvVars: []string{"HOOKONCE_CONFIG"}, Usage: "sender rules (YAML); without it every request passes through"},
			storeFlag(),
			&cli.IntFlag{Name: "replay-cache-size", Value: cache.DefaultSize, EnvVars: []string{"HOOKONCE_REPLAY_CACHE_SIZE"}, Usage: "done records kept in memory to answer repeats without a store call (0 disables)"},
			&cli.DurationFlag{Name: "replay-cache-ttl", Value: cache.DefaultTTL, EnvVars: []string{"HOOKONCE_REPLAY_CACHE_TTL"}, Usage: "how long a cached record answers before the store is asked again (an operator's delete on another replica is seen after it)"},
			&cli.DurationFlag{Name: "unretried-every", Value: time.Minute, EnvVars: []string{"HOOKONCE_UNRETRIED_EVERY"}, Usage: "how often events whose senders gave up are counted (hookonce_unretried_events) and logged"},
			&cli.DurationFlag{Name: "drain-timeout", Value: 30 * time.Second, EnvVars: []string{"HOOKONCE_DRAIN_TIMEOUT"}, Usage: "on SIGTERM, how long deliveries at the site may finish before they are aborted and their claims released"},
		}, append(adminFlags(), logFlags()...)...),
		Action: serve,
	}
}

// serveConfig is everything serve needs, merged from file, env and flags.
type serveConfig struct {
	contract   *contract.Contract
	configPath string
	listen     string
	upstream   *url.URL
	storeDSN   string
	drain      time.Duration
}

func loadServeConfig(c *cli.Context) (*serveConfig, error) {
	sc := &serveConfig{configPath: c.String("config"), storeDSN: c.String("store"), drain: c.Duration("drain-timeout")}
	sc.contract = contract.Empty()
	if sc.configPath != "" {
		ct, err := contract.Load(sc.configPath)
		if err != nil {
			return nil, err
		}
		sc.contract = ct
	}
	sc.listen = firstNonEmpty(c.String("listen"), sc.contract.Listen, contract.DefaultListen)
	up := firstNonEmpty(c.String("upstream"), sc.contract.Upstream)
	file := sc.configPath
	if file == "" {
		file = "command line"
	}
	if up == "" {
		return nil, &contract.Error{File: file, Problems: []contract.Problem{{Field: "upstream",
			Msg: "required: --upstream, HOOKONCE_UPSTREAM or upstream: in the config file"}}}
	}
	u, err := url.Parse(up)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &contract.Error{File: file, Problems: []contract.Problem{{Field: "upstream",
			Msg: fmt.Sprintf("%q: want an http:// or https:// URL with a host", up)}}}
	}
	sc.upstream = u
	return sc, nil
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func serve(c *cli.Context) error {
	log, err := newLogger(c.App.ErrWriter, c.String("log-format"), c.String("log-level"))
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	sc, err := loadServeConfig(c)
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	adm, err := loadAdminConfig(c)
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	for _, w := range sc.contract.Warnings {
		log.Warn(w)
	}
	if len(sc.contract.Senders) == 0 {
		log.Warn("no senders configured: every request passes through untouched")
	}

	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Registered before anything slow: an early SIGHUP (systemd's reload)
	// must not kill the process with the signal's default action.
	reloads := make(chan os.Signal, 1)
	signal.Notify(reloads, syscall.SIGHUP)
	defer signal.Stop(reloads)

	store, err := openStore(ctx, sc.storeDSN, readWrite)
	if err != nil {
		return cli.Exit("open store: "+err.Error(), exitRuntime)
	}
	defer store.Close()
	if m, ok := store.(migrator); ok {
		if err := m.Migrate(ctx); err != nil {
			return cli.Exit("migrate store: "+err.Error(), exitRuntime)
		}
	}

	// Repeats of finished events are answered from memory; the admin API
	// goes through the same cache, so its deletes evict at once.
	if size := c.Int("replay-cache-size"); size != 0 {
		store = cache.New(store, cache.Options{Size: size, TTL: c.Duration("replay-cache-ttl")})
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	p, err := proxy.New(proxy.Options{Upstream: sc.upstream, Contract: sc.contract, Store: store, Logger: log, Registerer: reg,
		Failpoint: failpoint(os.Getenv("HOOKONCE_TEST_FAILPOINT"))})
	if err != nil {
		return cli.Exit(err.Error(), exitRuntime)
	}

	as, err := startAdmin(adm, store, p, reg, log)
	if err != nil {
		return cli.Exit(err.Error(), exitRuntime)
	}
	defer stopAdmin(as, log)

	ln, err := net.Listen("tcp", sc.listen)
	if err != nil {
		return cli.Exit("listen: "+err.Error(), exitRuntime)
	}
	srv := &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// No ReadTimeout/WriteTimeout: pass-through uploads and streams may
		// be long. Webhook deliveries get per-request deadlines instead.
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("hookonce serving", "listen", ln.Addr().String(), "upstream", sc.upstream.Redacted(),
		"store", dedupe.RedactDSN(sc.storeDSN), "senders", len(sc.contract.Senders), "version", version)

	go purgeLoop(ctx, store, log)
	go p.WatchUnretried(ctx, c.Duration("unretried-every"))

	for {
		select {
		case err := <-served:
			return cli.Exit("serve: "+err.Error(), exitRuntime)
		case err := <-as.Done():
			return cli.Exit("admin listener: "+err.Error(), exitRuntime)
		case <-reloads:
			reload(sc, p, log)
		case <-ctx.Done():
			return shutdown(srv, p, sc.drain, served, log)
		}
	}
}

// reload swaps in a new contract on SIGHUP; an invalid file is refused and
// the rules in force stay.
func reload(sc *serveConfig, p *proxy.Proxy, log *slog.Logger) {
	if sc.configPath == "" {
		log.Info("SIGHUP: no config file to reload")
		return
	}
	ct, err := contract.Load(sc.configPath)
	if err != nil {
		log.Error("config reload refused; the previous rules stay in force", "file", sc.configPath,
			"problems", strings.ReplaceAll(err.Error(), "\n", "; "))
		return
	}
	for _, w := range ct.Warnings {
		log.Warn(w)
	}
	p.SetContract(ct)
	log.Info("config reloaded", "file", sc.configPath, "senders", len(ct.Senders))
}

// shutdown stops accepting, lets deliveries at the site finish for up to
// drain, then aborts the rest (releasing their claims).
func shutdown(srv *http.Server, p *proxy.Proxy, drain time.Duration, served chan error, log *slog.Logger) error {
	log.Info("shutting down: draining deliveries", "drain_timeout", drain)
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	shut := make(chan error, 1)
	// The server waits a little longer than the drain, so that deliveries
	// aborted at its end still write their 503 before connections close.
	sctx, scancel := context.WithTimeout(context.Background(), drain+2*time.Second)
	defer scancel()
	go func() { shut <- srv.Shutdown(sctx) }()
	if err := p.Close(ctx); err != nil {
		log.Warn("deliveries aborted at shutdown; their claims were released", "err", err)
	}
	select {
	case <-shut:
	case <-time.After(2 * time.Second):
	}
	_ = srv.Close()
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("server stopped", "err", err)
	}
	log.Info("stopped")
	return nil
}

// purgeLoop removes expired records in bounded batches so it never holds
// the store long.
func purgeLoop(ctx context.Context, store dedupe.Store, log *slog.Logger) {
	const batch = 500
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		total := 0
		for {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			n, err := store.Purge(cctx, dedupe.PurgeRequest{Limit: batch})
			cancel()
			total += n
			if err != nil {
				log.Warn("purge of expired records failed", "err", err)
				break
			}
			if n < batch {
				break
			}
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
