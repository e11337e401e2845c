// Package notify tells the shop's owner, on Telegram, by email or through
// a signed webhook, what they must act on: an event no retry came for, an
// event held after an ambiguous outcome, refused deliveries of a sender,
// the store failing, a sender no longer ready, a config reload refused, a
// durable delivery given up or waiting too long for the site.
//
// Nothing here ever waits on the delivery path: Notify takes an event
// under a short lock and returns; a background loop (Run) gathers what
// happens at once into one message per kind (a digest), at most one per
// kind every Options.Interval, and hands it to each channel's bounded
// queue, which sends it with retries and backoff, gives up after
// Options.Attempts, and drops its oldest message when full (saying so in
// the next one). Failed sends are counted in
// hookonce_notify_failures_total{channel} and logged without a secret.
//
// The package imports nothing of hookonce's: the caller maps its own
// decisions to Events (internal/cli wires the proxy, the readiness gauge
// and reloads to it).
package notify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Kind is what happened, one rate limit each.
type Kind string

// The kinds of event an operator is told about.
const (
	// Unretried: an event left released or held with no attempt for
	// longer than its sender's retry window; the sender gave up.
	Unretried Kind = "unretried"
	// Held: a delivery's outcome was ambiguous and the sender's rule
	// (ambiguous: hold) keeps it unknown until an operator decides.
	Held Kind = "held"
	// Refused: deliveries of a configured sender refused (Reason:
	// ReasonSignature, ReasonConflict, ReasonMissingKey), told once they
	// pass Options.RefusalCount within Options.RefusalWithin.
	Refused Kind = "refused"
	// StoreFailing: a delivery could not be claimed because the store
	// failed (answered 503).
	StoreFailing Kind = "store_failing"
	// NotReady: a sender that was ready to go live no longer is (Reason:
	// the readiness report's words).
	NotReady Kind = "not_ready"
	// ReloadFailed: a config reload was refused; the previous rules stay
	// (Reason: the problems; Detail: the file).
	ReloadFailed Kind = "reload_failed"
	// GivenUp: hookonce answered a delivery itself (ack: durable) and
	// stopped trying to deliver it to the site (retry_for ran out, or the
	// site refused it); the sender will not send it again.
	GivenUp Kind = "given_up"
	// BacklogOld: the oldest delivery hookonce owes the site for a sender
	// (ack: durable) has waited over an hour (Detail: how many, since
	// when); Key is empty.
	BacklogOld Kind = "backlog_old"
	// Test: hookonce notify test.
	Test Kind = "test"
)

// Reasons of a Refused event.
const (
	ReasonSignature  = "signature"
	ReasonConflict   = "conflict"
	ReasonMissingKey = "missing_key"
)

// Event is one thing that happened. Its fields are shown to the operator
// as they are (control characters removed): never put a secret, a
// signature or a body in them.
type Event struct {
	Kind   Kind
	Sender string
	Key    string
	Reason string
	// Detail is a short line in the operator's words (the last attempt of
	// an unretried event, the file of a refused reload).
	Detail string
	At     time.Time // zero: when Notify was called
}

// Message is what a channel sends: one event, or a digest of several of
// one kind.
type Message struct {
	// ID is the same for every try of the message (the webhook's
	// webhook-id, so a receiver can drop repeats).
	ID      string
	Kind    Kind
	Host    string
	Subject string
	// Text is the whole message in plain text: what happened, the sender,
	// the key, and the commands to run.
	Text string
	// Events are the events it stands for (at most maxListed; Count says
	// how many in all).
	Events []Event
	Count  int
	// Commands are the commands Text names, for a receiver that acts.
	Commands []string
	At       time.Time
}

// Channel sends a message somewhere; Send returns once it was taken or
// failed, within ctx.
type Channel interface {
	Name() string // telegram, email, webhook: the metric's channel label
	Send(ctx context.Context, m Message) error
}

// Options tune a Notifier; zero values take the defaults.
type Options struct {
	Channels []Channel
	// Host names this hookonce in messages ("" : the host name).
	Host string
	// DigestWait is how long what happens at once is gathered before
	// its message goes (default 20s).
	DigestWait time.Duration
	// Interval is the least time between two messages of one kind
	// (default 5m); what happens meanwhile goes in the next one.
	Interval time.Duration
	// RefusalCount refusals of one sender for one reason within
	// RefusalWithin make a message (default 5 in 10m).
	RefusalCount  int
	RefusalWithin time.Duration
	// Queue bounds each channel's waiting messages (default 100); when
	// full, the oldest is dropped and the next message says so.
	Queue int
	// Attempts bounds the tries of one message on one channel (default
	// 6); Backoff is the wait after the first failure, doubling up to
	// MaxBackoff (defaults 5s and 5m).
	Attempts   int
	Backoff    time.Duration
	MaxBackoff time.Duration
	// SendTimeout bounds one try (default 20s).
	SendTimeout time.Duration
	Logger      *slog.Logger
	// Registerer receives hookonce_notify_failures_total; nil leaves it
	// unregistered.
	Registerer prometheus.Registerer
}

