package cli

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe/readiness"
	"github.com/hookonce/hookonce/notify"
	"github.com/hookonce/hookonce/proxy"
)

// The operator's notices: the config's notify: block turned into the
// notify package's channels, serve's decisions turned into its events
// (the proxy's notices, the readiness verdicts, refused reloads), and
// `hookonce notify test`.

// notifyClient sends the Telegram and webhook requests: bounded, and
// never following a redirect to somewhere the config does not name.
var notifyClient = &http.Client{
	Timeout: 30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
}

// notifyChannels builds the channels of a notify: block (none for nil).
func notifyChannels(n *contract.Notify) ([]notify.Channel, error) {
	if n == nil {
		return nil, nil
	}
	var chans []notify.Channel
	if t := n.Telegram; t != nil {
		chans = append(chans, &notify.Telegram{APIURL: t.APIURL, Token: t.Token(), ChatID: t.ChatID, Client: notifyClient})
	}
	if e := n.Email; e != nil {
		em := &notify.Email{Addr: e.Addr, From: e.From, To: e.To, Username: e.Username, Password: e.Password(), PlainText: e.PlainText}
		if e.CAFile != "" {
			pem, err := os.ReadFile(e.CAFile)
			if err != nil {
				return nil, fmt.Errorf("notify.email.ca_file: %w", err)
			}
			em.RootCAs = x509.NewCertPool()
			if !em.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("notify.email.ca_file %s: no PEM certificate in it", e.CAFile)
			}
		}
		if h, err := os.Hostname(); err == nil && h != "" {
			em.HelloName = h
		}
		chans = append(chans, em)
	}
	if w := n.Webhook; w != nil {
		chans = append(chans, &notify.Webhook{URL: w.URL, Secret: w.Secret(), Client: notifyClient})
	}
	return chans, nil
}

// startNotify builds serve's Notifier from the config in force; with no
// notify: block it has no channel (a reload may add one).
func (m *Main) startNotify(reg prometheus.Registerer) error {
	n := m.Config.contract.Notify
	chans, err := notifyChannels(n)
	if err != nil {
		return err
	}
	o := notify.Options{Channels: chans, Registerer: reg, Logger: m.log.With("component", "notify"), Backoff: m.notifyBackoff}
	if n != nil {
		o.DigestWait, o.Interval, o.Queue = n.DigestWait, n.Interval, n.Queue
		o.RefusalCount, o.RefusalWithin = n.RefusalCount, n.RefusalWithin
	}
	m.notifier = notify.New(o)
	m.readyWas = map[string]bool{}
	return nil
}

// reloadNotify swaps in a reloaded config's channels (and their secrets
// as they are now); a channel that cannot be built keeps the old ones.
func (m *Main) reloadNotify(ct *contract.Contract) {
	chans, err := notifyChannels(ct.Notify)
	if err != nil {
		m.log.Error("notify channels not reloaded; the previous ones stay", "err", err)
		return
	}
	m.notifier.SetChannels(chans)
}

// proxyNotice maps the proxy's notices to the notify package's events.
func (m *Main) proxyNotice(p proxy.Notice) {
	e := notify.Event{Sender: p.Sender, Key: p.Key, Detail: p.Detail}
	switch p.What {
	case proxy.OutcomeRejectedSignature:
		e.Kind, e.Reason = notify.Refused, notify.ReasonSignature
	case proxy.OutcomeConflict:
		e.Kind, e.Reason = notify.Refused, notify.ReasonConflict
	case proxy.OutcomeMissingKey:
		e.Kind, e.Reason = notify.Refused, notify.ReasonMissingKey
	case proxy.OutcomeStoreError:
		e.Kind = notify.StoreFailing
	case proxy.NoticeHeld:
		e.Kind = notify.Held
	case proxy.NoticeUnretried:
		e.Kind = notify.Unretried
	case proxy.NoticeGivenUp:
		e.Kind = notify.GivenUp
	case proxy.NoticeBacklogOld:
		e.Kind = notify.BacklogOld
	default:
		return
	}
	m.notifier.Notify(e)
}

// noticeReadiness tells of each sender that was ready in the last report
// and is not in r, as hookonce_sender_ready goes from 1 to 0 (a sender
// whose rules changed and has not seen enough traffic keeps its value).
func (m *Main) noticeReadiness(r readiness.Report) {
	m.readyMu.Lock()
	defer m.readyMu.Unlock()
	now := map[string]bool{}
	for _, s := range r.Senders {
		if s.Verdict == readiness.UnknownSender {
			continue
		}
		ready := s.Verdict == readiness.GoLive
		if s.Verdict == readiness.NotEnough && s.EarlierRules > 0 {
			was, ok := m.readyWas[s.Sender]
			if !ok {
				continue
			}
			ready = was
		}
		now[s.Sender] = ready
		if m.readyWas[s.Sender] && !ready {
			m.notifier.Notify(notify.Event{Kind: notify.NotReady, Sender: s.Sender, Reason: s.Reason})
		}
	}
	m.readyWas = now
}

// noticeReload tells of a refused reload.
func (m *Main) noticeReload(path string, err error) {
	m.notifier.Notify(notify.Event{Kind: notify.ReloadFailed, Detail: path, Reason: strings.ReplaceAll(err.Error(), "\n", "; ")})
}

// notifyState is Main's part of the notices (embedded in Main).
type notifyState struct {
	notifier *notify.Notifier
	readyMu  sync.Mutex
	readyWas map[string]bool // sender → ready in the last report
	// notifyBackoff: the first retry's wait (0: the package's); a test
	// seam.
	notifyBackoff time.Duration
}

func notifyCommand() *cli.Command {
	return &cli.Command{
		Name:  "notify",
		Usage: "the operator's notices (the config's notify: block)",
		// Without a known subcommand (app.go wraps every command's Action).
		Action: func(c *cli.Context) error {
			return cli.Exit("usage: hookonce notify test [--config FILE]", exitUsage)
		},
		Subcommands: []*cli.Command{{
			Name:  "test",
			Usage: "send a test message through every channel of the config's notify: block and say which worked (exit 1 if any failed)",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "config", EnvVars: []string{"HOOKONCE_CONFIG"}, Usage: "config file (default: ./hookonce.yaml, else /etc/hookonce/hookonce.yaml)"},
				&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, EnvVars: []string{"HOOKONCE_TIMEOUT"}, Usage: "give up on a channel after"},
			},
			Action: runNotifyTest,
		}},
	}
}

func runNotifyTest(c *cli.Context) error {
	const usage = "usage: hookonce notify test [--config FILE]"
	path, err := requireConfig(c, usage)
	if err != nil {
		return err
	}
	ct, err := contract.Load(path)
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	if ct.Notify == nil {
		return cli.Exit(path+": no notify: block, so no channel to test (docs/notify.md)", exitUsage)
	}
	chans, err := notifyChannels(ct.Notify)
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	failed := 0
	for _, r := range notify.SendTest(ctx, chans, "") {
		if r.Err != nil {
			failed++
			fmt.Fprintf(c.App.Writer, "%s: failed: %v\n", r.Channel, r.Err)
			continue
		}
		fmt.Fprintf(c.App.Writer, "%s: sent\n", r.Channel)
	}
	if failed > 0 {
		return cli.Exit(fmt.Sprintf("notify test: %d of %d channels failed", failed, len(chans)), exitRuntime)
	}
	return nil
}
