// Package readiness answers the operator's question before going live:
// would turning deduplication on for this sender lose anything on my own
// traffic? It reads what a store kept of the deliveries (the traffic
// counters, dedupe.TrafficReader; the conflicts and their changed fields;
// the per-sender aggregate where the store keeps one) and gives each
// sender a verdict — ready, not enough traffic, or not ready — with the
// evidence and the change that fixes it.
//
// It imports only dedupe: the caller describes the senders (Sender) from
// its config, so the admin page, the command line and serve's gauge share
// one judgement without knowing the contract.
package readiness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

// Verdicts.
const (
	Ready         = "ready"
	NotEnough     = "not enough traffic"
	NotReady      = "not ready"
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

// Sender is what the config says of one sender, as the report needs it.
type Sender struct {
	Name string
	Path string // match.path
	Mode string // enforce or shadow
	// Signed: a signature (or another verification) is configured.
	Signed bool
	// HashJSON: the payload hash is canonical JSON, so ignore applies.
	HashJSON bool
	// Timeout is how long the sender waits for an answer: the provider's
	// documented timeout where known, else upstream_timeout; TimeoutFrom
	// says which.
	Timeout     time.Duration
	TimeoutFrom string
	// Success is the success rule in words ("" when the status decides).
	Success string
	// Keys are the key's parts in words (body:id, header:X-Event-Id).
	Keys []string
	// StoreRequestBody: the sender keeps request bodies, so a conflict
	// records which fields changed.
	StoreRequestBody bool
	// UniqueKey, when set, is the documented evidence that the sender's
	// key is unique per notification (a preset's, e.g. Robokassa's InvId):
	// a payload changed under it is no second notification but one to
	// look at (possible tampering), and no field is proposed for the key.
	UniqueKey string
	// Rules is the tag of the sender's rules in force (the contract's
	// RulesTag): by default the report counts only the deliveries counted
	// under it, so a fix starts the count afresh.
	Rules string
	// InProgressReject: the sender answers a repeat that comes while the
	// first delivery is at the site 409 (in_progress: reject); false is
	// the default, wait, which is never advised as a change.
	InProgressReject bool
}

// Options of Build.
type Options struct {
	// Now is the report's time; zero means time.Now().
	Now time.Time
	// Since starts the window (from its day: counters are per day);
	// zero means since each sender's rules last changed (the counters
	// carry the rules' tag), at most dedupe.TrafficKeep ago.
	Since time.Time
	// Sender limits the report to one sender ("" for all).
	Sender     string
	Thresholds Thresholds
	// DistinctKeys reads the store's per-sender aggregate (an aggregate
	// over the records of the window) for the number of distinct keys;
	// without it the count is estimated from the counters.
	DistinctKeys bool
	// MaxConflicts bounds the conflicts read per sender; 0 means 500.
	MaxConflicts int
}

// Report is the readiness of every sender.
type Report struct {
	Generated time.Time `json:"generated"`
	// Since is the window's start: the first day anything was counted.
	Since   time.Time      `json:"since"`
	Ready   bool           `json:"ready"` // every sender is ready
	Senders []SenderReport `json:"senders"`
	// Paths are the sender paths with deliveries that no sender took:
	// reported for their path, not held against the senders on it.
	Paths      []PathReport `json:"unmatched_paths"`
	Thresholds Thresholds   `json:"thresholds"`
}

// SenderReport is one sender's evidence and verdict.
type SenderReport struct {
	Sender    string    `json:"sender"`
	Path      string    `json:"path,omitempty"`
	Mode      string    `json:"mode,omitempty"`
	FirstSeen time.Time `json:"first_seen,omitzero"`
	LastSeen  time.Time `json:"last_seen,omitzero"`
	// Rules is the tag of the sender's rules in force; RulesSince the
	// first day a delivery was counted under them (zero: none yet). By
	// default the report counts from RulesSince: what came under earlier
	// rules (EarlierRules deliveries) is left out.
	Rules        string    `json:"rules,omitempty"`
	RulesSince   time.Time `json:"rules_since,omitzero"`
	EarlierRules int64     `json:"earlier_rules_deliveries,omitempty"`
	// Deliveries is every delivery this sender took.
	Deliveries int64 `json:"deliveries"`
	// Keyed: deliveries that had an event id and a valid signature.
	Keyed int64 `json:"keyed"`
	// DistinctKeys: events received in the window (from the records when
	// the store aggregates them, else the new events counted);
	// DistinctKeysExact says which.
	DistinctKeys      int64 `json:"distinct_keys"`
	DistinctKeysExact bool  `json:"distinct_keys_exact"`
	// ExactRepeats: repeats of a done event with the same payload, answered
	// (or, in shadow mode, that would be answered) from the stored answer;
	// Replayed of them were answered so (enforce mode).
	ExactRepeats int64 `json:"exact_repeats"`
	Replayed     int64 `json:"replayed"`
	// RepeatsWhileBusy: repeats that came while the first delivery was at
	// the site (they wait, or get 409).
	RepeatsWhileBusy int64 `json:"repeats_while_busy"`
	// Changed: payloads that changed under a known key (would be 422).
	Changed       int64         `json:"changed_payloads"`
	ChangedFields []FieldChange `json:"changed_fields,omitempty"`
	// ChangedRead: conflicts read for ChangedFields (at most
	// Options.MaxConflicts); ChangedUnrecorded of them named no field.
	ChangedRead       int64   `json:"changed_read"`
	ChangedUnrecorded int64   `json:"changed_unrecorded"`
	MissingKey        int64   `json:"missing_key"`
	MissingKeyShapes  []Shape `json:"missing_key_shapes,omitempty"`
	Passthrough       int64   `json:"passthrough"`
	SignatureFailures int64   `json:"signature_failures"`
	// SignatureFailuresFrom: the bad signatures by source network (an
	// IPv4 /24, an IPv6 /48; "(other shapes)" past the counters' bound);
	// RefusedStrangers of them came from networks that sent this sender
	// no good delivery.
	SignatureFailuresFrom []Shape `json:"signature_failures_from,omitempty"`
	// ChangedFrom: the changed payloads by source network.
	ChangedFrom      []Shape `json:"changed_from,omitempty"`
	RefusedStrangers int64   `json:"refused_strangers"`
	// Unsigned: deliveries taken without any signature configured.
	Unsigned int64 `json:"unsigned"`
	// Answers counts the site's answers to the deliveries forwarded with a
	// claim, by status.
	Answers map[string]int64 `json:"answers"`
	// NotSuccess: final answers that failed the success rule, by status.
	NotSuccess         int64            `json:"not_success"`
	NotSuccessByStatus map[string]int64 `json:"not_success_by_status,omitempty"`
	Success            string           `json:"success_rule,omitempty"`
	SiteFailed         int64            `json:"site_failed"` // 5xx, 408, 425, 429, unreachable: freed for the retry
	Ambiguous          int64            `json:"ambiguous"`
	TooLarge           int64            `json:"too_large"`
	Unreadable         int64            `json:"unreadable"`
	StoreErrors        int64            `json:"store_errors"`
	ObjectBusy         int64            `json:"object_busy"`
	// SlowestMillis is the slowest answer of the site, against the time
	// the sender waits (TimeoutMillis, from TimeoutFrom).
	SlowestMillis int64  `json:"slowest_ms"`
	TimeoutMillis int64  `json:"timeout_ms,omitempty"`
	TimeoutFrom   string `json:"timeout_from,omitempty"`

	Verdict string `json:"verdict"`
	// Reason is the verdict in one sentence.
	Reason string `json:"reason"`
	// Problems hold the verdict back: each with its evidence and fix.
	Problems []Finding `json:"problems,omitempty"`
	// Notes are worth knowing and change nothing in the verdict.
	Notes []Finding `json:"notes,omitempty"`
}

// FieldChange is one field that changed under a known key.
type FieldChange struct {
	Field string `json:"field"`
	// Times: the conflicts it changed in; Keys: the distinct keys.
	Times int64 `json:"times"`
	Keys  int64 `json:"keys"`
	// Suggest is "ignore" (it changes from one send of a notification
	// to the next), "key" (it tells two notifications apart), "look" (an
	// amount, or any field under a key documented unique: a conflict to
	// look at, possible tampering, never a key part) or "signature" (the
	// signature, which changes with what it signs: nothing to change).
	Suggest string `json:"suggest"`
	// Why says what the suggestion rests on, where a provider's
	// documentation does ("" otherwise).
	Why string `json:"why,omitempty"`
	// Example is the key of the newest conflict it changed in.
	Example string `json:"example_key"`
}

// Shape is what some deliveries looked like: method and field names,
// never values.
type Shape struct {
	Shape string `json:"shape"`
	N     int64  `json:"n"`
}

// Finding is one thing the report found, and what to do about it.
type Finding struct {
	What string `json:"what"`
	Fix  string `json:"fix,omitempty"`
	// Link is the admin page that shows the evidence ("" when none).
	Link string `json:"link,omitempty"`
}

// PathReport is one sender path's deliveries that no sender took.
type PathReport struct {
	Path       string   `json:"path"`
	Deliveries int64    `json:"deliveries"`
	Refused    int64    `json:"refused"` // answered by hookonce (403/405), not forwarded
	Shapes     []Shape  `json:"shapes"`
	Senders    []string `json:"senders,omitempty"` // the senders configured on it
	Finding    Finding  `json:"finding"`
}

// ErrNoCounters: the store keeps no traffic counters.
var ErrNoCounters = dedupe.ErrNoTraffic

// Build reads the store and judges every sender of senders (and every
// sender the counters name that the config no longer has).
func Build(ctx context.Context, store dedupe.Reader, senders []Sender, o Options) (Report, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.Thresholds == (Thresholds{}) {
		o.Thresholds = DefaultThresholds
	}
	if o.MaxConflicts <= 0 {
		o.MaxConflicts = 500
	}
	tr, ok := store.(dedupe.TrafficReader)
	if !ok {
		return Report{}, fmt.Errorf("readiness: %w", dedupe.ErrNoTraffic)
	}
	// The store sums the counters over their days (one row per counter,
	// and at most dedupe.MaxTrafficShapes shapes per group): the report
	// never holds a row per counter and day.
	counts, err := tr.TrafficTotals(ctx, o.Since)
	if err != nil {
		return Report{}, fmt.Errorf("readiness: %w", err)
	}
	rep := Report{Generated: o.Now.UTC(), Since: o.Since, Thresholds: o.Thresholds}

	cfg := map[string]Sender{}
	onPath := map[string][]string{}
	for _, s := range senders {
		cfg[s.Name] = s
		onPath[s.Path] = append(onPath[s.Path], s.Name)
	}
	tallies := map[string]*tally{}
	get := func(name string) *tally {
		a := tallies[name]
		if a == nil {
			a = &tally{r: SenderReport{Sender: name, Answers: map[string]int64{}}, shapes: map[string]int64{}, notOK: map[string]int64{},
				good: map[string]int64{}, bad: map[string]int64{}, changedNet: map[string]int64{}}
			tallies[name] = a
		}
		return a
	}
	for _, s := range senders {
		get(s.Name).r.Rules = s.Rules
	}
	// By default each sender is counted under its rules in force: where
	// its counters carry rules tags (every hookonce since they do), only
	// those of the current tag. A counter past the bound of details
	// (dedupe.TrafficOtherDetail) carries none and is counted, as it may
	// be of the current rules.
	tagged := map[string]bool{}
	for _, c := range counts {
		if rules, _, _ := dedupe.ParseTrafficDetail(c.Detail); rules != "" && c.Sender != "" {
			tagged[c.Sender] = true
		}
	}
	paths := map[string]*PathReport{}
	pathShapes := map[string]map[string]int64{}
	for _, c := range counts {
		if c.Sender != "" {
			rules, _, _ := dedupe.ParseTrafficDetail(c.Detail)
			if s, ok := cfg[c.Sender]; ok && o.Since.IsZero() && tagged[c.Sender] && s.Rules != "" {
				switch {
				case rules == s.Rules:
					if t := get(c.Sender); t.r.RulesSince.IsZero() || c.First.Before(t.r.RulesSince) {
						t.r.RulesSince = c.First
					}
				case c.Detail != dedupe.TrafficOtherDetail:
					get(c.Sender).r.EarlierRules += c.N
					continue
				}
			}
		}
		if o.Since.IsZero() && (rep.Since.IsZero() || c.First.Before(rep.Since)) {
			rep.Since = c.First
		}
		if c.Sender == "" {
			p := paths[c.Path]
			if p == nil {
				p = &PathReport{Path: c.Path}
				paths[c.Path] = p
				pathShapes[c.Path] = map[string]int64{}
			}
			p.Deliveries += c.N
			if c.Status != 0 {
				p.Refused += c.N
			}
			if c.Detail != "" {
				pathShapes[c.Path][c.Detail] += c.N
			}
			continue
		}
		get(c.Sender).add(c)
	}

	var sums map[string]dedupe.SenderSummary
	if o.DistinctKeys {
		if sz, ok := store.(dedupe.Summarizer); ok {
			if list, err := sz.Summary(ctx, rep.Since); err == nil {
				sums = map[string]dedupe.SenderSummary{}
				for _, s := range list {
					sums[s.Sender] = s
				}
			} else if !errors.Is(err, dedupe.ErrNoSummary) {
				return Report{}, fmt.Errorf("readiness: %w", err)
			}
		}
	}

	for _, name := range slices.Sorted(maps.Keys(tallies)) {
		if o.Sender != "" && name != o.Sender {
			continue
		}
		a := tallies[name]
		s, known := cfg[name]
		a.r.Path, a.r.Mode = s.Path, s.Mode
		if a.r.Changed > 0 {
			if err := a.readConflicts(ctx, store, name, a.r.FirstSeen, o.MaxConflicts); err != nil {
				return Report{}, fmt.Errorf("readiness: %w", err)
			}
		}
		if sum, ok := sums[name]; ok {
			a.r.DistinctKeys, a.r.DistinctKeysExact = sum.Records, true
		}
		judge(&a.r, a, s, known, o.Thresholds, o.Now)
		rep.Senders = append(rep.Senders, a.r)
	}
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		p := paths[path]
		p.Shapes = topShapes(pathShapes[path], 5)
		p.Senders = onPath[path]
		what := fmt.Sprintf("%d deliveries on %s matched no sender", p.Deliveries, path)
		if p.Refused > 0 {
			what += fmt.Sprintf(" (%d of them refused, not forwarded)", p.Refused)
		}
		if len(p.Shapes) > 0 {
			what += "; they looked like: " + p.Shapes[0].Shape
		}
		p.Finding = Finding{What: what, Fix: "add a sender for them (its match.when telling them apart from " +
			orNone(p.Senders) + "), or leave them to the path's unmatched rule if they are not webhooks"}
		if o.Sender == "" || slices.Contains(p.Senders, o.Sender) {
			rep.Paths = append(rep.Paths, *p)
		}
	}
	rep.Ready = len(rep.Senders) > 0
	for _, s := range rep.Senders {
		if s.Verdict != Ready {
			rep.Ready = false
		}
	}
	return rep, nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "the senders there"
	}
	return strings.Join(names, ", ")
}

