// Package probe runs the design's acceptance protocol against a live
// deployment: a new event, its exact repeat, the same id with another body,
// and parallel deliveries of one new id, sent to a sandbox sender through
// the real front door. With admin access it also counts the store's records
// before and after each phase, and releases its test events afterwards.
//
// It judges hookonce only by what a sender and an operator can observe
// (answers, replay markers, the admin API); it never talks to the store or
// the site directly, so it works the same against any backend and any
// deployment. It must never be pointed at a production sender: its events
// reach the site once each.
package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// ReplayHeader is the marker hookonce puts on every replayed answer.
const ReplayHeader = "Idempotent-Replayed"

// Defaults for the optional fields of Config.
const (
	DefaultParallel = 10
	DefaultPrefix   = "hookonce-probe"
	DefaultKeyField = "id"
	DefaultTimeout  = 30 * time.Second
	adminListLimit  = 1000
)

// Config says where the sandbox sender lives and how to sign for it.
type Config struct {
	// Target is the URL senders reach (hookonce's listener, or the site's
	// front door when hookonce sits behind nginx). Path, when set, replaces
	// Target's path.
	Target string
	Path   string
	Sender string // the sender's name in hookonce.yaml (admin API lookups)

	// Where the event id travels: KeyHeader set sends it in that header;
	// otherwise it is the JSON body field KeyField (dotted for nesting,
	// default "id"). Scheme presets fill KeyHeader / KeyField when both are
	// empty (github: X-GitHub-Delivery, standard-webhooks: webhook-id, …).
	KeyHeader string
	KeyField  string

	// Scheme is the sender's preset (or bare scheme): the probe sends and
	// signs each delivery as that sender does, with Secret. Empty sends
	// unsigned JSON. Presets the probe cannot stand in for are refused by
	// name (see Validate).
	Secret string
	Scheme string

	// Admin is the admin listener's base URL ("" skips the record counts
	// and leaves the probe's events in the store until their ttl).
	Admin      string
	AdminToken string

	// ChangedPayload is what the sender's changed_payload makes of the same
	// id with another body: "conflict" (a 4xx, the default) or "duplicate"
	// (the first's answer replayed; the shopify scheme's default, as its
	// preset's) or "new_event" (the other body is an event of its own, run
	// once; the cdek scheme's default, as its preset's).
	ChangedPayload string

	Parallel int           // parallel deliveries of one new id; 0 means DefaultParallel
	Prefix   string        // test event key prefix; "" means DefaultPrefix
	Timeout  time.Duration // per request; 0 means DefaultTimeout
	Client   *http.Client  // nil means a fresh client with Timeout
	Now      func() time.Time
}

// Row is one line of the result table.
type Row struct {
	Check    string
	Expected string
	Observed string
	Pass     bool
}

// Result is the whole table plus what the probe left behind.
type Result struct {
	Rows     []Row
	Keys     []string // the test event keys it sent
	Released bool     // whether Keys were deleted through the admin API
}

// Passed reports whether every row passed.
func (r *Result) Passed() bool {
	for _, row := range r.Rows {
		if !row.Pass {
			return false
		}
	}
	return len(r.Rows) > 0
}

// Print writes the table: check, expected, observed, PASS/FAIL.
func (r *Result) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tEXPECTED\tOBSERVED\tRESULT")
	failed := 0
	for _, row := range r.Rows {
		verdict := "PASS"
		if !row.Pass {
			verdict = "FAIL"
			failed++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", row.Check, row.Expected, row.Observed, verdict)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%d checks, %d failed\n", len(r.Rows), failed)
}

// reply is one answer as the sender saw it.
type reply struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func (r reply) replayed() bool { return r.header.Get(ReplayHeader) == "true" }

func (r reply) String() string {
	if r.err != nil {
		return "error: " + shortErr(r.err)
	}
	s := fmt.Sprint(r.status)
	if r.replayed() {
		s += " replayed"
	}
	return s
}

// retryable answers are the ones hookonce does not store (the sender retries).
func retryable(status int) bool {
	return status >= 500 || status == 408 || status == 425 || status == 429
}

type runner struct {
	cfg    Config
	shape  shape
	url    string
	client *http.Client
	run    string
	res    *Result
	// ids of the run's two events, and the keys hookonce stores them under.
	newID, parID   string
	newKey, parKey string
}

