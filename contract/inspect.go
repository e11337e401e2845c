package contract

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// The front of the decision table (docs/decision-table.md, rows 0a to 3), shared by the
// proxy, which acts on it, and `hookonce check --request`, which prints it,
// so the two can never judge a request differently.

// Locate finds the route of an escaped request path: the path the site
// will run, and the route of the senders that name it (nil when none does:
// row 0b). A path no site runs is ErrBadPath, a look-alike of a path a
// sender owns ErrLookalikePath (row 0a).
func (c *Contract) Locate(escapedPath string) (path string, rt *Route, err error) {
	path, err = NormalizePath(escapedPath)
	if err != nil {
		return "", nil, err
	}
	if rt = c.Route(path); c.router != nil && c.router.lookalike(path, rt) {
		return path, nil, ErrLookalikePath
	}
	return path, rt, nil
}

// Inspection is what the contract makes of one request on a route, in the
// order the decision table asks: which sender takes it (row 0d), whether
// its signature holds (row 2), its event id and payload hash (row 3).
type Inspection struct {
	Request *Request
	// BodyErr wraps ErrUnreadableBody: the body is a form PHP parses, and
	// hookonce cannot read it as PHP would (row 1b). No sender is chosen.
	BodyErr error
	Choice  Choice // Choice.Sender is nil when no sender on the route accepts it
	SigErr  error  // nil: valid, or the sender checks no signature
	// Ping is what the request is when it is one of the sender's unsigned
	// pings (PingShape), answered 200 by hookonce and never forwarded;
	// nothing else is read from it.
	Ping   string
	Key    string
	KeyErr error // wraps ErrMissingKey or ErrBadKey
	Hash   string
	// LegacyHash is the hash an older hookonce stored for this payload,
	// when it differs from Hash (see Sender.RequestHash).
	LegacyHash string
	HashErr    error // hash: json on a body that is not JSON
	// Passthrough is why the delivery goes to the site without dedupe
	// (dedupe: off, no_dedupe, a preset's shape of notification no key
	// tells apart); "" when it is deduplicated. Key and KeyErr are still
	// filled in, for check to show.
	Passthrough string
	// Object is the business object the delivery is about (serialize); ""
	// when the sender serializes nothing or the object's key is absent.
	Object    string
	ObjectErr error // why Object is "" for a serializing sender
}

// Unkeyed is why the event cannot be claimed: no usable key, or no hash.
func (in Inspection) Unkeyed() error {
	if in.KeyErr != nil {
		return in.KeyErr
	}
	return in.HashErr
}

// Inspect judges a request on route rt whose body has been read whole.
// It first removes from r.Header the headers the forward to the site will
// not carry (StripHopByHop), and renames the spellings of a header that
// CGI merges to the one name it was judged under (CGIHeader), so what it
// judges is what the site gets: an X_Event_Id judged as X-Event-Id goes to
// the site as X-Event-Id, which every server passes to PHP, where nginx
// (underscores_in_headers off, its default) would drop X_Event_Id and the
// site would read no id at all.
func (c *Contract) Inspect(rt *Route, r *http.Request, path string, body []byte, now time.Time) Inspection {
	StripHopByHop(r.Header)
	r.Header = CGIHeader(r.Header)
	in := Inspection{Request: c.Request(r, path, body)}
	if in.BodyErr = in.Request.Unreadable(); in.BodyErr != nil {
		return in
	}
	in.Choice = rt.Select(in.Request)
	s := in.Choice.Sender
	if s == nil {
		if in.Choice.Undecided == nil {
			in.Choice.Undecided = rt.signedMiss(in.Request, now)
		}
		return in
	}
	if reason, ok := s.Ping(in.Request); ok {
		in.Ping = reason
		return in
	}
	in.SigErr = s.Verify(in.Request, now)
	if in.SigErr != nil {
		// Nothing more is read from a message no one vouched for: its key
		// and hash decide nothing (401 either way) and would cost parsing
		// (trap 30 in ARCHITECTURE.md).
		return in
	}
	in.Key, in.KeyErr = s.Key(in.Request)
	if reason, ok := s.Passthrough(in.Request, in.KeyErr); ok {
		in.Passthrough = reason
		if in.Passthrough == "" {
			in.Passthrough = "no_dedupe"
		}
	}
	in.Hash, in.LegacyHash, in.HashErr = s.RequestHash(in.Request)
	in.Object, in.ObjectErr = s.ObjectKey(in.Request)
	return in
}

// ErrSignedUnmatched is wrapped by Choice.Undecided when no sender takes
// a request that verifies as a sender's (its signature, token or address
// holds) and that sender missed it only on what its signature does not
// cover: a method it does not accept, or a match.when value outside the
// signature. Anyone holding one genuine delivery can change such a part;
// forwarded as no sender's, the copy would reach the handler without
// dedupe.
var ErrSignedUnmatched = errors.New("the request verifies as a sender's delivery, but its match does not take it")

// signedMiss is why a request no sender on the route takes cannot be
// called "not ours" (nil when it can): it verifies as the delivery of a
// sender with a signature that missed it only on a part the signature
// does not vouch for (the method, or a condition outside it). A sender
// with a false condition its signature covers is told apart by signed
// content: a genuine delivery it does not take (another notification of
// the same provider) stays the site's. A sender without a signature
// cannot be told from a stranger; its conditions must read what the
// site's dispatch reads (docs/decision-table.md, the unmatched rule).
func (rt *Route) signedMiss(req *Request, now time.Time) error {
	for _, s := range rt.Senders {
		if !s.HasSignature() {
			continue
		}
		why := ""
		if !s.acceptsMethod(req.Method) {
			why = "method " + req.Method + " is not one it accepts"
		} else {
			for i := range s.When {
				c := &s.When[i]
				if ok, err := c.Judge(req); err != nil || ok {
					continue
				}
				if s.sigCover.covers(c.Source, c.Name) {
					why = ""
					break // signed content says it is not this sender's
				}
				if why == "" {
					why = c.String() + " does not hold, and the signature does not cover it"
				}
			}
		}
		if why == "" || s.Verify(req, now) != nil {
			continue
		}
		return fmt.Errorf("%w: it verifies as sender %s's, whose %s", ErrSignedUnmatched, s.Name, why)
	}
	return nil
}

// Forwardable reports whether req, whose key could not be read (keyErr),
// may still go to the site without dedupe (missing_key: pass, one of the
// preset's unkeyed shapes, or shadow mode): never for a key no event id
// should hold, nor (but in shadow mode) for one that is there but cannot
// be read as the site reads it (a header sent twice): unreadable is not
// absent (trap 36).
func (s *Sender) Forwardable(keyErr error, req *Request) bool {
	if errors.Is(keyErr, ErrBadKey) {
		return false
	}
	return s.Shadow() || !KeyUnreadable(keyErr) && (s.MissingKey == MissingPass || s.PassesUnkeyed(req))
}
