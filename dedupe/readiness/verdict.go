package readiness

// The verdict: one sender's evidence (report.go's tally) judged ready,
// not enough traffic or not ready, each problem and note with its fix.

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Verdicts, the values of SenderReport.Verdict. In code a verdict never
// says "ready" (that word is /readyz's: the process takes traffic): GoLive
// is shown as "ready", NoGo as "not ready".
const (
	GoLive        = "ready"              // nothing holds the sender back, with enough traffic seen
	NotEnough     = "not enough traffic" // nothing wrong so far, too few deliveries or repeats
	NoGo          = "not ready"          // a problem would refuse deliveries or lose events
	UnknownSender = "not in the config"
)

// Thresholds of the verdict. A sender is ready once it has taken
// MinDeliveries keyed deliveries and MinRepeats exact repeats in the
// window, with nothing that would be refused or lost.
type Thresholds struct {
	MinDeliveries int64 `json:"min_deliveries"`
	MinRepeats    int64 `json:"min_repeats"`
}

// DefaultThresholds: a few dozen deliveries with a couple of exact
// repeats, all answered from a stored answer, are enough to go live.
var DefaultThresholds = Thresholds{MinDeliveries: 20, MinRepeats: 2}

// volatileNames are parts of field names that change from one send of a
// notification to the next (attempt counters, send times, delivery ids),
// not between two notifications.
var volatileNames = []string{"pending_webhooks", "attempt", "retry", "retries", "sent_at", "send_time", "delivered_at",
	"delivery_id", "deliveryid", "timestamp", "notification_time", "request_id", "requestid"}

func looksVolatile(field string) bool {
	last := strings.ToLower(field[strings.LastIndexByte(field, '.')+1:])
	for _, v := range volatileNames {
		if strings.Contains(last, v) {
			return true
		}
	}
	return false
}