// Validate reports a usage problem in cfg, or nil.
func (c *Config) Validate() error {
	var probs []string
	u, err := url.Parse(c.Target)
	if c.Target == "" {
		probs = append(probs, "--target is required")
	} else if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		probs = append(probs, fmt.Sprintf("--target %q: want an http:// or https:// URL", c.Target))
	}
	if c.Sender == "" {
		probs = append(probs, "--sender is required")
	}
	if c.Admin != "" {
		if u, err := url.Parse(c.Admin); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			probs = append(probs, fmt.Sprintf("--admin %q: want an http:// or https:// URL", c.Admin))
		}
	}
	if c.Parallel < 0 || c.Parallel == 1 || c.Parallel > 200 {
		probs = append(probs, fmt.Sprintf("--parallel %d: want 2..200", c.Parallel))
	}
	if why, ok := refused[c.Scheme]; ok {
		probs = append(probs, fmt.Sprintf("--scheme %s: the probe cannot test this sender: %s", c.Scheme, why))
	} else if sh, ok := shapes[c.Scheme]; !ok || (c.Secret != "" && c.Scheme == "") {
		probs = append(probs, fmt.Sprintf("--scheme %q: want one of %s (the sender's preset)", c.Scheme, schemeList()))
	} else {
		if c.Scheme != "" && c.Secret == "" {
			probs = append(probs, fmt.Sprintf("--scheme %s needs --secret: the sender's secret, to sign as %s does", c.Scheme, c.Scheme))
		}
		if sh.ownKey && (c.KeyHeader != "" || c.KeyField != "") {
			probs = append(probs, fmt.Sprintf("--key-header and --key-field do not apply to %s: the preset fixes where its event id goes", c.Scheme))
		}
	}
	if len(probs) > 0 {
		return errors.New(strings.Join(probs, "; "))
	}
	return nil
}

// Run executes the protocol. It returns an error only when the probe could
// not run at all (bad config); every observation, failed or not, is a Row.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Parallel == 0 {
		cfg.Parallel = DefaultParallel
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.KeyHeader == "" && cfg.KeyField == "" {
		cfg.KeyHeader, cfg.KeyField = schemeKey(cfg.Scheme)
	}
	if cfg.ChangedPayload == "" {
		cfg.ChangedPayload = shapes[cfg.Scheme].changedPayload
	}
	if cfg.ChangedPayload == "" {
		cfg.ChangedPayload = "conflict"
		if cfg.Scheme == "shopify" {
			cfg.ChangedPayload = "duplicate"
		}
	}
	if cfg.KeyHeader == "" && cfg.KeyField == "" {
		cfg.KeyField = DefaultKeyField
	}
	r := &runner{cfg: cfg, shape: shapes[cfg.Scheme], client: cfg.Client, res: &Result{}}
	if r.client == nil {
		r.client = &http.Client{Timeout: cfg.Timeout}
	}
	u, _ := url.Parse(cfg.Target)
	if cfg.Path != "" {
		u.Path = "/" + strings.TrimPrefix(cfg.Path, "/")
		u.RawPath = ""
	}
	r.url = u.String()
	now := cfg.Now().UTC()
	r.run = fmt.Sprintf("%s-%s-%09d", cfg.Prefix, now.Format("20060102T150405"), now.Nanosecond())
	r.newID, r.parID = r.run+"-new", r.run+"-parallel"
	if r.shape.numericID { // unique per run: the run's microsecond, and the next one
		r.newID, r.parID = fmt.Sprint(now.UnixMicro()), fmt.Sprint(now.UnixMicro()+1)
	}
	r.newKey, r.parKey = r.shape.recordKey(r.newID), r.shape.recordKey(r.parID)
	r.protocol(ctx)
	return r.res, nil
}

func (r *runner) add(check, expected, observed string, pass bool) {
	r.res.Rows = append(r.res.Rows, Row{Check: check, Expected: expected, Observed: observed, Pass: pass})
}