func (o *Options) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.DigestWait, 20*time.Second)
	def(&o.Interval, 5*time.Minute)
	def(&o.RefusalWithin, 10*time.Minute)
	def(&o.Backoff, 5*time.Second)
	def(&o.MaxBackoff, 5*time.Minute)
	def(&o.SendTimeout, 20*time.Second)
	if o.RefusalCount <= 0 {
		o.RefusalCount = 5
	}
	if o.Queue <= 0 {
		o.Queue = 100
	}
	if o.Attempts <= 0 {
		o.Attempts = 6
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Host == "" {
		o.Host = hostname()
	}
}

// maxIncoming bounds the events waiting for the loop; past it the oldest
// is dropped (and counted in the next message).
const maxIncoming = 4096

// Notifier gathers events into messages and sends them. A nil *Notifier
// takes every event and does nothing.
type Notifier struct {
	o        Options
	failures *prometheus.CounterVec

	mu        sync.Mutex
	in        []Event
	inDropped int
	wake      chan struct{}

	boxes   atomic.Pointer[[]*outbox]
	boxesMu sync.Mutex // serializes SetChannels, guards chans and ctx
	chans   []Channel  // the channels in force (Options.Channels, then SetChannels')
	ctx     context.Context
	running sync.WaitGroup
}

// New returns a Notifier; Run starts it.
func New(o Options) *Notifier {
	o.defaults()
	n := &Notifier{o: o, wake: make(chan struct{}, 1), chans: o.Channels}
	n.o.Channels = nil // n.chans from here on
	n.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookonce_notify_failures_total",
		Help: "Notices a channel (telegram, email, webhook) failed to send, each try counted; a notice is tried a few times with backoff, then dropped.",
	}, []string{"channel"})
	if o.Registerer != nil {
		o.Registerer.MustRegister(n.failures)
	}
	empty := []*outbox{}
	n.boxes.Store(&empty)
	return n
}

// Notify takes an event. It never waits on a channel or the network: a
// short lock, an append, a wake-up.
func (n *Notifier) Notify(e Event) {
	if n == nil {
		return
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	n.mu.Lock()
	if len(n.in) >= maxIncoming {
		n.in = n.in[1:]
		n.inDropped++
	}
	n.in = append(n.in, e)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Run gathers events and sends messages until ctx ends. Messages still
// waiting then are dropped.
func (n *Notifier) Run(ctx context.Context) {
	n.boxesMu.Lock()
	n.ctx = ctx
	n.setChannels(n.chans)
	n.boxesMu.Unlock()
	n.gather(ctx)
	n.running.Wait()
}

// SetChannels swaps the channels messages go to (a reload's): messages
// waiting for a channel that stays (by name) stay queued for its new
// settings. Before Run it only records them.
func (n *Notifier) SetChannels(chans []Channel) {
	n.boxesMu.Lock()
	defer n.boxesMu.Unlock()
	n.setChannels(chans)
}

// setChannels is SetChannels under boxesMu.
func (n *Notifier) setChannels(chans []Channel) {
	n.chans = chans
	if n.ctx == nil {
		return
	}
	old := *n.boxes.Load()
	var boxes []*outbox
	for _, c := range chans {
		n.failures.WithLabelValues(c.Name()) // the series exists at 0
		var b *outbox
		for _, ob := range old {
			if ob.name == c.Name() {
				b = ob
			}
		}
		if b == nil {
			b = newOutbox(n, c.Name())
			n.running.Add(1)
			go func() { defer n.running.Done(); b.run(n.ctx) }()
		}
		b.setChannel(c)
		boxes = append(boxes, b)
	}
	for _, ob := range old {
		if !containsBox(boxes, ob) {
			ob.stop()
		}
	}
	n.boxes.Store(&boxes)
}

func containsBox(bs []*outbox, b *outbox) bool {
	for _, x := range bs {
		if x == b {
			return true
		}
	}
	return false
}

// Failures is the failure counter of channel (for tests and callers
// that report it).
func (n *Notifier) Failures(channel string) prometheus.Counter {
	return n.failures.WithLabelValues(channel)
}

// enqueue hands m to every channel.
func (n *Notifier) enqueue(m Message) {
	for _, b := range *n.boxes.Load() {
		b.put(m)
	}
}

// Result is one channel's answer to SendTest.
type Result struct {
	Channel string
	Err     error
}

// SendTest sends a test message through each channel at once, without
// the queue, and returns each channel's result in order.
func SendTest(ctx context.Context, chans []Channel, host string) []Result {
	if host == "" {
		host = hostname()
	}
	m := compose(Test, host, []*entry{{ev: Event{Kind: Test, At: time.Now()}, count: 1}}, 0, time.Now())
	res := make([]Result, len(chans))
	var wg sync.WaitGroup
	for i, c := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = Result{Channel: c.Name(), Err: c.Send(ctx, m)}
		}()
	}
	wg.Wait()
	return res
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "msg_" + hex.EncodeToString(b[:])
}

// clean removes control characters (a key or reason is shown in a mail
// header and a chat), and bounds its length.
func clean(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return ' '
		}
		return r
	}, s)
	return cut(s, max)
}

// cut bounds s to max bytes, on a character's start.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8Start(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func utf8Start(b byte) bool { return b&0xc0 != 0x80 }
