package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookonce/hookonce/admin"
	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe/cache"
	"github.com/hookonce/hookonce/proxy"
)

const defaultAdminListen = "127.0.0.1:9090"

// Config is everything serve needs. serve builds one from its flags (each
// also read from HOOKONCE_<FLAG>) and the config file; Validate checks it
// whole and resolves what the file adds.
type Config struct {
	ConfigPath string // sender rules (YAML); "" lets every request pass through
	Listen     string // "" takes the file's listen:, else contract.DefaultListen
	Upstream   string // "" takes the file's upstream:
	Store      string // a DSN openStore knows

	ReplayCacheSize int // 0 disables the replay cache
	ReplayCacheTTL  time.Duration
	UnretriedEvery  time.Duration
	DrainTimeout    time.Duration
	// UpstreamKeepIdle is how long a connection to an http:// site may be
	// kept for the next webhook forward (proxy.Options.KeepIdle); 0 dials
	// one per forward.
	UpstreamKeepIdle time.Duration

	AdminListen             string
	AdminToken              string
	AdminTokenFile          string // read whole, whitespace trimmed; excludes AdminToken
	AdminWriteProbeInterval time.Duration
	AdminSessionTTL         time.Duration
	AdminSecureCookie       bool

	LogFormat string // text or json
	LogLevel  string // debug, info, warn or error

	// Failpoint is HOOKONCE_TEST_FAILPOINT (claimed|answered): a test seam
	// that blocks a delivery there for good. Never set it in production.
	Failpoint string

	// Resolved by Validate.
	contract   *contract.Contract
	upstream   *url.URL
	adminToken string
}

// DefaultConfig is serve's defaults, as its flags show them.
func DefaultConfig() Config {
	return Config{
		Store:                   defaultStore,
		ReplayCacheSize:         cache.DefaultSize,
		ReplayCacheTTL:          cache.DefaultTTL,
		UnretriedEvery:          time.Minute,
		DrainTimeout:            30 * time.Second,
		UpstreamKeepIdle:        proxy.DefaultKeepIdle,
		AdminListen:             defaultAdminListen,
		AdminWriteProbeInterval: admin.DefaultProbeInterval,
		AdminSessionTTL:         admin.DefaultSessionTTL,
		LogFormat:               "text",
		LogLevel:                "info",
	}
}

func serveFlags() []cli.Flag {
	d := DefaultConfig()
	return []cli.Flag{
		&cli.StringFlag{Name: "upstream", EnvVars: []string{"HOOKONCE_UPSTREAM"}, Usage: "the site's base URL, e.g. http://127.0.0.1:8000"},
		&cli.StringFlag{Name: "listen", EnvVars: []string{"HOOKONCE_LISTEN"}, Usage: "address senders reach (default " + contract.DefaultListen + ")"},
		&cli.StringFlag{Name: "config", EnvVars: []string{"HOOKONCE_CONFIG"}, Usage: "sender rules (YAML); without it every request passes through"},
		storeFlag(),
		&cli.IntFlag{Name: "replay-cache-size", Value: d.ReplayCacheSize, EnvVars: []string{"HOOKONCE_REPLAY_CACHE_SIZE"}, Usage: "done records kept in memory to answer repeats without a store call (0 disables)"},
		&cli.DurationFlag{Name: "replay-cache-ttl", Value: d.ReplayCacheTTL, EnvVars: []string{"HOOKONCE_REPLAY_CACHE_TTL"}, Usage: "how long a cached record answers before the store is asked again (an operator's delete on another replica is seen after it)"},
		&cli.DurationFlag{Name: "unretried-every", Value: d.UnretriedEvery, EnvVars: []string{"HOOKONCE_UNRETRIED_EVERY"}, Usage: "how often events whose senders gave up are counted (hookonce_unretried_events) and logged"},
		&cli.DurationFlag{Name: "upstream-keepalive", Value: d.UpstreamKeepIdle, EnvVars: []string{"HOOKONCE_UPSTREAM_KEEPALIVE"},
			Usage: "how long a connection to an http:// site may wait for the next webhook forward; keep it well below the site's keep-alive timeout (0: a new connection for every forward)"},
		&cli.DurationFlag{Name: "drain-timeout", Value: d.DrainTimeout, EnvVars: []string{"HOOKONCE_DRAIN_TIMEOUT"}, Usage: "on SIGTERM, how long deliveries at the site may finish before they are aborted and their claims released"},
		&cli.StringFlag{Name: "admin-listen", Value: d.AdminListen, EnvVars: []string{"HOOKONCE_ADMIN_LISTEN"},
			Usage: "address of the admin listener (metrics, health, API, /ui); a non-loopback address needs a token"},
		&cli.StringFlag{Name: "admin-token", EnvVars: []string{"HOOKONCE_ADMIN_TOKEN"},
			Usage: "bearer token the admin listener requires (prefer --admin-token-file: flags show in ps)"},
		&cli.StringFlag{Name: "admin-token-file", EnvVars: []string{"HOOKONCE_ADMIN_TOKEN_FILE"},
			Usage: "file holding the admin token (read whole, surrounding whitespace trimmed)"},
		&cli.DurationFlag{Name: "admin-write-probe-interval", Value: d.AdminWriteProbeInterval,
			EnvVars: []string{"HOOKONCE_ADMIN_WRITE_PROBE_INTERVAL"},
			Usage:   "/readyz writes a probe to the store at most this often and answers from the last result in between"},
		&cli.DurationFlag{Name: "admin-session-ttl", Value: d.AdminSessionTTL, EnvVars: []string{"HOOKONCE_ADMIN_SESSION_TTL"},
			Usage: "how long a sign-in to the /ui page lasts"},
		&cli.BoolFlag{Name: "admin-secure-cookie", EnvVars: []string{"HOOKONCE_ADMIN_SECURE_COOKIE"},
			Usage: "mark the /ui session cookie Secure: set it when browsers reach the admin listener through a proxy that terminates TLS"},
		&cli.StringFlag{Name: "log-format", Value: d.LogFormat, EnvVars: []string{"HOOKONCE_LOG_FORMAT"}, Usage: "text or json"},
		&cli.StringFlag{Name: "log-level", Value: d.LogLevel, EnvVars: []string{"HOOKONCE_LOG_LEVEL"}, Usage: "debug, info, warn or error"},
	}
}

