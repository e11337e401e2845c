package contract

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Verifier checks one delivery's authenticity: a signature over the raw
// body, over values read as the site reads them, the sender's address, a
// shared token. now judges signed timestamps.
type Verifier interface {
	Verify(req *Request, now time.Time) error
}

// Signature schemes. The first six are HMAC-SHA256 over the raw body in
// one sender's arrangement; the rest are generic building blocks for
// senders no preset knows (scheme_digest.go, scheme_token.go,
// scheme_addr.go).
const (
	SchemeStripe           = "stripe"
	SchemeGitHub           = "github"
	SchemeShopify          = "shopify"
	SchemeStandardWebhooks = "standard-webhooks"
	SchemeSlack            = "slack"
	SchemeHMACSHA256       = "hmac-sha256"
	SchemeDigest           = "digest"         // a hash of a message that holds the secret
	SchemeHMAC             = "hmac"           // an HMAC of a message, keyed with the secret
	SchemeToken            = "token"          // the secret itself, in a field or header
	SchemeBasic            = "basic"          // HTTP Basic, the secret being user:password
	SchemeSourceAddress    = "source-address" // the sender's address in an allowlist
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
//	  tolerance: 5m                # stripe, standard-webhooks, slack: timestamp window
//
// The schemes stripe, github, shopify, standard-webhooks, slack and
// hmac-sha256 are HMAC-SHA256 over the raw body. The generic ones describe
// a sender no preset knows:
//
//	# digest: algorithm(message) where the message holds {secret} (Robokassa);
//	# hmac: HMAC-algorithm(message) keyed with the secret (RBS, CloudPayments).
//	scheme: digest               # or hmac
//	algorithm: md5               # md5 | sha1 | sha256 (default) | sha512
//	message:                     # parts, then fields, joined; or the raw body
//	  parts: ["{request.OutSum}", "{request.InvId}", "{secret}"]  # literals and
//	                             #   {form.X} {query.X} {request.X} {header.X} {body.path} {secret}
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
	SchemeHMACSHA256:       {},
	SchemeDigest:           {build: buildMessageScheme, takes: []string{"algorithm", "message", "from", "encoding"}},
	SchemeHMAC:             {build: buildMessageScheme, takes: []string{"algorithm", "message", "from", "encoding"}},
	SchemeToken:            {build: buildToken, takes: []string{"from"}},
	SchemeBasic:            {build: buildBasic},
	SchemeSourceAddress:    {build: buildSourceAddress, takes: []string{"allow"}, noSecret: true},
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
	dir  string // where a relative secret_file is looked up
	keys [][]byte
	// keyFields names the field each key came from, for problems about it.
	keyFields []string
	probs     []Problem
}

func (c *sigCompiler) bad(field, format string, args ...any) {
	c.probs = append(c.probs, Problem{Field: "signature." + field, Msg: fmt.Sprintf(format, args...)})
}

// compileSignature builds the verifier for a sender and resolves its
// secrets. dir is where a relative secret_file is looked up. Problems name
// the field; none quotes a secret.
func compileSignature(cfg SignatureConfig, dir string) (Verifier, []Problem) {
	c := &sigCompiler{cfg: cfg, dir: dir}
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
	}
	// allow applies to every scheme: with source-address it is the whole
	// check, with any other an allowlist before the signature.
	for _, f := range []string{"algorithm", "message", "from"} {
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
	if c.cfg.Tolerance != nil {
		c.bad("tolerance", "scheme %s signs no timestamp", c.cfg.Scheme)
	}
}

func (c *sigCompiler) noSecrets() {
	for _, f := range []struct{ field, v string }{
		{"secret_env", c.cfg.SecretEnv}, {"secret_file", c.cfg.SecretFile},
		{"previous_secret_env", c.cfg.PreviousSecretEnv}, {"previous_secret_file", c.cfg.PreviousSecretFile},
	} {
		if f.v != "" {
			c.bad(f.field, "scheme %s takes no secret", c.cfg.Scheme)
		}
	}
	if len(c.cfg.Secrets) > 0 {
		c.bad("secrets", "scheme %s takes no secret", c.cfg.Scheme)
	}
}