// verdict turns a sender's evidence into its verdict: Verdict, Reason,
// Problems and Notes.
func verdict(r *SenderReport, a *tally, s Sender, known bool, th Thresholds, now time.Time) {
	link := func(page string) string { return page + "?sender=" + url.QueryEscape(r.Sender) }
	if known && !s.Signed {
		r.Unsigned = r.Deliveries
	}
	r.Success = s.Success
	r.TimeoutMillis, r.TimeoutFrom = s.Timeout.Milliseconds(), s.TimeoutFrom
	r.MissingKeyShapes = topShapes(a.shapes, 5)
	if len(a.notOK) > 0 {
		r.NotSuccessByStatus = a.notOK
	}
	repeats := r.ExactRepeats + r.Changed
	for field, n := range a.changedIn {
		fc := FieldChange{Field: field, Times: n, Keys: int64(len(a.changedKeys[field])), Example: a.example[field]}
		fc.Suggest, fc.Why = suggest(field, n, repeats, s)
		r.ChangedFields = append(r.ChangedFields, fc)
	}
	r.ChangedFrom = topShapes(a.changedNet, 5)
	slices.SortFunc(r.ChangedFields, func(x, y FieldChange) int {
		if x.Times != y.Times {
			return int(y.Times - x.Times)
		}
		return strings.Compare(x.Field, y.Field)
	})

	problem := func(f Finding) { r.Problems = append(r.Problems, f) }
	note := func(f Finding) { r.Notes = append(r.Notes, f) }

	if r.Changed > 0 {
		var signatures []string
		for _, fc := range r.ChangedFields {
			if fc.Suggest == "signature" {
				signatures = append(signatures, "`"+fc.Field+"`")
			}
		}
		for _, fc := range r.ChangedFields {
			switch fc.Suggest {
			case "signature":
				// Changes with what it signs: told with the fields it signs.
			case "look":
				lookAt(r, a, s, fc, signatures, problem, note, link)
			case "ignore":
				fix := fmt.Sprintf("add `%s` to `ignore`", fc.Field)
				if !s.HashJSON {
					fix = fmt.Sprintf("set `hash: json` and add `%s` to `ignore`", fc.Field)
				}
				problem(Finding{What: fmt.Sprintf("`%s` changed in %d of %d repeats (it changes from one send of a notification to the next)", fc.Field, fc.Times, repeats),
					Fix: fix + "; if it does tell two notifications apart, add it to the key instead", Link: link("/ui/conflicts")})
			default:
				what := fmt.Sprintf("two payloads per key differ in `%s` (%d times, %d keys): two notifications share one event id", fc.Field, fc.Times, fc.Keys)
				if fc.Why != "" {
					what += " (" + fc.Why + ")"
				}
				if len(signatures) > 0 {
					what += "; the signature " + strings.Join(signatures, ", ") + " changes with it"
				}
				fix := fmt.Sprintf("add `%s` to the key (%s), so each notification gets its own", fc.Field, keyWords(s))
				if fc.Why == "" {
					fix += "; if it only changes when a notification is sent again, add it to `ignore` instead"
				}
				problem(Finding{What: what, Fix: fix, Link: link("/ui/conflicts")})
			}
		}
		if r.ChangedUnrecorded > 0 || len(r.ChangedFields) == 0 {
			what := fmt.Sprintf("%d payloads changed under a known key (would be answered 422)", r.Changed)
			if r.ChangedUnrecorded > 0 && len(r.ChangedFields) > 0 {
				what = fmt.Sprintf("%d more changed payloads name no changed field", r.ChangedUnrecorded)
			}
			problem(Finding{What: what, Fix: "open the conflicts to see what changed (their records keep no field fingerprint: stored by an older hookonce, or a body neither JSON nor a form with no query)",
				Link: link("/ui/conflicts")})
		}
	}
	if r.MissingKey > 0 {
		what := fmt.Sprintf("%d deliveries had no event id (would be answered 400)", r.MissingKey)
		if len(r.MissingKeyShapes) > 0 {
			what += "; they looked like: " + r.MissingKeyShapes[0].Shape
		}
		problem(Finding{What: what, Fix: fmt.Sprintf("if these are genuine notifications without an id, forward them without dedupe (`missing_key: pass`); otherwise correct the key (%s)", keyWords(s))})
	}
	if r.SignatureFailures > 0 {
		signatureFindings(r, a, problem, note)
	}
	if r.NotSuccess > 0 {
		var by []string
		for _, st := range slices.Sorted(maps.Keys(a.notOK)) {
			by = append(by, fmt.Sprintf("%s %d times", st, a.notOK[st]))
		}
		rule := "its success rule"
		if s.Success != "" {
			rule = s.Success
		}
		problem(Finding{What: fmt.Sprintf("the site answered %s without %s", strings.Join(by, ", "), rule),
			Fix:  "check the success rule: if the site did apply these notifications, the rule is wrong and every retry would run the handler again; if it did not, the site failed them (see its logs)",
			Link: "/ui/events?sender=" + url.QueryEscape(r.Sender) + "&status=released"})
	}
	if r.TooLarge > 0 {
		problem(Finding{What: fmt.Sprintf("%d deliveries were larger than max_body (would be answered 413)", r.TooLarge), Fix: "raise `max_body`"})
	}
	if r.Unreadable > 0 {
		problem(Finding{What: fmt.Sprintf("%d deliveries had a body hookonce cannot read as the site does (would be answered 400)", r.Unreadable),
			Fix: "see the log lines with outcome bad_request for the reason; such a body cannot be judged safely"})
	}
	if !known {
		problem(Finding{What: "deliveries were counted for this sender, and the config has no sender of this name", Fix: "nothing, if it was renamed or removed on purpose"})
	}

	if known && !s.Signed && r.Deliveries > 0 {
		note(Finding{What: fmt.Sprintf("all %d deliveries were taken without a signature check", r.Deliveries),
			Fix: "configure the provider's signature if it signs: anyone who reaches hookonce can otherwise take an event id first"})
	}
	if r.SiteFailed > 0 {
		note(Finding{What: fmt.Sprintf("the site failed %d deliveries (5xx, 408, 425, 429 or unreachable); each was freed for the sender's retry", r.SiteFailed)})
	}
	if r.Ambiguous > 0 {
		note(Finding{What: fmt.Sprintf("%d deliveries timed out or broke at the site after being sent (the handler may have run)", r.Ambiguous),
			Link: "/ui/events?sender=" + url.QueryEscape(r.Sender) + "&status=unretried"})
	}
	if r.RepeatsWhileBusy > 0 {
		f := Finding{What: fmt.Sprintf("%d repeats came while the first delivery was still at the site; they wait for its answer (`in_progress: wait`, the default)", r.RepeatsWhileBusy)}
		if s.InProgressReject {
			f = Finding{What: fmt.Sprintf("%d repeats came while the first delivery was still at the site (answered 409: `in_progress: reject`)", r.RepeatsWhileBusy),
				Fix: "remove `in_progress: reject` (the default, wait, gives them the first one's answer) unless the provider needs the 409"}
		}
		note(f)
	}
	if r.StoreErrors > 0 {
		note(Finding{What: fmt.Sprintf("the store failed %d times for this sender", r.StoreErrors), Fix: "check the store (see /readyz and the log)"})
	}
	if r.Passthrough > 0 {
		note(Finding{What: fmt.Sprintf("%d deliveries were forwarded without dedupe (no event id, passed as configured)", r.Passthrough)})
	}
	if r.TimeoutMillis > 0 && r.SlowestMillis > r.TimeoutMillis/2 {
		f := Finding{What: fmt.Sprintf("the slowest answer took %s; the sender waits %s (%s)", ms(r.SlowestMillis), ms(r.TimeoutMillis), r.TimeoutFrom)}
		if r.SlowestMillis > r.TimeoutMillis {
			f.Fix = "the sender gives up first and sends again while the site works; those repeats wait and get the first one's answer"
			if s.InProgressReject {
				f.Fix = "the sender gives up first and sends again while the site works; with `in_progress: reject` those repeats get 409 (the default, wait, answers them once the first is done)"
			}
		}
		note(f)
	}
	switch {
	case len(r.Problems) > 0:
		r.Verdict = NoGo
		if !known {
			r.Verdict = UnknownSender
		}
		r.Reason = "1 problem would refuse deliveries or lose events; fix it and run in shadow mode again"
		if n := len(r.Problems); n > 1 {
			r.Reason = fmt.Sprintf("%d problems would refuse deliveries or lose events; fix them and run in shadow mode again", n)
		}
	case r.Keyed < th.MinDeliveries || r.ExactRepeats < th.MinRepeats:
		r.Verdict = NotEnough
		var need []string
		if more := th.MinDeliveries - r.Keyed; more > 0 {
			s := fmt.Sprintf("%d more deliveries", more)
			if days := daysFor(more, r.Keyed, r.FirstSeen, now); days > 0 {
				s += fmt.Sprintf(" (about %d more days at the rate seen so far)", days)
			}
			need = append(need, s)
		}
		if more := th.MinRepeats - r.ExactRepeats; more > 0 {
			need = append(need, fmt.Sprintf("%d more exact repeats (a sender's retry or resend of a notification already answered)", more))
		}
		r.Reason = "nothing wrong so far; needs " + strings.Join(need, " and ")
		if r.EarlierRules > 0 {
			r.Reason += fmt.Sprintf(" under the rules in force (%d deliveries under earlier rules are not counted)", r.EarlierRules)
		}
	default:
		r.Verdict = GoLive
		changed := "no changed payloads"
		switch {
		case r.Changed > 0 && r.Mode == "shadow":
			changed = fmt.Sprintf("%d changed payloads to look at (enforcing refuses them with 422, as it should)", r.Changed)
		case r.Changed > 0:
			changed = fmt.Sprintf("%d changed payloads to look at (refused with 422, as they should be)", r.Changed)
		}
		r.Reason = fmt.Sprintf("%d deliveries, %d exact repeats answered from the stored answer, %s, no event lost", r.Keyed, r.ExactRepeats, changed)
		if r.Mode == "shadow" {
			r.Reason = fmt.Sprintf("%d deliveries, %d exact repeats that would be answered from the stored answer, %s, no event lost; switch it to `mode: enforce`", r.Keyed, r.ExactRepeats, changed)
		}
	}
}

