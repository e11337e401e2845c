// Package contract turns the operator's config file into per-sender rules:
// which requests are webhooks, where their event id lives, how their payload
// is hashed and their signature checked, and what the sender expects to hear
// back. It never touches the store or the network.
package contract

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"
)

// Built-in defaults, applied before the file's defaults section.
const (
	DefaultListen           = ":8080"
	DefaultMaxBody          = 1 << 20
	DefaultMaxInflight      = 256
	DefaultBodyTimeout      = 30 * time.Second
	DefaultTTL              = 72 * time.Hour
	DefaultLease            = 30 * time.Second
	DefaultUpstreamTimeout  = 30 * time.Second
	DefaultStoreTimeout     = 2 * time.Second
	DefaultWaitTimeout      = 10 * time.Second
	DefaultMaxStoredBody    = 256 << 10
	DefaultForwardKeyHeader = "Idempotency-Key"
	DefaultFinalStatuses    = "2xx,4xx"
	DefaultConflictStatus   = 422
)

// DefaultIndex is site.index when the file does not set it: nginx's and
// Apache's usual index script for a PHP site.
var DefaultIndex = []string{"index.php"}

// Policy types: what the sender expects and how hookonce behaves for it.
// Each is one of its constants below; Parse refuses anything else.
type (
	InProgressPolicy string // in_progress
	MissingKeyPolicy string // missing_key
	StoreErrPolicy   string // on_store_error
	AmbiguousPolicy  string // ambiguous
	Mode             string // mode
	HashMode         string // hash
)

const (
	InProgressWait   InProgressPolicy = "wait"
	InProgressReject InProgressPolicy = "reject"
	MissingReject    MissingKeyPolicy = "reject"
	MissingPass      MissingKeyPolicy = "pass"
	StoreErrReject   StoreErrPolicy   = "reject"
	StoreErrForward  StoreErrPolicy   = "forward"
	AmbiguousRelease AmbiguousPolicy  = "release"
	AmbiguousHold    AmbiguousPolicy  = "hold"
	ModeEnforce      Mode             = "enforce"
	ModeShadow       Mode             = "shadow"
	HashRaw          HashMode         = "raw"
	HashJSON         HashMode         = "json"
)

// Contract is a validated config file: the listener settings and the
// compiled sender rules, in file order. It is immutable once built, so a
// reload swaps a whole new Contract in.
type Contract struct {
	File     string // where it was read from ("" for none)
	Listen   string // "" when the file does not set it
	Upstream string // "" when the file does not set it
	MaxBody  int64
	// BodyTimeout is how long a sender may take to send a body on a
	// sender's path; past it the request gets 408.
	BodyTimeout time.Duration
	// MaxInflight bounds the requests on senders' paths handled at once
	// (each may hold max_body and the site's answer); 0 means no bound.
	MaxInflight int
	// TrustedProxies are the peers whose X-Forwarded-* headers are kept.
	TrustedProxies []netip.Prefix
	// Site is how the site maps URLs to scripts (site: in the file).
	Site    Site
	Senders []*Sender
	// Notify is the notify: block (notify.go); nil when absent.
	Notify *Notify
	router *router
	// Warnings are not errors: e.g. a ttl shorter than the preset's retry window.
	Warnings []string
}

// Sender returns the sender with the given name, or nil.
func (c *Contract) Sender(name string) *Sender {
	for _, s := range c.Senders {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// TrustedPeer reports whether remoteAddr (host:port) is a trusted proxy.
func (c *Contract) TrustedPeer(remoteAddr string) bool {
	if len(c.TrustedProxies) == 0 {
		return false
	}
	ap, err := netip.ParseAddrPort(remoteAddr)
	return err == nil && c.trusted(ap.Addr().Unmap())
}

// Site is how the site maps a URL to the script it runs, beyond the
// script's own path: the index scripts of a directory and the extensions
// tried for an extensionless URL. Routing gives a sender every URL that
// runs its script this way (docs/decision-table.md, "The path rule").
type Site struct {
	// Index are a directory's index scripts (nginx index, Apache
	// DirectoryIndex): "/x/" runs "/x/index.php".
	Index []string
	// Extensions are tried after an extensionless URL (nginx
	// try_files $uri $uri.php): "/x" runs "/x.php".
	Extensions []string
	// MultiViews: the site is Apache with Options +MultiViews where the
	// senders' scripts live, so "/x" and "/x/anything" run "/x.php". Off
	// (nginx, Apache's default), such paths run no sender's script and
	// are handed to the site untouched.
	MultiViews bool
	// Request is how the site reads request: names: SiteRequestGetPost
	// (array_merge($_GET, $_POST), 1C-Bitrix's $request->get(); cookies
	// never), or "" for any reading PHP may give ($_REQUEST with or
	// without cookies, array_merge): a name those read differently is
	// unreadable.
	Request string
}

// SiteRequestGetPost is site.request: get_post.
const SiteRequestGetPost = "get_post"

// Empty returns a contract with no senders: every request is passed through.
func Empty() *Contract {
	return &Contract{MaxBody: DefaultMaxBody, MaxInflight: DefaultMaxInflight, BodyTimeout: DefaultBodyTimeout, Site: Site{Index: DefaultIndex}}
}

// Load reads and validates the config file at path; its secret_env
// names are looked up in the process environment.
func Load(path string) (*Contract, error) { return LoadEnv(path, os.LookupEnv) }

// LookupEnv finds the value of an environment variable a secret_env
// names, as os.LookupEnv does.
type LookupEnv func(name string) (string, bool)

// LoadEnv is Load with secret_env looked up through env: serve passes the
// environment file as it reads it now, so a reload takes a changed secret
// without a restart (and without putting it in the process environment).
func LoadEnv(path string, env LookupEnv) (*Contract, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Problems: []Problem{{Msg: err.Error()}}}
	}
	return ParseEnv(data, path, env)
}

// Problem is one thing wrong with a config file.
type Problem struct {
	Line   int    // 0 when unknown
	Sender string // "" for file-level problems
	Field  string // "" when the problem is not one field's
	Msg    string
}

// Error lists every problem found in a config file at once.
type Error struct {
	File     string
	Problems []Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		if p.Sender != "" {
			fmt.Fprintf(&b, ": sender %q", p.Sender)
		}
		if p.Field != "" {
			fmt.Fprintf(&b, ": field %s", p.Field)
		}
		b.WriteString(": ")
		b.WriteString(p.Msg)
	}
	return b.String()
}