func (c *sigCompiler) resolveSecrets() {
	add := func(k []byte, envField, fileField, file string) {
		if k == nil {
			return
		}
		c.keys = append(c.keys, k)
		if file != "" {
			c.keyFields = append(c.keyFields, fileField)
		} else {
			c.keyFields = append(c.keyFields, envField)
		}
	}
	// secret_env/secret_file is required unless secrets lists them.
	add(c.resolve("secret_env", "secret_file", c.cfg.SecretEnv, c.cfg.SecretFile, len(c.cfg.Secrets) == 0),
		"secret_env", "secret_file", c.cfg.SecretFile)
	for i, src := range c.cfg.Secrets {
		env, file := fmt.Sprintf("secrets[%d].secret_env", i), fmt.Sprintf("secrets[%d].secret_file", i)
		if src.SecretEnv == "" && src.SecretFile == "" {
			c.bad(env, "required: secret_env or secret_file")
			continue
		}
		add(c.resolve(env, file, src.SecretEnv, src.SecretFile, true), env, file, src.SecretFile)
	}
	add(c.resolve("previous_secret_env", "previous_secret_file", c.cfg.PreviousSecretEnv, c.cfg.PreviousSecretFile, false),
		"previous_secret_env", "previous_secret_file", c.cfg.PreviousSecretFile)
}

func (c *sigCompiler) resolve(envField, fileField, env, file string, required bool) []byte {
	var raw string
	switch {
	case env != "" && file != "":
		c.bad(envField, "set either %s or %s, not both", envField, fileField)
		return nil
	case env != "":
		val, ok := os.LookupEnv(env)
		if !ok {
			c.bad(envField, "environment variable %s is not set", env)
			return nil
		}
		raw = val
	case file != "":
		path := file
		if !filepath.IsAbs(path) && c.dir != "" {
			path = filepath.Join(c.dir, path)
		}
		data, err := readSecretFile(path)
		if err != nil {
			c.bad(fileField, "read secret: %v", err)
			return nil
		}
		raw = string(data)
	default:
		if required {
			c.bad("secret_env", "required: secret_env or secret_file")
		}
		return nil
	}
	raw = strings.TrimSpace(raw)
	where := envField
	if file != "" {
		where = fileField
	}
	if raw == "" {
		c.bad(where, "the secret is empty")
		return nil
	}
	if !c.def.whsec {
		return []byte(raw)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(raw, "whsec_"))
	if err != nil || len(key) == 0 {
		c.bad(where, "not a standard-webhooks secret (whsec_ followed by base64)")
		return nil
	}
	return key
}

// buildHMACBody compiles the schemes that sign the raw body with
// HMAC-SHA256 in one sender's arrangement.
func (c *sigCompiler) buildHMACBody() Verifier {
	cfg, def := c.cfg, c.def
	v := &hmacVerifier{scheme: cfg.Scheme, header: def.header, encoding: "hex", keys: c.keys}
	if cfg.Header != "" {
		v.header = cfg.Header
	}
	v.header = http.CanonicalHeaderKey(strings.TrimSpace(v.header))
	if v.header == "" {
		c.bad("header", "required for scheme %s", cfg.Scheme)
	}
	if def.fixedFmt {
		if cfg.Encoding != "" {
			c.bad("encoding", "only applies to scheme hmac-sha256 (%s fixes its own)", cfg.Scheme)
		}
		if cfg.Prefix != "" {
			c.bad("prefix", "only applies to scheme hmac-sha256 (%s fixes its own)", cfg.Scheme)
		}
	} else {
		switch cfg.Encoding {
		case "", "hex":
		case "base64":
			v.encoding = "base64"
		default:
			c.bad("encoding", "%q: want hex or base64", cfg.Encoding)
		}
		v.prefix = cfg.Prefix
	}
	if def.timed {
		v.tolerance = DefaultTolerance
		if cfg.Tolerance != nil {
			if t := time.Duration(*cfg.Tolerance); t < time.Second {
				c.bad("tolerance", "%s is too short (minimum 1s)", t)
			} else {
				v.tolerance = t
			}
		}
	} else if cfg.Tolerance != nil {
		c.bad("tolerance", "scheme %s signs no timestamp", cfg.Scheme)
	}
	return v
}

// maxSecretFile bounds what is read from a secret file: a secret is short,
// and a wrong path (a device, a log) must not be read whole.
const maxSecretFile = 64 << 10

func readSecretFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errors.New(pathErr(err, path))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, errors.New(pathErr(err, path))
	}
	if len(data) > maxSecretFile {
		return nil, fmt.Errorf("%s: larger than %d bytes, not a secret", path, maxSecretFile)
	}
	return data, nil
}