// daysFor estimates the days the next more deliveries take at the rate of
// seen deliveries since first; 0 when unknown.
func daysFor(more, seen int64, first, now time.Time) int64 {
	if seen <= 0 || first.IsZero() {
		return 0
	}
	days := now.Sub(first).Hours() / 24
	if days < 1 {
		days = 1
	}
	perDay := float64(seen) / days
	d := int64(float64(more)/perDay + 0.999)
	return max(d, 1)
}

func keyWords(s Sender) string {
	if len(s.Keys) == 0 {
		return "`key:` of this sender"
	}
	return "the key is " + strings.Join(s.Keys, " + ")
}

func ms(n int64) string { return (time.Duration(n) * time.Millisecond).String() }

// signatureFindings tells a wrong secret from strangers: bad signatures
// from a network that also sent good deliveries, or with no good
// delivery at all, are the sender's own (check the secret); those from
// networks that never sent a good one are strangers, refused as they
// should be, and hold nothing back.
func signatureFindings(r *SenderReport, a *tally, problem, note func(Finding)) {
	const fix = "check the sender's secret (the environment variable `signature.secret_env` names) against the provider's settings; a provider with several secrets needs each of them"
	r.SignatureFailuresFrom = topShapes(a.bad, 5)
	var own, strangers int64
	var ownNets, strangerNets []string
	for _, net := range slices.Sorted(maps.Keys(a.bad)) {
		// A bad signature of unknown origin (counted by an older hookonce,
		// or with no client address) is taken for the sender's own, as
		// before; those past the bound of networks
		// (dedupe.TrafficOtherDetail: more than dedupe.MaxTrafficShapes
		// networks in a day, no provider's) for strangers'.
		if a.good[net] > 0 || net == unknownNetwork {
			own += a.bad[net]
			ownNets = append(ownNets, net)
		} else {
			strangers += a.bad[net]
			strangerNets = append(strangerNets, net)
		}
	}
	good := r.Keyed
	switch {
	case good == 0:
		problem(Finding{What: fmt.Sprintf("all %d deliveries failed the signature check (would be answered 401), from %s", r.SignatureFailures, netList(strangerNets, ownNets)),
			Fix: fix})
		return
	case own > 0 && slices.Equal(ownNets, []string{unknownNetwork}):
		problem(Finding{What: fmt.Sprintf("%d deliveries failed the signature check (would be answered 401)", own), Fix: fix})
	case own > 0:
		problem(Finding{What: fmt.Sprintf("%d deliveries from networks that also sent good ones (%s) failed the signature check (would be answered 401)", own, netList(ownNets, nil)),
			Fix: fix})
	}
	if strangers > 0 {
		r.RefusedStrangers = strangers
		note(Finding{What: fmt.Sprintf("refused strangers: %d deliveries with a bad signature from networks this sender never used for a good delivery (%s)", strangers, netList(strangerNets, nil)),
			Fix: "nothing to change, they are refused as they should be; if one of these networks is the provider's, check the secret"})
	}
}

