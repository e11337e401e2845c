package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
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
	// DurableBackoff is --durable-backoff as written: when a durable
	// delivery the site failed is tried again ("" for the default).
	DurableBackoff string
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

	// EnvFile is the environment file serve looks secret_env values up in
	// first, read again on every reload (SIGHUP): the one the unit loads,
	// found as the operator's commands find it (envFileFor). "" looks in
	// the process environment only. EnvFileRequired: a missing file is an
	// error (HOOKONCE_ENV_FILE named it) rather than no file.
	EnvFile         string
	EnvFileRequired bool

	// Failpoint is HOOKONCE_TEST_FAILPOINT (claimed|answered): a test seam
	// that blocks a delivery there for good. Never set it in production.
	Failpoint string

	// Resolved by Validate.
	envNote    string // secretEnv's warning, logged at start
	contract   *contract.Contract
	upstream   *url.URL
	adminToken string
	backoff    []time.Duration // DurableBackoff read; nil for the default
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
		serveStoreFlag(),
		&cli.IntFlag{Name: "replay-cache-size", Value: d.ReplayCacheSize, EnvVars: []string{"HOOKONCE_REPLAY_CACHE_SIZE"}, Usage: "done records kept in memory to answer repeats without a store call (0 disables)"},
		&cli.DurationFlag{Name: "replay-cache-ttl", Value: d.ReplayCacheTTL, EnvVars: []string{"HOOKONCE_REPLAY_CACHE_TTL"}, Usage: "how long a cached record answers before the store is asked again (an operator's delete on another replica is seen after it)"},
		&cli.DurationFlag{Name: "unretried-every", Value: d.UnretriedEvery, EnvVars: []string{"HOOKONCE_UNRETRIED_EVERY"}, Usage: "how often events whose senders gave up are counted (hookonce_unretried_events) and logged"},
		&cli.DurationFlag{Name: "upstream-keepalive", Value: d.UpstreamKeepIdle, EnvVars: []string{"HOOKONCE_UPSTREAM_KEEPALIVE"},
			Usage: "how long a connection to an http:// site may wait for the next webhook forward; keep it well below the site's keep-alive timeout (0: a new connection for every forward)"},
		&cli.StringFlag{Name: "durable-backoff", EnvVars: []string{"HOOKONCE_DURABLE_BACKOFF"},
			Usage: "when a delivery of an ack: durable sender that the site failed is tried again: waits separated by commas, the last repeated until retry_for ends (default " + backoffString(proxy.DefaultDurableBackoff) + ")"},
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
	cfg := Config{
		ConfigPath:              c.String("config"),
		Listen:                  c.String("listen"),
		Upstream:                c.String("upstream"),
		Store:                   c.String("store"),
		ReplayCacheSize:         c.Int("replay-cache-size"),
		ReplayCacheTTL:          c.Duration("replay-cache-ttl"),
		UnretriedEvery:          c.Duration("unretried-every"),
		DrainTimeout:            c.Duration("drain-timeout"),
		DurableBackoff:          c.String("durable-backoff"),
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
	cfg.EnvFile, cfg.EnvFileRequired = envFileFor(cfg.ConfigPath)
	return cfg
}

// secretEnv is how the config's secret_env names are looked up now: in
// the environment file (read again on each call), then in the process
// environment. Under systemd the process environment holds the file's
// values as they were at start; the file's current ones win, so a reload
// takes a changed secret. Nothing is put into the process environment.
//
// The host's file found by itself (not required) may be one the service's
// user cannot read: the hand-installed unit's DynamicUser and a root-only
// file, which systemd read as root at start. That is no error, but not
// "no file" either: the lookup is the process environment's, and note says
// that a changed secret then needs a restart.
func (cfg *Config) secretEnv() (env contract.LookupEnv, note string, err error) {
	if cfg.EnvFile == "" {
		return os.LookupEnv, "", nil
	}
	vars, err := readEnvFile(cfg.EnvFile, cfg.EnvFileRequired)
	if err != nil {
		if !cfg.EnvFileRequired && errors.Is(err, fs.ErrPermission) {
			return os.LookupEnv, "environment file " + cfg.EnvFile + " is not readable by this process: secret_env values come from the environment it was started with, so a secret changed there takes a restart, not a reload (let the service's user read the file to change that)", nil
		}
		return nil, "", err
	}
	file := make(map[string]string, len(vars))
	for _, kv := range vars {
		file[kv[0]] = kv[1]
	}
	return func(name string) (string, bool) {
		if v, ok := file[name]; ok {
			return v, true
		}
		return os.LookupEnv(name)
	}, "", nil
}

