// Unmatched settling: what a request on a sender's path gets when no
// sender on the path takes it (the path's unmatched rule, shadow routes).

package contract

import ()

// Unmatched settings: what a request on a sender's path gets when no sender
// on that path accepts it.
const (
	UnmatchedReject = "reject"
	UnmatchedPass   = "pass"
)

// settleUnmatched gives a route the file leaves alone its default: pass
// when every sender on it has match.when (the path is shared with what the
// site's own dispatch handles, as Bitrix's sale_ps_result.php: a request
// none of them takes is the site's business, as it was without hookonce),
// reject when one has none (that sender claims the whole path).
func (rt *Route) settleUnmatched() {
	if !rt.UnmatchedDefault {
		return
	}
	rt.Unmatched = UnmatchedPass
	for _, s := range rt.Senders {
		if len(s.When) == 0 {
			rt.Unmatched = UnmatchedReject
		}
	}
}

// UnmatchedReason says in the operator's words why the route's unmatched
// setting is what it is.
func (rt *Route) UnmatchedReason() string {
	if !rt.UnmatchedDefault {
		return "unmatched: " + rt.Unmatched + " (set in paths:)"
	}
	if rt.Unmatched == UnmatchedPass {
		return "unmatched: pass (default: every sender on this path has match.when)"
	}
	for _, s := range rt.Senders {
		if len(s.When) == 0 {
			return "unmatched: reject (default: sender " + s.Name + " has no match.when)"
		}
	}
	return "unmatched: reject"
}

// Shadow reports whether every sender on the route is in shadow mode:
// then hookonce acts as if it were absent for the requests none of them
// takes, and forwards them all.
func (rt *Route) Shadow() bool {
	for _, s := range rt.Senders {
		if !s.Shadow() {
			return false
		}
	}
	return len(rt.Senders) > 0
}

// ForwardsUnmatched reports whether a request with this method that no
// sender on the route takes goes to the site untouched (true) or is
// refused (false: 405 when no sender accepts the method, else 403). Shadow
// routes and a written unmatched: pass forward everything; the default
// pass forwards only methods some sender accepts, so a path keeps its 405
// for the others.
func (rt *Route) ForwardsUnmatched(method string) bool {
	switch {
	case rt.Shadow():
		return true
	case rt.Unmatched != UnmatchedPass:
		return false
	case rt.UnmatchedDefault:
		return rt.AcceptsMethod(method)
	}
	return true
}

// JudgesUnaccepted reports whether a request with a method no sender on
// the route accepts is still read and judged before it is forwarded: the
// route forwards it (a written unmatched: pass, not shadow) and a sender
// on it verifies deliveries, so a signed delivery resent with another
// method (PHP fills $_GET for any method) is refused as a signed sender's
// changed copy (ErrSignedUnmatched) rather than handed on unread.
func (rt *Route) JudgesUnaccepted(method string) bool {
	if rt.AcceptsMethod(method) || !rt.ForwardsUnmatched(method) || rt.Shadow() {
		return false
	}
	for _, s := range rt.Senders {
		if s.HasSignature() {
			return true
		}
	}
	return false
}
