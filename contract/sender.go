package contract

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Sender is one compiled sender rule. Zero values never reach callers: every
// field is filled from the built-in defaults, the file's defaults, the
// preset and the sender's own settings, in that order.
type Sender struct {
	Name   string
	Preset string // "" when none
	// RetryWindow is how long the sender keeps retrying a failed delivery
	// (retry_window, else the preset's); 0 unknown. An event left released
	// or held longer than that with no new attempt is unretried.
	RetryWindow    time.Duration
	ownRetryWindow bool // set by the file (defaults or the sender), not a preset

	Methods []string    // upper case; the preset's, else [POST], when the file names none; nil for any
	Path    string      // as the site runs it: exact, or a prefix when it ends in *
	When    []Condition // all must hold (match.when)
	// presetMethods are the methods the preset's provider is documented
	// to use (check warns when Methods excludes one).
	presetMethods []string

	Keys []KeyPart // joined with ":" in order
	// Serialize, when set, keeps deliveries about one business object from
	// running at the site together (nil: they run as they come).
	Serialize *Serialize
	Hash      HashMode // HashRaw or HashJSON
	Ignore    []string // JSON paths dropped before a HashJSON hash

	TTL             time.Duration
	ownTTL          bool          // set by the file (defaults or the sender)
	Lease           time.Duration // renewed every Lease/3 while the site works
	UpstreamTimeout time.Duration
	StoreTimeout    time.Duration
	WaitTimeout     time.Duration // in_progress: wait gives up after it
	MaxStoredBody   int64

	StoreRequestBody bool
	InProgress       InProgressPolicy
	MissingKey       MissingKeyPolicy
	// NoDedupe are the shapes of delivery forwarded to the site without
	// dedupe (the preset's, then the file's no_dedupe and dedupe: off;
	// see Passthrough).
	NoDedupe []NoDedupeShape
	// Pings are the preset's unsigned handshakes that hookonce answers
	// itself (see Ping).
	Pings []PingShape
	// ChangedPayload is what a delivery means whose key is stored with
	// another payload (row 7): the preset's, else the file's
	// changed_payload, else conflict.
	ChangedPayload   ChangedPolicy
	OnStoreError     StoreErrPolicy
	Ambiguous        AmbiguousPolicy
	Mode             Mode
	ForwardKeyHeader string // "" disables

	// Success tells an applied delivery from a failed one among final
	// answers; nil means every final status is a success.
	Success *Success

	ConflictStatus  int
	ConflictBody    string // "" means the built-in problem+json body
	DuplicateStatus int    // 0 means replay the stored answer
	FinalStatuses   StatusSet

	StripResponseHeaders []string

	// Durable acceptance (ack.go): Ack, how long the sender waits for the
	// site first (AckAfter), how long hookonce keeps trying (RetryFor),
	// the answer it gives (AckAnswer: ack_answer, else the success
	// rule's; nil for ack: site) and the bound on owed deliveries.
	Ack          AckPolicy
	AckAfter     time.Duration
	RetryFor     time.Duration
	AckAnswer    *AckAnswer
	AckBacklog   int
	ackAnswerSet *AckAnswer // the file's ack_answer

	verifier Verifier // nil when no signature is configured
	sigCover coverage // what the signature vouches for (coverage.go)
	ownKey   bool     // the file sets key itself (not the preset)
}

func (s *Sender) acceptsMethod(m string) bool {
	return s.Methods == nil || slices.Contains(s.Methods, m)
}

// Final reports whether an upstream status is final for this sender.
func (s *Sender) Final(status int) bool { return s.FinalStatuses.Final(status) }

// Shadow reports whether the sender only observes (mode: shadow).
func (s *Sender) Shadow() bool { return s.Mode == ModeShadow }

// HasSignature reports whether deliveries must carry a valid signature.
func (s *Sender) HasSignature() bool { return s.verifier != nil }

// Verify checks the delivery's authenticity (a signature, a token, the
// sender's address); nil when valid or when the sender has no signature
// configured. now judges timestamps.
// The error says what is wrong without quoting the signature or a secret.
func (s *Sender) Verify(req *Request, now time.Time) error {
	if s.verifier == nil {
		return nil
	}
	return s.verifier.Verify(req, now)
}

// NoDedupeShape is a shape of delivery that goes to the site without
// dedupe: no claim, nothing stored, serialized when the sender sets
// serialize, counted as outcome passthrough and logged with Reason. A
// preset names the provider's notifications no key can tell apart (a
// handshake, an application event, a refund callback without a refund
// id); the operator adds shapes with no_dedupe and turns a whole sender
// off with dedupe: off. The signature is checked first, as for every
// delivery.
type NoDedupeShape struct {
	// When: every condition must hold; none means every delivery.
	When []Condition
	// IfKeyMissing limits the shape to deliveries whose key is missing
	// (a delivery that carries its id is still deduplicated).
	IfKeyMissing bool
	// Reason is logged with each such delivery and shown by check.
	Reason string
}

// PingShape is a provider's unsigned test request that only wants to
// hear 200 (WooCommerce's deliver_ping when a webhook is saved): hookonce
// answers it itself, with an empty 200, and never forwards it, so a
// request of that shape gets nothing past the signature to the site. It
// is matched narrowly: the whole raw body, and none of the headers a
// signed delivery carries.
type PingShape struct {
	Body    *regexp.Regexp // must match the whole raw body
	Without []string       // headers that must be absent
	Reason  string
}

