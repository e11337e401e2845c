package contract

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Durable acceptance: with ack: durable, hookonce answers the sender
// itself once the delivery is stored, and owes the site the delivery
// until the site has done it (retried for retry_for). The answer is the
// one the site would give when it succeeds, built from the request alone:
// the success rule's status and body (its template filled from the
// request, or its json fields), or the sender's ack_answer.

// AckPolicy is a sender's ack.
type AckPolicy string

const (
	AckSite    AckPolicy = "site"    // the sender waits for the site (the default)
	AckDurable AckPolicy = "durable" // hookonce answers once the delivery is stored
)

// Defaults of durable acceptance.
const (
	DefaultRetryFor = 72 * time.Hour
	// DefaultAckBacklog bounds a sender's owed deliveries: a day of a
	// small shop's webhooks many times over, and a few MiB of store.
	DefaultAckBacklog = 10000
)

// AckAnswer is the answer a durable sender gets from hookonce.
type AckAnswer struct {
	Status int
	Body   *Template // nil: an empty body
	// JSON, when set, is the body (the success rule's json fields).
	JSON []byte
}

type ackAnswerFile struct {
	Status *int    `yaml:"status"`
	Body   *string `yaml:"body"`
}

// Durable reports whether hookonce answers the sender itself (ack:
// durable) for the deliveries it claims. Shadow mode never does: there
// the site answers every delivery.
func (s *Sender) Durable() bool { return s.Ack == AckDurable && !s.Shadow() }

// Acknowledgement renders the answer hookonce gives a durable delivery
// req: status, headers and body.
func (s *Sender) Acknowledgement(req *Request) (int, http.Header, []byte) {
	a := s.AckAnswer
	h := http.Header{}
	switch {
	case a == nil:
		return http.StatusOK, h, nil
	case a.JSON != nil:
		h.Set("Content-Type", "application/json")
		return a.Status, h, a.JSON
	case a.Body != nil:
		var secret []byte
		if su := s.Success; su != nil && su.Body == a.Body && len(su.secrets) > 0 {
			secret = su.secrets[0]
		}
		body := a.Body.RenderSecret(req, secret)
		if body != "" {
			h.Set("Content-Type", "text/plain; charset=utf-8")
		}
		return a.Status, h, []byte(body)
	}
	return a.Status, h, nil
}

// simpleJSONPath is a gjson path an answer can be built from: names
// joined with dots, nothing gjson reads as a pattern or a modifier.
var simpleJSONPath = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// successAnswer builds the answer the success rule describes, or says why
// it cannot be built from the request alone.
func (s *Sender) successAnswer() (*AckAnswer, error) {
	a := &AckAnswer{Status: http.StatusOK}
	su := s.Success
	statuses := s.FinalStatuses
	if su != nil && su.Statuses != nil {
		statuses = *su.Statuses
	}
	if !statuses.Final(http.StatusOK) {
		st, ok := lowestSuccess(statuses)
		if !ok {
			return nil, fmt.Errorf("no 2xx status counts as a success (%s)", statuses)
		}
		a.Status = st
	}
	switch {
	case su == nil:
	case su.Body != nil:
		a.Body = su.Body
	case su.BodyMatches != nil:
		return nil, fmt.Errorf("success.body_matches %q describes the site's answer, it does not say what to answer", su.BodyMatches.String())
	case su.JSON != nil:
		doc := map[string]any{}
		paths := make([]string, 0, len(su.JSON))
		vals := map[string]any{}
		for _, w := range su.JSON {
			if !simpleJSONPath.MatchString(w.Path) {
				return nil, fmt.Errorf("success.json path %q is a pattern, not one field", w.Path)
			}
			paths = append(paths, w.Path)
			vals[w.Path] = w.Value
		}
		sort.Strings(paths)
		for _, p := range paths {
			if err := setJSONPath(doc, strings.Split(p, "."), vals[p]); err != nil {
				return nil, err
			}
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return nil, err
		}
		a.JSON = b
	}
	return a, nil
}

func setJSONPath(doc map[string]any, names []string, v any) error {
	for i, n := range names {
		if i == len(names)-1 {
			if _, taken := doc[n]; taken {
				return fmt.Errorf("success.json names %s twice", strings.Join(names, "."))
			}
			doc[n] = v
			return nil
		}
		next, ok := doc[n].(map[string]any)
		if !ok {
			if _, taken := doc[n]; taken {
				return fmt.Errorf("success.json names %s as a value and as an object", strings.Join(names[:i+1], "."))
			}
			next = map[string]any{}
			doc[n] = next
		}
		doc = next
	}
	return nil
}