// pathErr keeps the OS's reason (no such file, permission denied) without
// repeating the path twice in the message.
func pathErr(err error, path string) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return path + ": " + pe.Err.Error()
	}
	return err.Error()
}

// hmacVerifier checks the sender-specific schemes in this file: all are
// HMAC-SHA256 over some arrangement of the raw body, with one or two keys
// (rotation). The generic schemes have verifiers of their own.
type hmacVerifier struct {
	scheme    string
	header    string // canonical
	encoding  string // hmac-sha256: hex | base64
	prefix    string // hmac-sha256
	tolerance time.Duration
	keys      [][]byte // current first, previous second
}

// maxSignatures bounds the candidates taken from one header, so a huge
// header cannot cost more than a few comparisons per key.
const maxSignatures = 16

func (v *hmacVerifier) Verify(req *Request, now time.Time) error {
	h, body := req.Header, req.Body
	switch v.scheme {
	case SchemeStripe:
		return v.stripe(h, body, now)
	case SchemeGitHub:
		return v.github(h, body)
	case SchemeShopify:
		return v.shopify(h, body)
	case SchemeStandardWebhooks:
		return v.standardWebhooks(h, body, now)
	case SchemeSlack:
		return v.slack(h, body, now)
	default:
		return v.generic(h, body)
	}
}

// value returns the single value of a header, or why there is none.
func (v *hmacVerifier) value(h http.Header, name string) (string, error) {
	vals := h.Values(name)
	if len(vals) == 0 || strings.TrimSpace(vals[0]) == "" {
		return "", sigErr("no %s header", name)
	}
	if len(vals) > 1 {
		return "", sigErr("malformed %s header: sent more than once", name)
	}
	return strings.TrimSpace(vals[0]), nil
}

// match reports whether any candidate equals the MAC of msg under any key,
// in constant time per comparison; every key is tried, so the time does
// not tell which of several current secrets signed it.
func (v *hmacVerifier) match(candidates [][]byte, msg ...[]byte) error {
	found := false
	for _, key := range v.keys {
		m := hmac.New(sha256.New, key)
		for _, part := range msg {
			m.Write(part)
		}
		want := m.Sum(nil)
		for _, c := range candidates {
			found = hmac.Equal(c, want) || found
		}
	}
	if found {
		return nil
	}
	return sigErr(ReasonMismatch)
}

func (v *hmacVerifier) checkTime(header, ts string, now time.Time) (int64, error) {
	t, ok := parseUnix(ts)
	if !ok {
		return 0, sigErr("malformed %s: want Unix seconds", header)
	}
	d := now.Sub(time.Unix(t, 0))
	if d > v.tolerance || d < -v.tolerance {
		return 0, sigErr(ReasonTolerance)
	}
	return t, nil
}