// Ping reports whether req is one of the sender's unsigned pings, and
// what it is. It is asked before the signature: a request with any of
// the Without headers is judged as a delivery.
func (s *Sender) Ping(req *Request) (reason string, ok bool) {
	if req.Method != http.MethodPost {
		return "", false
	}
	for _, p := range s.Pings {
		held := p.Body.Match(req.Body)
		for _, h := range p.Without {
			if len(req.Header.Values(h)) > 0 {
				held = false
			}
		}
		if held {
			return p.Reason, true
		}
	}
	return "", false
}

// ChangedPolicy is what a delivery means whose key is already stored with
// another payload hash (the decision table's row 7).
type ChangedPolicy string

const (
	// ChangedConflict: the same id must mean the same payload; a changed
	// one is refused with the conflict answer (422) and recorded.
	ChangedConflict ChangedPolicy = "conflict"
	// ChangedDuplicate: the provider sends one event in several renderings
	// (Shopify: one copy per subscription); a changed payload is a copy
	// of the first and gets its stored answer.
	ChangedDuplicate ChangedPolicy = "duplicate"
	// ChangedNewEvent: the id does not name the notification alone; a
	// changed payload is a notification of its own, claimed under the key
	// extended by its payload hash (ChangedKey), so its retries dedupe.
	ChangedNewEvent ChangedPolicy = "new_event"
)

// ChangedKey is the key a changed payload is claimed under when the
// sender's changed_payload is new_event: the event's key and the payload's
// hash, so each distinct payload under one id is one event.
func ChangedKey(key, hash string) string { return key + ":payload-sha256=" + hash }

// Passthrough reports whether req goes to the site without dedupe, and
// why. keyErr is the error of reading its key (nil when it has one): a
// shape limited to deliveries without a key holds only when the key is
// missing (never for a key no event id should hold).
func (s *Sender) Passthrough(req *Request, keyErr error) (reason string, ok bool) {
	for _, shape := range s.NoDedupe {
		if shape.IfKeyMissing && (keyErr == nil || KeyUnreadable(keyErr)) {
			continue
		}
		// A shape whose condition cannot be read is not one: the
		// delivery is deduplicated (or refused for its key), never let
		// past dedupe on a reading hookonce cannot make.
		if ok, err := allHold(shape.When, req); ok && err == nil {
			return shape.Reason, true
		}
	}
	return "", false
}

// PassesUnkeyed reports whether req, whose key is missing, has one of
// the shapes forwarded without dedupe.
func (s *Sender) PassesUnkeyed(req *Request) bool {
	_, ok := s.Passthrough(req, ErrMissingKey)
	return ok
}

// DedupeOff reports whether every delivery of the sender is forwarded
// without dedupe (dedupe: off, or a preset that names no key).
func (s *Sender) DedupeOff() bool {
	for _, shape := range s.NoDedupe {
		if len(shape.When) == 0 && !shape.IfKeyMissing {
			return true
		}
	}
	return false
}

// warnings are what check and serve print for a valid sender: a ttl
// shorter than the preset's retry window, a match.method that leaves out
// a method the preset's provider calls back with.
func (s *Sender) warnings() []string {
	var out []string
	if s.RetryWindow > 0 && s.TTL < s.RetryWindow {
		out = append(out, "ttl "+s.TTL.String()+" is shorter than the "+s.Preset+
			" retry window "+s.RetryWindow.String()+": a late retry would be processed again")
	}
	var missing []string
	for _, m := range s.presetMethods {
		if !s.acceptsMethod(m) {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		out = append(out, "match.method "+strings.Join(s.Methods, ",")+" leaves out "+strings.Join(missing, ",")+
			", which "+s.Preset+" is documented to call back with: those callbacks would get 405 (write match.method: "+
			strings.Join(s.presetMethods, ",")+", or leave it out)")
	}
	for _, c := range s.When {
		if (c.Source == FromQuery || c.Source == FromRequest || c.Source == FromForm) && c.Name == "wc-api" {
			out = append(out, "match.when "+c.String()+" compares wc-api as sent, on one path, where WooCommerce lowercases it, drops "+
				"characters and reads it on every URL (form and /wc-api/ endpoint too): a callback spelled otherwise runs the handler "+
				"without dedupe; write { wc_api: <name> } with path /* (docs/woocommerce.md)")
			break
		}
	}
	out = append(out, s.ackWarnings()...)
	if parts := s.uncoveredKeyParts(); len(parts) > 0 {
		out = append(out, "key "+strings.Join(parts, ", ")+" is not covered by the signature: anyone holding one signed "+
			"delivery can send it again under another event id, and the site's handler runs again; key on a value "+
			"the signature covers (a field of the signed body), or have the sender sign the id too")
	}
	return out
}

// DefaultUnretriedAfter judges events of senders whose retry window is
// unknown: a day without a new attempt.
const DefaultUnretriedAfter = 24 * time.Hour

// UnretriedAfter is how long after its last attempt a released or held
// event of this sender counts as unretried.
func (s *Sender) UnretriedAfter() time.Duration {
	if s.RetryWindow > 0 {
		return s.RetryWindow
	}
	return DefaultUnretriedAfter
}

// Serialize is a sender's serialize setting: deliveries whose object keys
// (Keys, read as an event key is) are equal within Scope never run at the
// site at the same time; one that finds its object busy waits up to Wait.
type Serialize struct {
	Keys  []KeyPart
	Scope string        // the sender's name unless set; senders may share one
	Wait  time.Duration // the sender's upstream_timeout unless set
}

// ObjectKey returns the key of the business object a delivery is about,
// as serialize names it; "" with ErrMissingKey when a part is absent (the
// delivery then runs unserialized: it is about no object), and ErrBadKey
// for a value no key should hold.
func (s *Sender) ObjectKey(req *Request) (string, error) {
	if s.Serialize == nil {
		return "", nil
	}
	return joinKey(s.Serialize.Keys, req)
}