// lowestSuccess is the lowest 2xx status set holds.
func lowestSuccess(set StatusSet) (int, bool) {
	for st := 200; st < 300; st++ {
		if set.Final(st) {
			return st, true
		}
	}
	return 0, false
}

// applyAck reads the durable acceptance settings of pf onto s.
func (s *Sender) applyAck(pf *policyFile, bad func(field, format string, args ...any)) {
	if pf.Ack != nil {
		switch a := AckPolicy(*pf.Ack); a {
		case AckSite, AckDurable:
			s.Ack = a
		default:
			bad("ack", "%q: want site or durable%s", *pf.Ack, didYouMean(*pf.Ack, []string{string(AckSite), string(AckDurable)}))
		}
	}
	if v := pf.AckAfter; v != nil {
		if *v < 0 {
			bad("ack_after", "must not be negative")
		} else {
			s.AckAfter = time.Duration(*v)
		}
	}
	if v := pf.RetryFor; v != nil {
		if time.Duration(*v) < time.Minute {
			bad("retry_for", "%s is too short (minimum 1m)", time.Duration(*v))
		} else {
			s.RetryFor = time.Duration(*v)
		}
	}
	if v := pf.AckBacklog; v != nil {
		if *v < 1 {
			bad("ack_backlog", "%d: want at least 1", *v)
		} else {
			s.AckBacklog = *v
		}
	}
	if af := pf.AckAnswer; af != nil {
		a := &AckAnswer{Status: http.StatusOK}
		if af.Status != nil {
			if *af.Status < 200 || *af.Status > 299 {
				bad("ack_answer.status", "%d: want a 2xx status (the sender must take it as delivered)", *af.Status)
			}
			a.Status = *af.Status
		}
		if af.Body != nil {
			t, err := ParseTemplate(*af.Body)
			switch {
			case err != nil:
				bad("ack_answer.body", "%v", err)
			case t.holdsSecret():
				bad("ack_answer.body", "may not hold {secret} (write the digest in success.body, whose answer hookonce then builds itself)")
			default:
				a.Body = t
			}
		}
		s.ackAnswerSet = a
	}
}

// settleAck decides a durable sender's answer once its success rule and
// secrets are known: the sender's ack_answer, else the success rule's.
func (s *Sender) settleAck() []Problem {
	if s.ackAnswerSet != nil {
		s.AckAnswer = s.ackAnswerSet
	}
	if s.Ack != AckDurable {
		return nil
	}
	if s.AckAnswer != nil {
		return nil
	}
	a, err := s.successAnswer()
	if err != nil {
		return []Problem{{Field: "ack", Msg: "durable: hookonce answers the sender itself and must build that answer from the request alone, but " +
			err.Error() + ": set ack_answer: {status: 200, body: \"…\"} (what the site answers when it succeeds), or use ack: site"}}
	}
	s.AckAnswer = a
	return nil
}

// ackWarnings are check's warnings about a durable sender.
func (s *Sender) ackWarnings() []string {
	if s.Ack != AckDurable {
		return nil
	}
	var out []string
	if paymentPresets[s.Preset] {
		out = append(out, "ack: durable answers "+s.Preset+" \"delivered\" before the shop has applied the payment: "+
			"the provider shows it paid while the site may still be down, and a delivery the site refuses becomes an "+
			"unretried event for you to act on (docs/durable.md)")
	}
	if t := s.signedTolerance(); t > 0 {
		out = append(out, fmt.Sprintf("ack: durable may deliver late, and the signed timestamp is judged within %s: a site "+
			"that verifies %s's signature itself refuses a delivery older than its own tolerance (Stripe's libraries: 5m); "+
			"raise the site's tolerance or let hookonce be the verifier (docs/durable.md)", t, s.labelForWarning()))
	}
	return out
}

func (s *Sender) labelForWarning() string {
	if s.Preset != "" {
		return s.Preset
	}
	return "the sender"
}

// signedTolerance is how old a signed timestamp the sender's signature
// scheme accepts; 0 when it signs none.
func (s *Sender) signedTolerance() time.Duration {
	switch v := s.verifier.(type) {
	case *hmacVerifier:
		return v.tolerance
	case *paypalVerifier:
		return v.tolerance
	}
	return 0
}

// paymentPresets are the presets whose deliveries tell a shop that it was
// paid (or refunded).
var paymentPresets = map[string]bool{
	"stripe": true, "robokassa": true, "yookassa": true, "tbank": true, "cloudpayments": true,
	"rbs": true, "paykeeper": true, "paddle": true, "mollie": true, "paypal": true, "yandex-pay": true,
}
