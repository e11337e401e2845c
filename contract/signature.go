package contract

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Verifier checks one delivery's authenticity: a signature over the raw
// body, over values read as the site reads them, the sender's address, a
// shared token. now judges signed timestamps.
type Verifier interface {
	Verify(req *Request, now time.Time) error
}

// Signature schemes. The first seven are HMAC-SHA256 over the raw body in
// one sender's arrangement; the rest are generic building blocks for
// senders no preset knows (scheme_digest_hmac.go, scheme_token.go,
// scheme_addr.go).
const (
	SchemeStripe           = "stripe"
	SchemeGitHub           = "github"
	SchemeShopify          = "shopify"
	SchemeStandardWebhooks = "standard-webhooks"
	SchemeSlack            = "slack"
	SchemePaddle           = "paddle"
	SchemeHMACSHA256       = "hmac-sha256"
	SchemeDigest           = "digest"         // a hash of a message that holds the secret
	SchemeHMAC             = "hmac"           // an HMAC of a message, keyed with the secret
	SchemeToken            = "token"          // the secret itself, in a field or header
	SchemeBasic            = "basic"          // HTTP Basic, the secret being user:password
	SchemeSourceAddress    = "source-address" // the sender's address in an allowlist
	SchemePayPal           = "paypal"         // SHA256withRSA under a pinned PayPal certificate
	SchemeJWTES256         = "jwt-es256"      // the body is a JWT signed ES256 by a key of a pinned JWKS
)

// DefaultTolerance is how far a signed timestamp may be from the proxy's
// clock (either way) for the schemes that sign one.
const DefaultTolerance = 5 * time.Minute