// unknownNetwork is where a bad signature came from when its counter
// does not say.
const unknownNetwork = "(unknown)"

// netList names at most five networks.
func netList(a, b []string) string {
	all := append(slices.Clone(a), b...)
	if len(all) > 5 {
		return strings.Join(all[:5], ", ") + fmt.Sprintf(" and %d more", len(all)-5)
	}
	return strings.Join(all, ", ")
}

// distinctByDocs are fields whose distinct values mark distinct
// notifications by their provider's documentation: each belongs in the
// key, though its name reads like an amount, for a sender of that
// provider (rbsSender); for any other sender such a name is an amount.
var distinctByDocs = map[string]string{
	// The RBS gateways (Sberbank, Alfa-Bank, the BPC platform) call back
	// once per refund of an order, operation "refunded", with the order's
	// total refunded so far and the refund's own amount.
	"refundedamount":          "the RBS gateways call back once per refund of an order, each with the total refunded so far; the `rbs` preset keys a refund by `externalRefundId`",
	"operationrefundedamount": "the RBS gateways call back once per refund of an order, each with that refund's amount; the `rbs` preset keys a refund by `externalRefundId`",
}

// rbsSender: the sender takes the RBS gateways' callbacks, which name
// the gateway's order mdOrder (its key reads it).
func rbsSender(s Sender) bool {
	for _, k := range s.Keys {
		if strings.HasSuffix(k, ":mdOrder") {
			return true
		}
	}
	return false
}

