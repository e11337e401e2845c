package contract

import (
	"net/http"
	"regexp"
	"strings"
)

// coverage is what a sender's signature vouches for: the raw body, every
// field of a source, or single named values. A key part outside it can be
// changed by anyone holding one signed delivery: the same signed body sent
// again under another event id is a new event to hookonce, and the
// handler runs again. check warns about such parts (uncoveredKeyParts).
type coverage struct {
	judged  bool            // the scheme signs content; token, basic and source-address vouch for no part of it
	body    bool            // the raw body bytes
	sources map[Source]bool // every field of the source (message.fields)
	include string          // message.fields.include_prefix, when set
	exclude map[string]bool // message.fields.exclude
	names   map[string]bool // "source.name" of single values (message.parts), headers canonical
}

var templateRef = regexp.MustCompile(`\{(header|body|query|form|request)\.([^{}]+)\}`)

// signatureCoverage reads what cfg's scheme signs.
func signatureCoverage(cfg SignatureConfig) coverage {
	c := coverage{sources: map[Source]bool{}, exclude: map[string]bool{}, names: map[string]bool{}}
	switch cfg.Scheme {
	case SchemeStripe, SchemeGitHub, SchemeShopify, SchemeSlack, SchemePaddle, SchemeHMACSHA256:
		c.judged, c.body = true, true
	case SchemeStandardWebhooks:
		c.judged, c.body = true, true
		c.names["header."+http.CanonicalHeaderKey("Webhook-Id")] = true
	case SchemePayPal:
		// The body only through its CRC32, which anyone can match: no
		// body part is vouched for (docs/senders.md, PayPal).
		c.judged = true
		c.names["header."+http.CanonicalHeaderKey("Paypal-Transmission-Id")] = true
		c.names["header."+http.CanonicalHeaderKey("Paypal-Transmission-Time")] = true
	case SchemeDigest, SchemeHMAC:
		c.judged = true
		if m := cfg.Message; m != nil {
			c.body = m.Body
			if f := m.Fields; f != nil {
				c.sources[Source(f.Source)] = true
				c.include = f.IncludePrefix
				for _, x := range f.Exclude {
					c.exclude[x] = true
				}
			}
			for _, p := range m.Parts {
				for _, ref := range templateRef.FindAllStringSubmatch(p, -1) {
					name := ref[2]
					if ref[1] == string(FromHeader) {
						name = http.CanonicalHeaderKey(name)
					}
					c.names[ref[1]+"."+name] = true
				}
			}
		}
	}
	return c
}

// covers reports whether the signature vouches for the value src, name.
func (c coverage) covers(src Source, name string) bool {
	if c.names[string(src)+"."+name] || (src != FromRequest && c.names["request."+name] && (src == FromQuery || src == FromForm)) {
		return true
	}
	field := func(s Source) bool {
		if !c.sources[s] || c.exclude[name] {
			return false
		}
		return c.include == "" || strings.HasPrefix(strings.ToLower(name), strings.ToLower(c.include))
	}
	switch src {
	case FromBody:
		// Signed fields of a JSON body are its top-level members.
		return c.body || (field(FromBody) && !strings.ContainsAny(name, ".#|*?"))
	case FromForm:
		return c.body || field(FromForm) || field(FromRequest)
	case FromQuery:
		return field(FromQuery) || field(FromRequest)
	case FromRequest:
		// The query merged with the form: the body alone does not cover
		// a value that may come from the query.
		return field(FromRequest)
	}
	return false
}

// uncoveredKeyParts names the key parts the sender's own file sets that
// its signature does not cover ("header X-Event-Id"), for a warning. A
// preset's built-in key is the provider's design, documented in
// docs/senders.md instead; a scheme that signs no content (token, basic,
// source-address) has nothing to compare.
func (s *Sender) uncoveredKeyParts() []string {
	if !s.sigCover.judged || !s.ownKey {
		return nil
	}
	var out []string
	for _, k := range s.Keys {
		for _, name := range append([]string{k.Name}, k.Fallback...) {
			if !s.sigCover.covers(k.Source, name) {
				out = append(out, string(k.Source)+" "+name)
			}
		}
	}
	return out
}