// parseUnix accepts decimal seconds only (no sign, at most 12 digits).
func parseUnix(s string) (int64, bool) {
	if s == "" || len(s) > 12 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func decodeHex(s string) ([]byte, bool) {
	if len(s) != 2*sha256.Size {
		return nil, false
	}
	b, err := hex.DecodeString(s)
	return b, err == nil
}

func decodeBase64(s string) ([]byte, bool) {
	if len(s) != base64.StdEncoding.EncodedLen(sha256.Size) {
		return nil, false
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	return b, err == nil && len(b) == sha256.Size
}

// stripe: Stripe-Signature: t=1614265330,v1=<hex>[,v1=<hex>…][,v0=…]
// over "<t>.<body>". Other schemes in the header (v0 is test mode) are
// ignored, as Stripe's libraries do.
func (v *hmacVerifier) stripe(h http.Header, body []byte, now time.Time) error {
	val, err := v.value(h, v.header)
	if err != nil {
		return err
	}
	var ts string
	var sigs [][]byte
	for item := range strings.SplitSeq(val, ",") {
		k, x, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return sigErr("malformed %s header", v.header)
		}
		switch k {
		case "t":
			if ts != "" {
				return sigErr("malformed %s header: two timestamps", v.header)
			}
			ts = x
		case "v1":
			if b, ok := decodeHex(x); ok && len(sigs) < maxSignatures {
				sigs = append(sigs, b)
			}
		}
	}
	if ts == "" {
		return sigErr("malformed %s header: no timestamp", v.header)
	}
	if len(sigs) == 0 {
		return sigErr("malformed %s header: no v1 signature", v.header)
	}
	t, err := v.checkTime("timestamp in "+v.header, ts, now)
	if err != nil {
		return err
	}
	return v.match(sigs, []byte(strconv.FormatInt(t, 10)), []byte("."), body)
}

// github: X-Hub-Signature-256: sha256=<hex> over the body.
func (v *hmacVerifier) github(h http.Header, body []byte) error {
	val, err := v.value(h, v.header)
	if err != nil {
		return err
	}
	hexSig, ok := strings.CutPrefix(val, "sha256=")
	if !ok {
		return sigErr("malformed %s header: want sha256=<hex>", v.header)
	}
	sig, ok := decodeHex(hexSig)
	if !ok {
		return sigErr("malformed %s header: want 64 hex digits", v.header)
	}
	return v.match([][]byte{sig}, body)
}

// shopify: X-Shopify-Hmac-Sha256: <base64> over the body.
func (v *hmacVerifier) shopify(h http.Header, body []byte) error {
	val, err := v.value(h, v.header)
	if err != nil {
		return err
	}
	sig, ok := decodeBase64(val)
	if !ok {
		return sigErr("malformed %s header: want base64 of 32 bytes", v.header)
	}
	return v.match([][]byte{sig}, body)
}

// standardWebhooks: webhook-id, webhook-timestamp and webhook-signature
// ("v1,<base64> v1,<base64>…") over "<id>.<timestamp>.<body>".
func (v *hmacVerifier) standardWebhooks(h http.Header, body []byte, now time.Time) error {
	id, err := v.value(h, "Webhook-Id")
	if err != nil {
		return err
	}
	tsVal, err := v.value(h, "Webhook-Timestamp")
	if err != nil {
		return err
	}
	val, err := v.value(h, v.header)
	if err != nil {
		return err
	}
	var sigs [][]byte
	for item := range strings.FieldsSeq(val) {
		ver, x, ok := strings.Cut(item, ",")
		if !ok || ver != "v1" {
			continue // other versions (v1a is asymmetric) are not ours to check
		}
		if b, ok := decodeBase64(x); ok && len(sigs) < maxSignatures {
			sigs = append(sigs, b)
		}
	}
	if len(sigs) == 0 {
		return sigErr("malformed %s header: no v1 signature", v.header)
	}
	t, err := v.checkTime("Webhook-Timestamp header", tsVal, now)
	if err != nil {
		return err
	}
	return v.match(sigs, []byte(id), []byte("."), []byte(strconv.FormatInt(t, 10)), []byte("."), body)
}

// slack: X-Slack-Signature: v0=<hex> over "v0:<X-Slack-Request-Timestamp>:<body>".
func (v *hmacVerifier) slack(h http.Header, body []byte, now time.Time) error {
	val, err := v.value(h, v.header)
	if err != nil {
		return err
	}
	ts, err := v.value(h, "X-Slack-Request-Timestamp")
	if err != nil {
		return err
	}
	hexSig, ok := strings.CutPrefix(val, "v0=")
	if !ok {
		return sigErr("malformed %s header: want v0=<hex>", v.header)
	}
	sig, ok := decodeHex(hexSig)
	if !ok {
		return sigErr("malformed %s header: want 64 hex digits", v.header)
	}
	if _, err := v.checkTime("X-Slack-Request-Timestamp header", ts, now); err != nil {
		return err
	}
	// Slack signs the timestamp as sent; parseUnix allowed digits only.
	return v.match([][]byte{sig}, []byte("v0:"), []byte(ts), []byte(":"), body)
}

// generic: <header>: <prefix><hex or base64> over the body.
func (v *hmacVerifier) generic(h http.Header, body []byte) error {
	val, err := v.value(h, v.header)
	if err != nil {
		return err
	}
	enc, ok := strings.CutPrefix(val, v.prefix)
	if !ok {
		return sigErr("malformed %s header: missing prefix %q", v.header, v.prefix)
	}
	var sig []byte
	if v.encoding == "base64" {
		sig, ok = decodeBase64(enc)
	} else {
		sig, ok = decodeHex(enc)
	}
	if !ok {
		return sigErr("malformed %s header: want %s of 32 bytes", v.header, v.encoding)
	}
	return v.match([][]byte{sig}, body)
}

var _ Verifier = (*hmacVerifier)(nil)