// configFromFlags reads serve's flags (and so their env vars) into a
// Config; it checks nothing.
func configFromFlags(c *cli.Context) Config {
	return Config{
		ConfigPath:              c.String("config"),
		Listen:                  c.String("listen"),
		Upstream:                c.String("upstream"),
		Store:                   c.String("store"),
		ReplayCacheSize:         c.Int("replay-cache-size"),
		ReplayCacheTTL:          c.Duration("replay-cache-ttl"),
		UnretriedEvery:          c.Duration("unretried-every"),
		DrainTimeout:            c.Duration("drain-timeout"),
		UpstreamKeepIdle:        c.Duration("upstream-keepalive"),
		AdminListen:             c.String("admin-listen"),
		AdminToken:              c.String("admin-token"),
		AdminTokenFile:          c.String("admin-token-file"),
		AdminWriteProbeInterval: c.Duration("admin-write-probe-interval"),
		AdminSessionTTL:         c.Duration("admin-session-ttl"),
		AdminSecureCookie:       c.Bool("admin-secure-cookie"),
		LogFormat:               c.String("log-format"),
		LogLevel:                c.String("log-level"),
		Failpoint:               os.Getenv("HOOKONCE_TEST_FAILPOINT"),
	}
}

// Validate loads the config file and the admin token file and checks the
// whole Config, reporting every problem at once (one per line). It
// refuses an unauthenticated admin listener reachable from other hosts.
// Its errors are usage errors (exit 2); nothing is opened or listened on.
func (cfg *Config) Validate() error {
	var errs []error
	if _, err := parseLogLevel(cfg.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format %q: want text or json", cfg.LogFormat))
	}

	cfg.contract = contract.Empty()
	fileLoaded := true
	if cfg.ConfigPath != "" {
		ct, err := contract.Load(cfg.ConfigPath)
		if err != nil {
			errs = append(errs, err)
			fileLoaded = false
		} else {
			cfg.contract = ct
		}
	}
	cfg.Listen = firstNonEmpty(cfg.Listen, cfg.contract.Listen, contract.DefaultListen)
	file := cfg.ConfigPath
	if file == "" {
		file = "command line"
	}
	switch up := firstNonEmpty(cfg.Upstream, cfg.contract.Upstream); {
	case up == "" && !fileLoaded:
		// The file that failed may name it; its problems are reported.
	case up == "":
		errs = append(errs, &contract.Error{File: file, Problems: []contract.Problem{{Field: "upstream",
			Msg: "required: --upstream, HOOKONCE_UPSTREAM or upstream: in the config file"}}})
	default:
		u, err := url.Parse(up)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, &contract.Error{File: file, Problems: []contract.Problem{{Field: "upstream",
				Msg: fmt.Sprintf("%q: want an http:// or https:// URL with a host", up)}}})
		} else {
			cfg.upstream = u
		}
	}

	if cfg.UpstreamKeepIdle < 0 {
		errs = append(errs, fmt.Errorf("--upstream-keepalive %s: want 0 (a new connection for every forward) or a positive duration such as 500ms", cfg.UpstreamKeepIdle))
	}
	if cfg.AdminWriteProbeInterval <= 0 {
		errs = append(errs, fmt.Errorf("--admin-write-probe-interval %s: want a positive duration such as 5s", cfg.AdminWriteProbeInterval))
	}
	if cfg.AdminSessionTTL <= 0 {
		errs = append(errs, fmt.Errorf("--admin-session-ttl %s: want a positive duration such as 12h", cfg.AdminSessionTTL))
	}
	cfg.adminToken = cfg.AdminToken
	tokenOK := true
	if file := cfg.AdminTokenFile; file != "" {
		switch b, err := os.ReadFile(file); {
		case cfg.AdminToken != "":
			errs = append(errs, errors.New("--admin-token and --admin-token-file: set one, not both"))
			tokenOK = false
		case err != nil:
			errs = append(errs, fmt.Errorf("--admin-token-file: %w", err))
			tokenOK = false
		default:
			cfg.adminToken = strings.TrimSpace(string(b))
			if cfg.adminToken == "" {
				errs = append(errs, fmt.Errorf("--admin-token-file %s: the file is empty", file))
				tokenOK = false
			}
		}
	}
	switch {
	case cfg.AdminListen == "":
		errs = append(errs, errors.New("--admin-listen: want host:port, e.g. "+defaultAdminListen))
	case tokenOK && cfg.adminToken == "" && !admin.IsLoopback(cfg.AdminListen):
		errs = append(errs, fmt.Errorf("--admin-listen %s is not a loopback address and no admin token is set: "+
			"set --admin-token-file (or HOOKONCE_ADMIN_TOKEN), or listen on 127.0.0.1", cfg.AdminListen))
	}
	return errors.Join(errs...)
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func parseLogLevel(level string) (slog.Level, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return lv, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return lv, nil
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	lv, err := parseLogLevel(level)
	if err != nil {
		return nil, err
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