// tally gathers one sender's counters.
type tally struct {
	r           SenderReport
	shapes      map[string]int64
	good, bad   map[string]int64 // good deliveries and bad signatures by source network
	changedNet  map[string]int64 // changed payloads by source network
	notOK       map[string]int64
	changedKeys map[string]map[string]bool
	changedIn   map[string]int64
	example     map[string]string
}

func (a *tally) add(c dedupe.TrafficTotal) {
	r := &a.r
	if r.FirstSeen.IsZero() || c.First.Before(r.FirstSeen) {
		r.FirstSeen = c.First
	}
	if c.Last.After(r.LastSeen) {
		r.LastSeen = c.Last
	}
	r.Deliveries += c.N
	_, from, shape := dedupe.ParseTrafficDetail(c.Detail)
	if c.Detail == dedupe.TrafficOtherDetail {
		from, shape = c.Detail, c.Detail
	}
	would := strings.HasPrefix(c.Outcome, "would_")
	st := strconv.Itoa(c.Status)
	switch strings.TrimPrefix(c.Outcome, "would_") {
	case "processed", "takeover":
		if from != "" {
			a.good[from] += c.N
		}
		r.Keyed += c.N
		r.DistinctKeys += c.N
		r.Answers[st] += c.N
		r.SlowestMillis = max(r.SlowestMillis, c.MaxMillis)
	case "not_success":
		r.Keyed += c.N
		r.Answers[st] += c.N
		r.NotSuccess += c.N
		a.notOK[st] += c.N
		r.SlowestMillis = max(r.SlowestMillis, c.MaxMillis)
	case "released":
		r.Keyed += c.N
		r.SiteFailed += c.N
		if c.Status != 0 {
			r.Answers[st] += c.N
		}
		r.SlowestMillis = max(r.SlowestMillis, c.MaxMillis)
	case "ambiguous":
		r.Keyed += c.N
		r.Ambiguous += c.N
		r.SlowestMillis = max(r.SlowestMillis, c.MaxMillis)
	case "duplicate":
		if from != "" {
			a.good[from] += c.N
		}
		r.Keyed += c.N
		r.ExactRepeats += c.N
		if !would {
			r.Replayed += c.N
		}
	case "in_progress":
		r.Keyed += c.N
		r.RepeatsWhileBusy += c.N
	case "conflict":
		r.Keyed += c.N
		r.Changed += c.N
		if from != "" {
			a.changedNet[from] += c.N
		}
	case "rejected_signature":
		r.SignatureFailures += c.N
		if from == "" {
			from = unknownNetwork
		}
		a.bad[from] += c.N
	case "missing_key":
		r.MissingKey += c.N
		if shape != "" {
			a.shapes[shape] += c.N
		}
	case "passthrough":
		r.Passthrough += c.N
	case "too_large":
		r.TooLarge += c.N
	case "bad_request":
		r.Unreadable += c.N
	case "store_error":
		r.StoreErrors += c.N
	case "object_busy":
		r.Keyed += c.N
		r.ObjectBusy += c.N
	}
}