func (r *runner) protocol(ctx context.Context) {
	admin := r.cfg.Admin != ""
	var count counts
	if admin {
		var err error
		count, err = r.counts(ctx)
		r.add("admin API reachable", "records listed for sender "+r.cfg.Sender, observedErr(err, fmt.Sprintf("%d probe records", count.records)), err == nil)
		if err != nil {
			admin = false
		}
	}
	phase := func(name string, wantRecords, wantConflicts int) {
		if !admin {
			return
		}
		got, err := r.counts(ctx)
		if err != nil {
			r.add(name+": records", "", "admin API: "+shortErr(err), false)
			return
		}
		dr, dc := got.records-count.records, got.conflicts-count.conflicts
		r.add(name+": records (admin)", fmt.Sprintf("%+d record, %+d conflict", wantRecords, wantConflicts),
			fmt.Sprintf("%+d record, %+d conflict", dr, dc), dr == wantRecords && dc == wantConflicts)
		count = got
	}

	// 1. A new event reaches the site once and its answer is stored. A
	// refusal (401, 403, 404, any 4xx or 5xx) is the deployment or the
	// site saying no: the protocol wanted the site's answer, so it fails.
	newEvent := r.delivery(r.newID, 1)
	first := r.send(ctx, r.newKey, newEvent)
	r.add("new event", "the site's answer (2xx or 3xx), not replayed", first.String(),
		first.err == nil && first.status >= 200 && first.status < 400 && !first.replayed())
	if r.shape.success != nil && first.err == nil {
		ok, obs := r.shape.success(&r.cfg, r.newID, first.status, first.body)
		r.add("new event: success answer", r.shape.answer+" ("+r.cfg.Scheme+"'s success answer)", obs, ok)
	}
	phase("new event", 1, 0)
	if admin {
		r.checkStored(ctx, r.newKey, first)
	}

	// 2. The exact repeat is answered from the store, byte for byte (or,
	// for a preset that answers repeats with an empty 200, so).
	again := r.send(ctx, r.newKey, newEvent)
	if r.shape.emptyRepeat {
		r.add("exact repeat", fmt.Sprintf("200, empty body, %s: true", ReplayHeader), again.String()+", "+describeBody(again.body),
			again.err == nil && again.status == http.StatusOK && len(again.body) == 0 && again.replayed())
	} else {
		same := again.err == nil && again.status == first.status && bytes.Equal(again.body, first.body)
		obs := again.String()
		if again.err == nil && !same {
			obs += fmt.Sprintf(", body %s", sameOrDiffers(again.body, first.body))
		}
		r.add("exact repeat", fmt.Sprintf("%d, same body, %s: true", first.status, ReplayHeader), obs, same && again.replayed())
	}
	phase("exact repeat", 0, 0)

	// 3. The same id with another body is refused as a conflict, or, for
	// a sender whose changed_payload is duplicate, answered as the first.
	changed := r.send(ctx, r.newKey, r.delivery(r.newID, 2))
	if r.cfg.ChangedPayload == "duplicate" {
		r.add("same id, other body", fmt.Sprintf("%d, the first's body, replayed (changed_payload: duplicate)", first.status), changed.String(),
			changed.err == nil && changed.status == first.status && changed.replayed() && bytes.Equal(changed.body, first.body))
		// Answered as the first, and recorded as a conflict answered as a
		// duplicate, so the changed payload leaves a trace an operator can
		// accept (docs/operations.md, "Conflicts").
		phase("same id, other body", 0, 1)
	} else if r.cfg.ChangedPayload == "new_event" {
		r.add("same id, other body", "the site's answer (2xx or 3xx), not replayed (changed_payload: new_event)", changed.String(),
			changed.err == nil && changed.status >= 200 && changed.status < 400 && !changed.replayed())
		phase("same id, other body", 1, 0)
		for _, k := range count.changed { // released with the others
			r.res.Keys = appendUnique(r.res.Keys, k)
		}
	} else {
		r.add("same id, other body", "4xx conflict, not replayed", changed.String(),
			changed.err == nil && changed.status >= 400 && changed.status < 500 &&
				changed.status != http.StatusUnauthorized && changed.status != http.StatusForbidden &&
				!changed.replayed() && !bytes.Equal(changed.body, first.body))
		phase("same id, other body", 0, 1)
	}

	// 4. N parallel deliveries of one new id: one execution, one answer.
	r.parallel(ctx)
	phase(fmt.Sprintf("%d parallel deliveries", r.cfg.Parallel), 1, 0)

	if admin {
		r.release(ctx)
	}
}