// SignatureConfig is a sender's signature section. A preset fills the
// scheme; the sender's own fields override it.
//
//	signature:
//	  scheme: hmac-sha256          # see below; a preset sets it
//	  header: X-Signature          # the scheme's own header when omitted (required for hmac-sha256)
//	  encoding: hex                # hmac-sha256: hex (default) | base64; digest, hmac: see below
//	  prefix: "sha256="            # hmac-sha256 only: text before the digest
//	  secret_env: SHOP_SECRET      # the secret: an environment variable ...
//	  secret_file: /run/secrets/x  # ... or a file, read whole, surrounding whitespace trimmed
//	  previous_secret_env: OLD     # rotation: a second secret also accepted while
//	  previous_secret_file: ...    #   the sender moves from it to the first one
//	  tolerance: 5m                # stripe, standard-webhooks, slack, paddle: timestamp window
//
// The schemes stripe, github, shopify, standard-webhooks, slack, paddle and
// hmac-sha256 are HMAC-SHA256 over the raw body. The generic ones describe
// a sender no preset knows:
//
//	# digest: algorithm(message) where the message holds {secret} (Robokassa);
//	# hmac: HMAC-algorithm(message) keyed with the secret (RBS, CloudPayments).
//	scheme: digest               # or hmac
//	algorithm: md5               # md5 | sha1 | sha256 (default) | sha512
//	message:                     # parts, then fields, joined; or the raw body
//	  parts: ["{request.OutSum}", "{request.InvId}", "{secret}"]  # literals and
//	                             #   {form.X} {query.X} {request.X} {header.X} {body.path} {secret};
//	                             #   {optional:form.X} signs an absent value as empty,
//	                             #   {decimal2:form.X} the number with two decimals (PHP's number_format)
//	  fields:                    # every field of a source, sorted by name (byte order)
//	    source: request          # form | query | request | body (the JSON root's scalars)
//	    include_prefix: Shp_     # only names starting so (optional)
//	    ignore_prefix_case: true #   compared ignoring ASCII case
//	    exclude: [SignatureValue]
//	    add: {Password: "{secret}"}  # extra fields, sorted in with the rest
//	    format: "{k}={v}"        # each field ({k} name, {v} value); default {k}={v}
//	  join: ":"                  # between parts and fields (default "")
//	  body: true                 # instead of parts and fields: the raw body bytes
//	from: [{request: SignatureValue}]  # where the signature is: header, form, query,
//	                             #   request or body; the first one present is checked
//	encoding: hex                # hex (either case, default) | hex-lower | hex-upper | base64
//
//	scheme: token                # the secret, sent as it is in a field or header
//	from: [{form: "auth[application_token]"}]
//
//	scheme: basic                # Authorization: Basic; the secret is user:password
//
//	scheme: source-address       # the sender's address (through trusted_proxies)
//	allow: [185.71.76.0/27, 77.75.156.11, "2a02:5180::/32"]   # no secret
//
//	scheme: paypal               # PayPal's SHA256withRSA over transmission id, time,
//	webhook_id: 1JE4291016473214C  #   this webhook id and the body's CRC32; no secret:
//	cert_file: paypal-cert.pem   #   PayPal's certificate, pinned (never fetched)
//
//	scheme: jwt-es256            # the body is a JWT signed ES256 (Yandex Pay); no secret:
//	jwks_file: yandex-pay.jwks   #   the provider's published keys, pinned (never fetched)
//
// allow may be given with any other scheme too: the delivery must then
// come from a listed address *and* carry a valid signature (the address is
// checked first).
//
// Secrets are resolved when the file is loaded; a relative secret_file is
// taken relative to the config file's directory. Every comparison with a
// secret or a signature is constant-time.
type SignatureConfig struct {
	Scheme             string `yaml:"scheme"`
	Header             string `yaml:"header"`
	Encoding           string `yaml:"encoding"`
	Prefix             string `yaml:"prefix"`
	SecretEnv          string `yaml:"secret_env"`
	SecretFile         string `yaml:"secret_file"`
	PreviousSecretEnv  string `yaml:"previous_secret_env"`
	PreviousSecretFile string `yaml:"previous_secret_file"`
	// Secrets are further current secrets, each accepted: one sender
	// signing with several (a GitHub repository hook and a GitHub App
	// posting to one URL).
	Secrets   []SecretSource `yaml:"secrets"`
	Tolerance *Duration      `yaml:"tolerance"`

	Algorithm string         `yaml:"algorithm"`
	Message   *MessageConfig `yaml:"message"`
	From      []keyPartFile  `yaml:"from"`
	Allow     []string       `yaml:"allow"`

	CertFile  string `yaml:"cert_file"`
	WebhookID string `yaml:"webhook_id"`
	JWKSFile  string `yaml:"jwks_file"`
}

// SecretSource is one entry of signature.secrets: an environment
// variable or a file, as secret_env and secret_file.
type SecretSource struct {
	SecretEnv  string `yaml:"secret_env"`
	SecretFile string `yaml:"secret_file"`
}

// MessageConfig is what a digest or hmac scheme hashes (see
// SignatureConfig).
type MessageConfig struct {
	Parts  []string      `yaml:"parts"`
	Fields *FieldsConfig `yaml:"fields"`
	Join   string        `yaml:"join"`
	Body   bool          `yaml:"body"`
}

// FieldsConfig signs every field of one source (see SignatureConfig).
type FieldsConfig struct {
	Source           string            `yaml:"source"`
	IncludePrefix    string            `yaml:"include_prefix"`
	IgnorePrefixCase bool              `yaml:"ignore_prefix_case"`
	Exclude          []string          `yaml:"exclude"`
	Add              map[string]string `yaml:"add"`
	Format           string            `yaml:"format"`
}

