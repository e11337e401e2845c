package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"sort"
	"strings"

	"github.com/hookonce/hookonce/contract/internal/php"
)

// RequestHash is the payload hash of a delivery as the site reads it. It
// is PayloadHash of the body, and, when the query carries the payload —
// the request has no body (a GET callback), or the sender's key reads the
// query or $_REQUEST — the query too, in a canonical form (PHP's reading
// of it, fields sorted by name): a re-signed GET with another amount under
// one InvId is a conflict, not a replay. For such a sender a request with
// an empty query is hashed in the same form, with the query empty, so a
// record it leaves can never be taken for the old form below: a later
// request with the same body and some query is a conflict, not a replay.
//
// legacy is the hash as hookonce computed it before the query counted
// (the body alone), returned when it differs from hash: a record stored by
// an older hookonce holds that form, and a retry of its event must still
// be recognised as a duplicate (the proxy claims again with legacy when
// hash conflicts). "" when the two are equal.
func (s *Sender) RequestHash(req *Request) (hash, legacy string, err error) {
	body, err := s.PayloadHash(req.Body)
	if err != nil {
		return "", "", err
	}
	if len(req.Body) > 0 && !s.keyReadsQuery() {
		if s.Hash == HashJSON {
			// A record stored while the sender hashed raw bytes (Stripe's
			// preset before it left pending_webhooks out) holds the raw
			// hash: the same bytes are the same payload.
			if raw := rawHash(req.Body); raw != body {
				return body, raw, nil
			}
		}
		return body, "", nil
	}
	q := canonicalQuery(req.queryVars())
	sum := sha256.Sum256([]byte("hookonce-hash-v2\x00" + body + "\x00" + q))
	return hexString(sum[:]), body, nil
}

func (s *Sender) keyReadsQuery() bool {
	for _, k := range s.Keys {
		if k.Source == FromQuery || k.Source == FromRequest {
			return true
		}
	}
	return false
}

// canonicalQuery is the query as PHP holds it, independent of the order
// and spelling of its fields: name=value pairs by PHP name, escaped, sorted.
func canonicalQuery(v *php.Var) string {
	var pairs []string
	v.Each("", func(name, val string) {
		pairs = append(pairs, url.QueryEscape(name)+"="+url.QueryEscape(val))
	})
	sort.Strings(pairs)
	return strings.Join(pairs, "&")
}

// PayloadHash returns the lowercase hex SHA-256 that decides "same payload":
// of the raw body, or with hash: json of its canonical form (sorted keys, no
// insignificant whitespace, numbers as written, ignore paths removed).
func (s *Sender) PayloadHash(body []byte) (string, error) {
	if s.Hash == HashJWT {
		// The token's payload, canonical: a notification signed anew (a
		// retry) is the same payload (scheme_jwt.go).
		p, err := jwtPayload(body)
		if err != nil {
			return "", err
		}
		body = p
	}
	if s.Hash == HashJSON || s.Hash == HashJWT {
		h := sha256.New()
		if err := writeCanonicalJSON(h, body, s.Ignore); err != nil {
			return "", err
		}
		var sum [sha256.Size]byte
		return hexString(h.Sum(sum[:0])), nil
	}
	sum := sha256.Sum256(body)
	return hexString(sum[:]), nil
}

func rawHash(body []byte) string {
	sum := sha256.Sum256(body)
	return hexString(sum[:])
}

// hexString is hex.EncodeToString of a SHA-256 sum, in one allocation
// (the string) rather than two.
func hexString(sum []byte) string {
	var b [2 * sha256.Size]byte
	return string(b[:hex.Encode(b[:], sum)])
}