// parallel fires Parallel copies of one delivery at once.
func (r *runner) parallel(ctx context.Context) {
	n := r.cfg.Parallel
	r.res.Keys = appendUnique(r.res.Keys, r.parKey)
	req := r.delivery(r.parID, 1) // one signature for every copy, as a retrying sender would send
	replies := make([]reply, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range replies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replies[i] = r.do(ctx, req)
		}()
	}
	close(start)
	wg.Wait()

	fresh, inProgress, errs := 0, 0, 0
	var ref *reply
	identical := true
	for i := range replies {
		rp := &replies[i]
		switch {
		case rp.err != nil:
			errs++
			continue
		case rp.status == http.StatusConflict && rp.header.Get("Retry-After") != "" && !rp.replayed():
			// in_progress: reject (or a wait that timed out): the sender retries later.
			inProgress++
			continue
		case !rp.replayed():
			fresh++
			if r.shape.emptyRepeat { // repeats are empty 200s; the site's answer is the fresh one
				if retryable(rp.status) {
					identical = false
				}
				continue
			}
		}
		if ref == nil {
			ref = rp
		} else if rp.status != ref.status || !bytes.Equal(rp.body, ref.body) {
			identical = false
		}
	}
	obs := fmt.Sprintf("%d of %d", fresh, n)
	if inProgress > 0 {
		obs += fmt.Sprintf(" (%d answered 409 in progress)", inProgress)
	}
	if errs > 0 {
		obs += fmt.Sprintf(" (%d transport errors)", errs)
	}
	r.add(fmt.Sprintf("%d parallel, one id", n), "exactly 1 answer not replayed", obs, fresh == 1 && errs == 0)
	idObs := "all identical"
	if ref == nil {
		idObs = "no answers"
	} else if !identical {
		idObs = "answers differ"
	} else if retryable(ref.status) {
		idObs = fmt.Sprintf("all %d (retryable)", ref.status)
	} else if ref.status >= 400 {
		idObs = fmt.Sprintf("all %d (refused)", ref.status)
	} else {
		idObs = fmt.Sprintf("all %d, same body", ref.status)
	}
	r.add(fmt.Sprintf("%d parallel, answers", n), "identical status and body", idObs,
		ref != nil && identical && ref.status >= 200 && ref.status < 400 && errs == 0)
}

func sameOrDiffers(a, b []byte) string {
	if bytes.Equal(a, b) {
		return "same"
	}
	return "differs"
}

func observedErr(err error, ok string) string {
	if err != nil {
		return shortErr(err)
	}
	return ok
}

// shortErr keeps an error one line and short for the table.
func shortErr(err error) string {
	s := strings.ReplaceAll(err.Error(), "\n", " ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func setPath(doc map[string]any, path []string, v string) {
	for _, p := range path[:len(path)-1] {
		next, ok := doc[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			doc[p] = next
		}
		doc = next
	}
	doc[path[len(path)-1]] = v
}

// delivery renders event id in variant v as the sender would send it.
func (r *runner) delivery(id string, v int) delivery {
	d := r.shape.build(&r.cfg, id, v, r.cfg.Now())
	d.header.Set("User-Agent", "hookonce-probe")
	return d
}

// send delivers d, noting key (the stored key) as one the probe created.
func (r *runner) send(ctx context.Context, key string, d delivery) reply {
	r.res.Keys = appendUnique(r.res.Keys, key)
	return r.do(ctx, d)
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

func (r *runner) do(ctx context.Context, d delivery) reply {
	target := r.url
	if len(d.query) > 0 {
		u, _ := url.Parse(r.url)
		q := u.Query()
		for k, vs := range d.query {
			if !q.Has(k) {
				q[k] = vs
			}
		}
		u.RawQuery = q.Encode()
		target = u.String()
	}
	req, err := http.NewRequestWithContext(ctx, d.method, target, bytes.NewReader(d.body))
	if err != nil {
		return reply{err: err}
	}
	req.Header = d.header.Clone()
	req.GetBody = nil // never let the transport resend a delivery on its own
	resp, err := r.client.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return reply{err: err}
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}