// merge returns c overlaid with the fields set in o (o may be nil). A
// message, from or allow list the sender sets replaces the preset's whole.
func (c SignatureConfig) merge(o *SignatureConfig) *SignatureConfig {
	if o == nil {
		return &c
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&c.Scheme, o.Scheme)
	set(&c.Header, o.Header)
	set(&c.Encoding, o.Encoding)
	set(&c.Prefix, o.Prefix)
	set(&c.Algorithm, o.Algorithm)
	set(&c.CertFile, o.CertFile)
	set(&c.WebhookID, o.WebhookID)
	set(&c.JWKSFile, o.JWKSFile)
	// One source per secret: a sender that names a file replaces the
	// preset's (or defaults') environment variable, and the other way round.
	if o.SecretEnv != "" || o.SecretFile != "" {
		c.SecretEnv, c.SecretFile = o.SecretEnv, o.SecretFile
	}
	if o.PreviousSecretEnv != "" || o.PreviousSecretFile != "" {
		c.PreviousSecretEnv, c.PreviousSecretFile = o.PreviousSecretEnv, o.PreviousSecretFile
	}
	if o.Secrets != nil {
		c.Secrets = o.Secrets
	}
	if o.Tolerance != nil {
		c.Tolerance = o.Tolerance
	}
	if o.Message != nil {
		c.Message = o.Message
	}
	if o.From != nil {
		c.From = o.From
	}
	if o.Allow != nil {
		c.Allow = o.Allow
	}
	return &c
}

// SignatureError is what Verify returns for a delivery that fails its
// check. Reason says what is wrong and never quotes a signature, a secret
// or the body.
type SignatureError struct{ Reason string }

func (e *SignatureError) Error() string { return e.Reason }

func sigErr(format string, args ...any) error {
	return &SignatureError{Reason: fmt.Sprintf(format, args...)}
}

// Reasons shared by the schemes; tests and operators match on them.
const (
	ReasonMismatch  = "signature mismatch"
	ReasonTolerance = "timestamp outside tolerance"
)

type schemeDef struct {
	header   string // the signature header
	timed    bool   // signs a timestamp, so tolerance applies
	whsec    bool   // secrets are whsec_ base64
	fixedFmt bool   // encoding and prefix are the scheme's own (the header may change)
	// generic schemes: build compiles the verifier from c.cfg; takes lists
	// the optional fields it reads (besides scheme and the secrets).
	build    func(c *sigCompiler) Verifier
	takes    []string
	noSecret bool // source-address: nothing secret to resolve
}

var schemes = map[string]schemeDef{
	SchemeStripe:           {header: "Stripe-Signature", timed: true, fixedFmt: true},
	SchemeGitHub:           {header: "X-Hub-Signature-256", fixedFmt: true},
	SchemeShopify:          {header: "X-Shopify-Hmac-Sha256", fixedFmt: true},
	SchemeStandardWebhooks: {header: "Webhook-Signature", timed: true, whsec: true, fixedFmt: true},
	SchemeSlack:            {header: "X-Slack-Signature", timed: true, fixedFmt: true},
	SchemePaddle:           {header: "Paddle-Signature", timed: true, fixedFmt: true},
	SchemeHMACSHA256:       {},
	SchemeDigest:           {build: buildMessageScheme, takes: []string{"algorithm", "message", "from", "encoding"}},
	SchemeHMAC:             {build: buildMessageScheme, takes: []string{"algorithm", "message", "from", "encoding"}},
	SchemeToken:            {build: buildToken, takes: []string{"from"}},
	SchemeBasic:            {build: buildBasic},
	SchemeSourceAddress:    {build: buildSourceAddress, takes: []string{"allow"}, noSecret: true},
	SchemePayPal:           {build: buildPayPal, takes: []string{"cert_file", "webhook_id", "tolerance"}, noSecret: true},
	SchemeJWTES256:         {build: buildJWT, takes: []string{"jwks_file", "tolerance"}, noSecret: true},
}

// schemeNames lists the schemes, sorted, for messages.
func schemeNames() string {
	return strings.Join(sortedKeys(schemes), ", ")
}

// sigCompiler collects a signature section's problems while its scheme is
// compiled, so every one of them is reported at once.
type sigCompiler struct {
	cfg  SignatureConfig
	def  schemeDef
	dir  string    // where a relative secret_file is looked up
	env  LookupEnv // finds a secret_env's value
	keys [][]byte
	// keyFields names the field each key came from, for problems about it.
	keyFields []string
	probs     []Problem
}