// readConflicts reads the sender's conflicts since from (the refused
// ones) and counts the fields they changed.
func (a *tally) readConflicts(ctx context.Context, store dedupe.Reader, sender string, from time.Time, limit int) error {
	cs, err := store.Conflicts(ctx, dedupe.ListFilter{Sender: sender, Limit: limit})
	if err != nil {
		return err
	}
	a.changedKeys, a.changedIn, a.example = map[string]map[string]bool{}, map[string]int64{}, map[string]string{}
	for _, c := range cs {
		if c.ReceivedAt.Before(from) || c.AnsweredDuplicate {
			// A payload answered as a duplicate (changed_payload:
			// duplicate) was not refused: not one of the 422s judged here.
			continue
		}
		a.r.ChangedRead++
		if len(c.ChangedPaths) == 0 {
			a.r.ChangedUnrecorded++
			continue
		}
		for _, p := range c.ChangedPaths {
			a.changedIn[p]++
			if _, ok := a.example[p]; !ok {
				a.example[p] = c.Key
			}
			if a.changedKeys[p] == nil {
				a.changedKeys[p] = map[string]bool{}
			}
			a.changedKeys[p][c.Key] = true
		}
	}
	return nil
}

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

// judge turns a sender's evidence into its verdict.
func judge(r *SenderReport, a *tally, s Sender, known bool, th Thresholds, now time.Time) {
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
		judgeSignatures(r, a, problem, note)
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
		r.Verdict = NotReady
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
		r.Verdict = Ready
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

func topShapes(m map[string]int64, n int) []Shape {
	out := make([]Shape, 0, len(m))
	for s, c := range m {
		out = append(out, Shape{Shape: s, N: c})
	}
	slices.SortFunc(out, func(a, b Shape) int {
		// The deliveries past the store's bound of shapes go last: they
		// are many shapes, none of which says what the requests were.
		if ao, bo := a.Shape == dedupe.TrafficOtherDetail, b.Shape == dedupe.TrafficOtherDetail; ao != bo {
			if ao {
				return 1
			}
			return -1
		}
		if a.N != b.N {
			return int(b.N - a.N)
		}
		return strings.Compare(a.Shape, b.Shape)
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// judgeSignatures tells a wrong secret from strangers: bad signatures
// from a network that also sent good deliveries, or with no good
// delivery at all, are the sender's own (check the secret); those from
// networks that never sent a good one are strangers, refused as they
// should be, and hold nothing back.
func judgeSignatures(r *SenderReport, a *tally, problem, note func(Finding)) {
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

// ParseSince reads the start of a window (--since, ?since=): a date (UTC), an RFC
// 3339 time, or a positive duration before now.
func ParseSince(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("%s: want a positive duration such as 168h", v)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q: want a date (2006-01-02), a time (2006-01-02T15:04:05Z) or a duration ago (168h)", v)
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
