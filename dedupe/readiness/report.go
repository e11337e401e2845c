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
//
// report.go gathers the evidence (Build: the counters, conflicts and
// records of each sender); verdict.go judges it (verdict).
package readiness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookonce/hookonce/dedupe"
)

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
	GoLive  bool           `json:"ready"` // every sender's verdict is GoLive
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
		verdict(&a.r, a, s, known, o.Thresholds, o.Now)
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
	rep.GoLive = len(rep.Senders) > 0
	for _, s := range rep.Senders {
		if s.Verdict != GoLive {
			rep.GoLive = false
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
	case "processed", "takeover", "accepted": // accepted: answered by hookonce (ack: durable), owed to the site
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