// lastName is the last part of a field's name, lower case: "b" of "a.b"
// and of "a[b]".
func lastName(field string) string {
	f := strings.TrimSuffix(field, "]")
	if i := strings.LastIndexAny(f, ".["); i >= 0 {
		f = f[i+1:]
	}
	return strings.ToLower(f)
}

// looksSignature: a signature, checksum or token field. It changes with
// what it signs and is never a key part.
func looksSignature(field string) bool {
	n := lastName(field)
	switch n {
	case "sign", "sig", "hash", "token", "crc", "mac", "hmac", "checksum":
		return true
	}
	return strings.Contains(n, "signature") || strings.Contains(n, "checksum") || strings.HasSuffix(n, "_sign") || strings.HasSuffix(n, "hmac")
}

// looksAmount: an amount, sum or price. A changed amount under one event
// id is what the 422 protects against; it is never proposed as a key
// part (following that advice would let a changed amount run the
// handler again), unless documented as telling notifications apart.
func looksAmount(field string) bool {
	n := lastName(field)
	for _, a := range []string{"amount", "sum", "price", "total", "cost", "fee"} {
		if strings.Contains(n, a) {
			return true
		}
	}
	return false
}

// suggest says what to do about a field that changed n times in repeats
// repeats, and on what evidence.
func suggest(field string, n, repeats int64, s Sender) (string, string) {
	if why, ok := distinctByDocs[lastName(field)]; ok && s.UniqueKey == "" && rbsSender(s) {
		return "key", why
	}
	switch {
	case looksSignature(field):
		return "signature", ""
	case looksAmount(field):
		return "look", ""
	case s.UniqueKey != "":
		if looksVolatile(field) {
			return "ignore", ""
		}
		return "look", ""
	case looksVolatile(field) || (repeats >= 3 && n == repeats):
		return "ignore", ""
	}
	return "key", ""
}

// lookAt reports a field to look at: a changed amount, or any field under
// a key documented unique. Under such a key it is a note (enforce answers
// it 422, as it should); else a problem, since two notifications may
// share the key, but never with a key part made of the field.
func lookAt(r *SenderReport, a *tally, s Sender, fc FieldChange, signatures []string, problem, note func(Finding), link func(string) string) {
	kind := "a field"
	if looksAmount(fc.Field) {
		kind = "an amount"
	}
	from := ""
	if len(a.changedNet) > 0 {
		var nets []string
		for _, sh := range topShapes(a.changedNet, 5) {
			n := sh.Shape
			if a.good[n] == 0 {
				n += " (never sent a good delivery)"
			}
			nets = append(nets, n)
		}
		from = "; they came from " + strings.Join(nets, ", ")
	}
	sig := ""
	if len(signatures) > 0 {
		sig = " (and the signature " + strings.Join(signatures, ", ") + " with it)"
	}
	if s.UniqueKey != "" {
		note(Finding{What: fmt.Sprintf("`%s`, %s, changed %d times under %d known keys%s: %s, so this is no second notification%s",
			fc.Field, kind, fc.Times, fc.Keys, sig, s.UniqueKey, from),
			Fix:  "look at the conflicts: a changed payload under a known key is a possible tampering, refused with 422 once enforcing; nothing to change in the config",
			Link: link("/ui/conflicts")})
		return
	}
	problem(Finding{What: fmt.Sprintf("two payloads per key differ in `%s`, %s (%d times, %d keys)%s%s", fc.Field, kind, fc.Times, fc.Keys, sig, from),
		Fix: "look at the conflicts: if they are one notification changed on the way (possible tampering), enforcing refuses it with 422 as it should; if they are two notifications, add to the key a field that tells them apart (an operation or refund id, never " +
			kind + " nor a signature)",
		Link: link("/ui/conflicts")})
}