// loadContract loads the config file with secretEnv's lookup; note is
// secretEnv's, to be logged as a warning.
func (cfg *Config) loadContract() (ct *contract.Contract, note string, err error) {
	env, note, err := cfg.secretEnv()
	if err != nil {
		return nil, "", err
	}
	ct, err = contract.LoadEnv(cfg.ConfigPath, env)
	return ct, note, err
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
	if b, err := parseBackoff(cfg.DurableBackoff); err != nil {
		errs = append(errs, err)
	} else {
		cfg.backoff = b
	}

	cfg.contract = contract.Empty()
	fileLoaded := true
	if cfg.ConfigPath != "" {
		ct, note, err := cfg.loadContract()
		cfg.envNote = note
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
		// slog.TextHandler's lines (JSONHandler's below), byte for
		// byte, made faster for the delivery line (logtext.go).
		return slog.New(newTextHandler(w, opts)), nil
	case "json":
		return slog.New(newJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// hostLayout is where an installed hookonce keeps its files: the packages
// (deploy/packages/) and the hand-installed unit (deploy/systemd/) lay a
// host out this way. The operator's commands (check, list, lookup,
// conflicts, release, purge, migrate, redeliver, health) look here when
// nothing else names what they need, so that they work as pasted on such
// a host (docs/deployment.md, "Where the commands look").
type hostLayout struct {
	Config      string // the config file
	EnvFile     string // KEY=VALUE lines the unit loads (EnvironmentFile=): secrets, store, admin token
	Store       string // the unit's HOOKONCE_STORE
	AdminListen string // the unit's HOOKONCE_ADMIN_LISTEN
	// AdminToken is the packaged unit's HOOKONCE_ADMIN_TOKEN_FILE: the
	// token the package's install made (postinstall.sh), 0640 root:hookonce.
	AdminToken string
}

// host is the installed layout; tests point it at a temporary directory.
var host = hostLayout{
	Config:  "/etc/hookonce/hookonce.yaml",
	EnvFile: "/etc/hookonce/env",
	Store:   "sqlite:/var/lib/hookonce/hookonce.db",
	// Not 9090, the binary's default: that is Prometheus's own port, and
	// a shop that runs Prometheus on the same host would find it taken.
	AdminListen: "127.0.0.1:8081",
	AdminToken:  "/etc/hookonce/admin-token",
}

// localConfig is the config file an operator's command reads from the
// working directory when --config names none.
const localConfig = "hookonce.yaml"

// operatorConfig finds the config file an operator's command reads, in one
// order: --config (or HOOKONCE_CONFIG), ./hookonce.yaml, the host's
// /etc/hookonce/hookonce.yaml; "" when there is none. It loads the
// environment file that goes with it first (loadEnvFile), so a secret_env
// the file names resolves as it does for the service.
func operatorConfig(c *cli.Context) (string, error) {
	path := firstNonEmpty(c.String("config"), os.Getenv("HOOKONCE_CONFIG"))
	if path == "" {
		for _, p := range []string{localConfig, host.Config} {
			if _, err := os.Stat(p); err == nil {
				path = p
				break
			}
		}
	}
	return path, loadEnvFile(path)
}

// requireConfig is operatorConfig for a command that needs a config and
// takes no arguments: the path, or the command's usage error (exit 2)
// naming where it looked.
func requireConfig(c *cli.Context, usage string) (string, error) {
	path, err := operatorConfig(c)
	switch {
	case err != nil:
		return "", cli.Exit(err.Error(), exitUsage)
	case c.NArg() != 0:
		return "", cli.Exit(usage, exitUsage)
	case path == "":
		return "", cli.Exit(usage+": no config file (--config, HOOKONCE_CONFIG, ./"+localConfig+" or "+host.Config+")", exitUsage)
	}
	return path, nil
}

// isHostConfig reports whether path is the installed host's config file.
func isHostConfig(path string) bool {
	if path == "" {
		return false
	}
	a, errA := os.Stat(path)
	b, errB := os.Stat(host.Config)
	if errA == nil && errB == nil {
		return os.SameFile(a, b)
	}
	return filepath.Clean(path) == filepath.Clean(host.Config)
}

// loadEnvFile reads the environment file an operator's command shares with
// the service: the one HOOKONCE_ENV_FILE names, always; else the host's
// /etc/hookonce/env when config is the host's config file (and the file
// exists). A variable already set in the command's environment wins over
// the file's. Errors name the file and the line, never a value.
func loadEnvFile(config string) error {
	path, explicit := envFileFor(config)
	if path == "" {
		return nil
	}
	vars, err := readEnvFile(path, explicit)
	if err != nil {
		return err
	}
	for _, kv := range vars {
		if _, set := os.LookupEnv(kv[0]); !set {
			if err := os.Setenv(kv[0], kv[1]); err != nil {
				return fmt.Errorf("%s: %s: %v", path, kv[0], err)
			}
		}
	}
	return nil
}

// envFileFor is the environment file that goes with the config file
// config: the one HOOKONCE_ENV_FILE names (required), else the host's
// /etc/hookonce/env when config is the host's config file (used when it
// exists), else none ("").
func envFileFor(config string) (path string, required bool) {
	if path := os.Getenv("HOOKONCE_ENV_FILE"); path != "" {
		return path, true
	}
	if isHostConfig(config) {
		return host.EnvFile, false
	}
	return "", false
}

// readEnvFile reads and parses the environment file at path; a missing
// file that is not required reads as empty. Errors name the file and the
// line, never a value.
func readEnvFile(path string, required bool) ([][2]string, error) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !required:
		return nil, nil
	case errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("environment file %s: %w (it holds the secrets: run the command as root or as a member of the group hookonce)", path, fs.ErrPermission)
	case err != nil:
		return nil, fmt.Errorf("environment file: %w", err)
	}
	return parseEnvFile(path, data)
}

// envName is a variable name systemd's EnvironmentFile= accepts.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseEnvFile reads KEY=VALUE lines as systemd's EnvironmentFile= does for
// the forms the shipped template uses: blank lines and lines starting with
// # or ; are skipped, an optional "export " is dropped, and a value in
// matching single or double quotes loses them. Anything else is an error
// that names the line (never its value: it may be a secret).
func parseEnvFile(path string, data []byte) ([][2]string, error) {
	var out [][2]string
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		k = strings.TrimSpace(k)
		if !ok || !envName.MatchString(k) {
			return nil, fmt.Errorf("%s:%d: want NAME=value", path, i+1)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

// operatorStore is the store an operator's command opens: --store (or
// HOOKONCE_STORE in the command's environment), else HOOKONCE_STORE from
// the environment file, else the host's store when the config in use is
// the host's, else ./hookonce.db. The config file itself has no store
// setting.
func operatorStore(c *cli.Context) (string, error) {
	if c.IsSet("store") {
		return c.String("store"), nil
	}
	config, err := operatorConfig(c)
	if err != nil {
		return "", err
	}
	switch v := os.Getenv("HOOKONCE_STORE"); {
	case v != "":
		return v, nil
	case isHostConfig(config):
		return host.Store, nil
	}
	return defaultStore, nil
}

// operatorAdmin is the base URL of the admin listener an operator's command
// talks to, when its flag does not name one: HOOKONCE_ADMIN_LISTEN (from
// the environment file too), else the host's listener when the config in
// use is the host's, else serve's default. An address that listens on
// every interface is reached on loopback.
func operatorAdmin(c *cli.Context) (string, error) {
	config, err := operatorConfig(c)
	if err != nil {
		return "", err
	}
	addr := os.Getenv("HOOKONCE_ADMIN_LISTEN")
	switch {
	case addr != "":
	case isHostConfig(config):
		addr = host.AdminListen
	default:
		addr = defaultAdminListen
	}
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("HOOKONCE_ADMIN_LISTEN %q: want host:port", addr)
	}
	switch h {
	case "", "0.0.0.0":
		h = "127.0.0.1"
	case "::":
		h = "::1"
	}
	return "http://" + net.JoinHostPort(h, port), nil
}

// operatorAdminToken is the admin token for an operator's command: its
// flags, else HOOKONCE_ADMIN_TOKEN or HOOKONCE_ADMIN_TOKEN_FILE (the
// command's environment, then the environment file's, read after the
// flags were), else the host's token file when the config in use is the
// host's: the one the packaged unit gives serve. A host without that file
// (the hand-installed unit) has no token; a file that is there but cannot
// be read is an error, never "no token".
func operatorAdminToken(c *cli.Context) (string, error) {
	token, file := c.String("admin-token"), c.String("admin-token-file")
	if token == "" && file == "" {
		config, err := operatorConfig(c)
		if err != nil {
			return "", err
		}
		token, file = os.Getenv("HOOKONCE_ADMIN_TOKEN"), os.Getenv("HOOKONCE_ADMIN_TOKEN_FILE")
		if token == "" && file == "" && isHostConfig(config) {
			return hostAdminToken()
		}
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--admin-token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	return token, nil
}

// hostAdminToken reads the host's admin token file: "" when there is none.
func hostAdminToken() (string, error) {
	b, err := os.ReadFile(host.AdminToken)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case errors.Is(err, fs.ErrPermission):
		return "", fmt.Errorf("admin token file %s: permission denied (run the command as root or as a member of the group hookonce)", host.AdminToken)
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("admin token file %s: %w", host.AdminToken, err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("admin token file %s is empty (the service refuses to start with it so: write a token into it)", host.AdminToken)
	}
	return token, nil
}

// parseBackoff reads --durable-backoff: durations separated by commas,
// each at least 100ms; "" is the default (nil).
func parseBackoff(v string) ([]time.Duration, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var out []time.Duration
	for _, f := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d < 100*time.Millisecond {
			return nil, fmt.Errorf("--durable-backoff %q: want waits of at least 100ms separated by commas, e.g. 5s,30s,5m", v)
		}
		out = append(out, d)
	}
	return out, nil
}

func backoffString(b []time.Duration) string {
	s := make([]string, len(b))
	for i, d := range b {
		switch {
		case d%time.Hour == 0:
			s[i] = fmt.Sprintf("%dh", d/time.Hour)
		case d%time.Minute == 0:
			s[i] = fmt.Sprintf("%dm", d/time.Minute)
		default:
			s[i] = d.String()
		}
	}
	return strings.Join(s, ",")
}
