package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/dedupe/readiness"
)

// Exit codes of hookonce readiness beyond the common ones
// (docs/operations.md): 0 means every sender is ready.
const (
	exitNoGo      = 4 // at least one sender is not ready (NoGo)
	exitNotEnough = 5 // none is not ready, and at least one has not seen enough traffic
)

func readinessCommand() *cli.Command {
	return &cli.Command{
		Name:  "readiness",
		Usage: "judge from the recorded traffic whether each sender can go live (exit 0: every sender is ready)",
		Flags: []cli.Flag{storeFlag(), jsonFlag(),
			&cli.StringFlag{Name: "config", EnvVars: []string{"HOOKONCE_CONFIG"}, Usage: "the config file serve runs with (sender rules; default: ./hookonce.yaml, else /etc/hookonce/hookonce.yaml)"},
			&cli.StringFlag{Name: "sender", EnvVars: []string{"HOOKONCE_SENDER"}, Usage: "only this sender"},
			&cli.StringFlag{Name: "since", EnvVars: []string{"HOOKONCE_SINCE"}, Usage: "count from TIME (a date 2006-01-02, a time 2006-01-02T15:04:05Z, or a DURATION ago such as 168h), under whatever rules; default: since each sender's rules last changed, at most 35 days"},
		},
		Action: runReadiness,
	}
}

func runReadiness(c *cli.Context) error {
	const usage = "usage: hookonce readiness [--config FILE] [--store DSN] [--sender S] [--since TIME] [--json]"
	// The config and the environment file with its secrets, found as the
	// other operator's commands find them (operatorConfig): as pasted on
	// an installed host, `hookonce readiness` alone reads both.
	path, err := requireConfig(c, usage)
	if err != nil {
		return err
	}
	ct, err := contract.Load(path)
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	o := readiness.Options{Sender: c.String("sender"), DistinctKeys: true}
	if v := c.String("since"); v != "" {
		t, err := readiness.ParseSince(v, time.Now())
		if err != nil {
			return cli.Exit("--since "+err.Error(), exitUsage)
		}
		o.Since = t
	}
	return withStore(c, readOnly, func(ctx context.Context, s dedupe.Store) error {
		rep, err := readiness.Build(ctx, s, ReadinessSenders(ct), o)
		if errors.Is(err, dedupe.ErrNoTraffic) {
			return cli.Exit("this store keeps no traffic counters: "+err.Error(), exitRuntime)
		}
		if err != nil {
			return cli.Exit(err.Error(), exitRuntime)
		}
		if o.Sender != "" && len(rep.Senders) == 0 {
			return cli.Exit(fmt.Sprintf("no sender %q in the config or the recorded traffic", o.Sender), exitNotFound)
		}
		if c.Bool("json") {
			if err := printJSON(c.App.Writer, rep); err != nil {
				return err
			}
		} else {
			readiness.WriteText(c.App.Writer, rep)
		}
		return readinessExit(rep)
	})
}

// readinessExit is the exit code of a report: nil (0) when every sender
// is ready, else a silent exit 4 or 5 (the report says why).
func readinessExit(rep readiness.Report) error {
	if rep.GoLive {
		return nil
	}
	code := exitNotEnough
	for _, s := range rep.Senders {
		if s.Verdict != readiness.GoLive && s.Verdict != readiness.NotEnough {
			code = exitNoGo
		}
	}
	return cli.Exit("", code)
}

// ReadinessSenders describes the contract's senders as the readiness
// report needs them.
func ReadinessSenders(ct *contract.Contract) []readiness.Sender {
	out := make([]readiness.Sender, 0, len(ct.Senders))
	for _, s := range ct.Senders {
		rs := readiness.Sender{Name: s.Name, Path: s.Path, Mode: string(s.Mode), Signed: s.HasSignature(),
			HashJSON: s.Hash == contract.HashJSON, StoreRequestBody: s.StoreRequestBody,
			Timeout: s.UpstreamTimeout, TimeoutFrom: "upstream_timeout",
			Success: successWords(s.Success), InProgressReject: s.InProgress == contract.InProgressReject,
			Rules: s.RulesTag()}
		if d, ok := documentedTimeout[s.Preset]; ok {
			rs.Timeout, rs.TimeoutFrom = d, s.Preset+"'s documented timeout"
		}
		for _, k := range s.Keys {
			rs.Keys = append(rs.Keys, string(k.Source)+":"+k.Name)
		}
		if u, ok := uniqueKeys[s.Preset]; ok && slices.Equal(rs.Keys, u.keys) {
			rs.UniqueKey = u.why
		}
		out = append(out, rs)
	}
	return out
}

// uniqueKeys are the presets whose key their provider documents as
// unique per notification (docs/senders.md cites each): under it a
// changed payload is no second notification, and the report never
// proposes a field for the key (it reports the conflict to look at). It
// holds only while the sender keeps the preset's key.
var uniqueKeys = map[string]struct {
	keys []string
	why  string
}{
	// Robokassa's Result URL documentation: one notification per paid
	// invoice; refunds and receipts are requests the shop makes.
	"robokassa": {[]string{"request:InvId"}, "Robokassa sends its Result URL notification once per paid invoice (InvId)"},
}

// documentedTimeout is how long a preset's provider waits for an answer,
// where its documentation says (docs/operations.md, "Going live", cites
// them); other senders are judged against their upstream_timeout.
var documentedTimeout = map[string]time.Duration{
	"github":  10 * time.Second, // docs.github.com, best practices for using webhooks (GitHub.com)
	"shopify": 5 * time.Second,  // shopify.dev, troubleshooting webhooks
}

// successWords says a success rule in words, for the report.
func successWords(s *contract.Success) string {
	if s == nil {
		return ""
	}
	var parts []string
	switch {
	case s.Body != nil:
		parts = append(parts, "the body "+s.Body.String())
	case s.BodyMatches != nil:
		parts = append(parts, "a body matching "+fmt.Sprintf("%q", s.BodyMatches.String()))
	case len(s.JSON) > 0:
		var ws []string
		for _, j := range s.JSON {
			ws = append(ws, fmt.Sprintf("%s=%v", j.Path, j.Value))
		}
		slices.Sort(ws)
		parts = append(parts, "JSON "+strings.Join(ws, ", "))
	}
	if len(parts) == 0 {
		return "a successful status"
	}
	return strings.Join(parts, " ")
}

// readinessEvery is how often serve recomputes hookonce_sender_ready.
var readinessEvery = time.Minute

// setReadinessSenders keeps the senders the report judges in step with
// the rules in force (at start and at each reload).
func (m *Main) setReadinessSenders(ct *contract.Contract) {
	s := ReadinessSenders(ct)
	m.readinessSenders.Store(&s)
}

// readinessReport builds the report over serve's store for the rules in
// force; distinct reads the records' aggregate too (the page does; the
// gauge, every minute, does not).
func (m *Main) readinessReport(ctx context.Context, distinct bool, since time.Time) (readiness.Report, error) {
	var senders []readiness.Sender
	if p := m.readinessSenders.Load(); p != nil {
		senders = *p
	}
	return readiness.Build(ctx, m.store, senders, readiness.Options{DistinctKeys: distinct, Since: since})
}
