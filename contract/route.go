// Routes: the senders that name one path, and Select, which picks the one
// that takes a request (method, then match.when, in file order).

package contract

import (
	"fmt"
	"strings"
)

// Route is every sender that names one path, in file order, and what a
// request on that path that none of them accepts gets.
type Route struct {
	Path    string // as written: exact, or a prefix ending in *
	Senders []*Sender
	// taken is, for each of Senders, Choice.Why when Select picks it
	// first (takenWhy), made once: a slice capped at its length, so an
	// append to a Choice's Why copies it.
	taken [][]string
	// Unmatched is UnmatchedReject or UnmatchedPass: written in the file
	// (paths:), or the default (UnmatchedDefault), which is pass exactly
	// when every sender on the path has match.when conditions.
	Unmatched string
	// UnmatchedDefault reports that the file does not set unmatched for
	// this path. A default pass forwards requests whose method some sender
	// accepts and whose conditions hold for none; a written pass forwards
	// any method too.
	UnmatchedDefault bool
}

// Choice is how a route judged one request: the sender that takes it, or
// nil and why none did.
type Choice struct {
	Sender *Sender
	// Why says which condition decided: the first failing condition of
	// each sender tried ("does not hold"), one whose value could not be
	// read ("could not be read"), or the conditions that all held. It
	// may be shared with other Choices of the route: read it or append to
	// it (it is capped at its length), never write its elements.
	Why []string
	// Undecided is why the route cannot tell whether a sender takes the
	// request: a condition's value is there but cannot be read as the site
	// reads it (ErrConditionUnreadable), or the request verifies as a
	// sender's delivery that its match does not take (ErrSignedUnmatched,
	// see Contract.Inspect). Sender is nil, and the request is refused
	// (400), never forwarded as no sender's.
	Undecided error
}

// Select tries the route's senders in file order and returns the first
// whose method and conditions accept req. A sender with a condition that
// could not be read and none that is false stops the search undecided
// (Choice.Undecided): it might take the request, and it comes first.
func (rt *Route) Select(req *Request) Choice {
	var ch Choice
	for i, s := range rt.Senders {
		if !s.acceptsMethod(req.Method) {
			ch.Why = append(ch.Why, fmt.Sprintf("%s: method %s not accepted", s.Name, req.Method))
			continue
		}
		failed, unread, err := judgeAll(s.When, req)
		if failed != nil {
			ch.Why = append(ch.Why, fmt.Sprintf("%s: %s does not hold", s.Name, failed))
			continue
		}
		if err != nil {
			ch.Why = append(ch.Why, fmt.Sprintf("%s: %s could not be read: %v", s.Name, unread, err))
			ch.Undecided = fmt.Errorf("%w: sender %s: %s: %w", ErrConditionUnreadable, s.Name, unread, err)
			return ch
		}
		ch.Sender = s
		if ch.Why == nil && i < len(rt.taken) {
			ch.Why = rt.taken[i]
			return ch
		}
		ch.Why = append(ch.Why, takenWhy(s))
		return ch
	}
	return ch
}

// Signed reports whether a sender on the route checks a signature, token
// or source address: only then does Inspect read its now (Verify judges
// timestamps by it).
func (rt *Route) Signed() bool {
	for _, s := range rt.Senders {
		if s.HasSignature() {
			return true
		}
	}
	return false
}

// takenWhy is what Choice.Why says of a sender Select picks: that it has
// no conditions, or the conditions that held.
func takenWhy(s *Sender) string {
	if len(s.When) == 0 {
		return s.Name + ": no conditions"
	}
	held := make([]string, len(s.When))
	for i, c := range s.When {
		held[i] = c.String()
	}
	return s.Name + ": " + strings.Join(held, " and ") + " hold"
}

// addSender adds s to the route's senders (its conditions compiled).
func (rt *Route) addSender(s *Sender) {
	rt.Senders = append(rt.Senders, s)
	rt.taken = append(rt.taken, []string{takenWhy(s)}[:1:1])
}

// Route returns the route for a normalised path, or nil when no sender
// names it (the request is passed through untouched).
func (c *Contract) Route(path string) *Route {
	if c.router == nil {
		return nil
	}
	return c.router.find(path)
}

// Routes lists every route in file order.
func (c *Contract) Routes() []*Route {
	if c.router == nil {
		return nil
	}
	return c.router.routes
}