func (c *sigCompiler) bad(field, format string, args ...any) {
	c.probs = append(c.probs, Problem{Field: "signature." + field, Msg: fmt.Sprintf(format, args...)})
}

// secretSource is where a sender's secrets come from: dir is where a
// relative secret_file is looked up, env finds a secret_env's value.
type secretSource struct {
	dir string
	env LookupEnv
}

// compileSignature builds the verifier for a sender and resolves its
// secrets from src. Problems name the field; none quotes a secret.
func compileSignature(cfg SignatureConfig, src secretSource) (Verifier, []Problem) {
	c := &sigCompiler{cfg: cfg, dir: src.dir, env: src.env}
	if cfg.Scheme == "" {
		c.bad("scheme", "required (one of %s), or a preset that sets it", schemeNames())
		return nil, c.probs
	}
	def, ok := schemes[cfg.Scheme]
	if !ok {
		c.bad("scheme", "unknown scheme %q (known: %s)", cfg.Scheme, schemeNames())
		return nil, c.probs
	}
	c.def = def
	c.checkGenericFields()
	if def.noSecret {
		c.noSecrets()
	} else {
		c.resolveSecrets()
	}
	var v Verifier
	if def.build != nil {
		v = def.build(c)
	} else {
		v = c.buildHMACBody()
	}
	if cfg.Allow != nil && cfg.Scheme != SchemeSourceAddress {
		if len(cfg.Allow) == 0 {
			c.bad("allow", "lists no address: give the sender's IPs or CIDRs, or leave allow out")
		}
		v = allOf{buildSourceAddress(c), v}
	}
	if len(c.probs) > 0 {
		return nil, c.probs
	}
	return v, nil
}

// allOf accepts a delivery that every one of its verifiers accepts, asked
// in order (an address allowlist before the signature it guards).
type allOf []Verifier

func (a allOf) Verify(req *Request, now time.Time) error {
	for _, v := range a {
		if err := v.Verify(req, now); err != nil {
			return err
		}
	}
	return nil
}

// checkGenericFields refuses a generic field on a scheme that does not
// read it, so a typo in the scheme name cannot silently drop a check.
func (c *sigCompiler) checkGenericFields() {
	set := map[string]bool{
		"algorithm": c.cfg.Algorithm != "", "message": c.cfg.Message != nil,
		"from": c.cfg.From != nil, "allow": c.cfg.Allow != nil,
		"cert_file": c.cfg.CertFile != "", "webhook_id": c.cfg.WebhookID != "", "jwks_file": c.cfg.JWKSFile != "",
	}
	// allow applies to every scheme: with source-address it is the whole
	// check, with any other an allowlist before the signature.
	for _, f := range []string{"algorithm", "message", "from", "cert_file", "webhook_id", "jwks_file"} {
		if set[f] && !slices.Contains(c.def.takes, f) {
			c.bad(f, "does not apply to scheme %s", c.cfg.Scheme)
		}
	}
	if c.def.build == nil {
		return
	}
	// The generic schemes name where their signature is with from, and
	// sign no timestamp.
	if c.cfg.Header != "" {
		c.bad("header", "does not apply to scheme %s (name the signature's place with from)", c.cfg.Scheme)
	}
	if c.cfg.Prefix != "" {
		c.bad("prefix", "only applies to scheme hmac-sha256")
	}
	if c.cfg.Encoding != "" && !slices.Contains(c.def.takes, "encoding") {
		c.bad("encoding", "does not apply to scheme %s", c.cfg.Scheme)
	}
	if c.cfg.Tolerance != nil && !slices.Contains(c.def.takes, "tolerance") {
		c.bad("tolerance", "scheme %s signs no timestamp", c.cfg.Scheme)
	}
}
