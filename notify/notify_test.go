package notify_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookonce/hookonce/internal/testkit/smtptest"
	"github.com/hookonce/hookonce/notify"
)

const (
	botToken = "123456:AAH-test_token"
	whsec    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

// receiver is an HTTP server standing in for Telegram's Bot API or a
// webhook receiver: it keeps every request, and answers with status (200
// unless set) or hangs while hang is set.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []request
	got    chan struct{}
	status atomic.Int64
	hang   chan struct{} // non-nil: requests wait until it is closed
}

type request struct {
	Path   string
	Header http.Header
	Body   []byte
}

func newReceiver(t *testing.T, answer string) *receiver {
	t.Helper()
	rc := &receiver{got: make(chan struct{}, 1000)}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		hang := rc.hang
		rc.mu.Unlock()
		if hang != nil {
			select {
			case <-hang:
			case <-r.Context().Done():
				return
			}
		}
		body, _ := io.ReadAll(r.Body)
		if st := int(rc.status.Load()); st != 0 && st != 200 {
			w.WriteHeader(st)
			io.WriteString(w, `{"ok":false,"description":"down for the test"}`)
			return
		}
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		rc.mu.Unlock()
		io.WriteString(w, answer)
		rc.got <- struct{}{}
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.reqs...)
}

func (rc *receiver) wait(t *testing.T, n int) []request {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if r := rc.requests(); len(r) >= n {
			return r
		}
		select {
		case <-rc.got:
		case <-deadline:
			t.Fatalf("%d requests after 10s, want %d", len(rc.requests()), n)
		}
	}
}

func webhookChannel(t *testing.T, url string) *notify.Webhook {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(whsec, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	return &notify.Webhook{URL: url, Secret: key}
}

// data is the webhook body's data.
type data struct {
	ID       string   `json:"id"`
	Kind     string   `json:"kind"`
	Text     string   `json:"text"`
	Count    int      `json:"count"`
	Commands []string `json:"commands"`
	Events   []struct {
		Sender, Key, Reason string
	} `json:"events"`
}

// verified checks a webhook request with the Standard Webhooks library
// (an implementation independent of notify's) and returns its data.
func verified(t *testing.T, r request) data {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(whsec)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(r.Body, r.Header); err != nil {
		t.Fatalf("the webhook does not verify with standardwebhooks: %v\nheaders %v", err, r.Header)
	}
	var b struct {
		Type string `json:"type"`
		Data data   `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &b); err != nil {
		t.Fatal(err)
	}
	if b.Type != "hookonce."+b.Data.Kind || b.Data.ID != r.Header.Get("webhook-id") {
		t.Fatalf("type %q, kind %q, id %q, webhook-id %q", b.Type, b.Data.Kind, b.Data.ID, r.Header.Get("webhook-id"))
	}
	return b.Data
}

func run(t *testing.T, o notify.Options) *notify.Notifier {
	t.Helper()
	if o.DigestWait == 0 {
		o.DigestWait = 50 * time.Millisecond
	}
	if o.Interval == 0 {
		o.Interval = time.Hour
	}
	if o.Backoff == 0 {
		o.Backoff = 20 * time.Millisecond
	}
	o.Host = "shop1"
	n := notify.New(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return n
}

// A burst of 50 refused signatures is one message, counting all 50; four
// refusals (under the threshold of five) are none.
func TestRefusalBurstIsOneDigest(t *testing.T) {
	rc := newReceiver(t, "")
	n := run(t, notify.Options{Channels: []notify.Channel{webhookChannel(t, rc.URL)}})
	for i := range 4 {
		n.Notify(notify.Event{Kind: notify.Refused, Sender: "robokassa", Key: "k" + string(rune('0'+i)), Reason: notify.ReasonConflict})
	}
	for range 50 {
		n.Notify(notify.Event{Kind: notify.Refused, Sender: "stripe", Key: "evt_1", Reason: notify.ReasonSignature})
	}
	d := verified(t, rc.wait(t, 1)[0])
	// A sentinel after: once it arrives, anything the refusals would
	// have sent has gone too.
	n.Notify(notify.Event{Kind: notify.ReloadFailed, Detail: "/etc/hookonce/hookonce.yaml", Reason: "line 3: unknown"})
	rc.wait(t, 2)
	time.Sleep(100 * time.Millisecond)
	if got := len(rc.requests()); got != 2 {
		t.Fatalf("%d messages, want the digest and the sentinel", got)
	}
	if d.Kind != "refused" || d.Count != 50 || len(d.Events) != 1 || d.Events[0].Sender != "stripe" {
		t.Fatalf("digest %+v, want one entry for stripe counting 50", d)
	}
	if !strings.Contains(d.Text, "stripe: 50 refused in ") || !strings.Contains(d.Text, "the signature did not verify (401)") || !strings.Contains(d.Text, "hookonce check --request FILE") {
		t.Fatalf("digest text:\n%s", d.Text)
	}
	if strings.Contains(d.Text, "robokassa") {
		t.Fatalf("four refusals (under the threshold) were told:\n%s", d.Text)
	}
}

// An unretried event is told once however often it is reported, with the
// commands to look at it and to send it again; a held event names lookup,
// redeliver and release.
func TestUnretriedAndHeldNameTheCommands(t *testing.T) {
	rc := newReceiver(t, "")
	n := run(t, notify.Options{Channels: []notify.Channel{webhookChannel(t, rc.URL)}})
	for range 3 {
		n.Notify(notify.Event{Kind: notify.Unretried, Sender: "stripe", Key: "evt_9", Detail: "Last tried 2026-12-03 14:02 UTC: released, answered 502."})
	}
	n.Notify(notify.Event{Kind: notify.Held, Sender: "yookassa", Key: "pay 7"})
	reqs := rc.wait(t, 2)
	time.Sleep(200 * time.Millisecond)
	if got := len(rc.requests()); got != 2 {
		t.Fatalf("%d messages, want one unretried and one held", got)
	}
	byKind := map[string]data{}
	for _, r := range reqs {
		d := verified(t, r)
		byKind[d.Kind] = d
	}
	u, h := byKind["unretried"], byKind["held"]
	for _, want := range []string{"Sender: stripe", "Key: evt_9", "hookonce lookup stripe evt_9", "hookonce redeliver stripe evt_9", "answered 502"} {
		if !strings.Contains(u.Text, want) {
			t.Errorf("unretried message lacks %q:\n%s", want, u.Text)
		}
	}
	for _, want := range []string{"Key: pay 7", "hookonce lookup yookassa 'pay 7'", "hookonce release yookassa 'pay 7'", "hookonce redeliver yookassa 'pay 7'"} {
		if !strings.Contains(h.Text, want) {
			t.Errorf("held message lacks %q:\n%s", want, h.Text)
		}
	}
}

// A durable delivery given up is told once however often it is reported,
// with the commands to look at it and to send it; a sender's old backlog
// names the command that lists its owed deliveries.
func TestGivenUpAndBacklogOldNameTheCommands(t *testing.T) {
	rc := newReceiver(t, "")
	n := run(t, notify.Options{Channels: []notify.Channel{webhookChannel(t, rc.URL)}})
	for range 3 {
		n.Notify(notify.Event{Kind: notify.GivenUp, Sender: "cdek", Key: "order 17", Detail: "The sender was answered for it; the shop's last answer was 503."})
	}
	n.Notify(notify.Event{Kind: notify.BacklogOld, Sender: "bitrix24", Detail: "4 deliveries are waiting for the shop; the oldest since 2026-12-03 14:02 UTC."})
	reqs := rc.wait(t, 2)
	time.Sleep(200 * time.Millisecond)
	if got := len(rc.requests()); got != 2 {
		t.Fatalf("%d messages, want one given_up and one backlog_old", got)
	}
	byKind := map[string]data{}
	for _, r := range reqs {
		d := verified(t, r)
		byKind[d.Kind] = d
	}
	g, b := byKind["given_up"], byKind["backlog_old"]
	if g.Count != 1 || len(g.Events) != 1 {
		t.Errorf("given_up counts %d events (%d listed), want 1", g.Count, len(g.Events))
	}
	for _, want := range []string{"Sender: cdek", "Key: order 17", "last answer was 503", "will not send it again",
		"hookonce lookup cdek 'order 17'", "hookonce redeliver cdek 'order 17'"} {
		if !strings.Contains(g.Text, want) {
			t.Errorf("given_up message lacks %q:\n%s", want, g.Text)
		}
	}
	for _, want := range []string{"bitrix24: 4 deliveries are waiting", "hookonce list --sender bitrix24 --status pending"} {
		if !strings.Contains(b.Text, want) {
			t.Errorf("backlog_old message lacks %q:\n%s", want, b.Text)
		}
	}
	if len(b.Commands) != 1 || b.Commands[0] != "hookonce list --sender bitrix24 --status pending" {
		t.Errorf("backlog_old commands %q", b.Commands)
	}
}

// Telegram gets the Bot API's sendMessage: POST /bot<token>/sendMessage
// with chat_id and text as JSON.
func TestTelegramSendMessage(t *testing.T) {
	rc := newReceiver(t, `{"ok":true,"result":{"message_id":1}}`)
	tg := &notify.Telegram{APIURL: rc.URL, Token: botToken, ChatID: "-1001234567890"}
	res := notify.SendTest(context.Background(), []notify.Channel{tg}, "shop1")
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	r := rc.wait(t, 1)[0]
	if r.Path != "/bot"+botToken+"/sendMessage" || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("request %s %v", r.Path, r.Header)
	}
	var body struct {
		ChatID int64  `json:"chat_id"`
		Text   string `json:"text"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || body.ChatID != -1001234567890 || !strings.Contains(body.Text, "test message") {
		t.Fatalf("body %s (%v)", r.Body, err)
	}
	// A refusal of the API is an error with its description, never the
	// token (it is in the URL).
	rc.status.Store(401)
	err := tg.Send(context.Background(), notify.Message{Text: "x"})
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a 401 from the Bot API: %v", err)
	}
	rc.Close()
	err = tg.Send(context.Background(), notify.Message{Text: "x"})
	if err == nil || strings.Contains(err.Error(), botToken) || strings.Contains(err.Error(), "AAH") {
		t.Fatalf("an unreachable API: %v (must not quote the token)", err)
	}
}

// Email goes over STARTTLS with AUTH PLAIN, one message to every address,
// the subject and the text readable.
func TestEmailOverSTARTTLS(t *testing.T) {
	srv := smtptest.Start(t)
	em := &notify.Email{Addr: srv.Addr, From: "hookonce@shop.example", To: []string{"owner@shop.example", "dev@shop.example"},
		Password: "s3cret", RootCAs: srv.Pool}
	rc := newReceiver(t, "")
	n := run(t, notify.Options{Channels: []notify.Channel{em, webhookChannel(t, rc.URL)}})
	n.Notify(notify.Event{Kind: notify.Unretried, Sender: "tbank", Key: "ord-42"})
	m := srv.Wait(t, 1, 10*time.Second)[0]
	if !m.TLS || m.User != "hookonce@shop.example" || m.Pass != "s3cret" || m.From != "hookonce@shop.example" || len(m.To) != 2 {
		t.Fatalf("mail %+v: want STARTTLS, AUTH as the from address, two recipients", m)
	}
	head, body, _ := strings.Cut(m.Data, "\r\n\r\n")
	var subject string
	for _, l := range strings.Split(head, "\r\n") {
		if v, ok := strings.CutPrefix(l, "Subject: "); ok {
			subject, _ = new(mime.WordDecoder).DecodeHeader(v)
		}
	}
	text, _ := io.ReadAll(quotedprintable.NewReader(strings.NewReader(body)))
	if !strings.Contains(subject, "tbank stopped retrying ord-42") || !strings.Contains(string(text), "hookonce lookup tbank ord-42") {
		t.Fatalf("subject %q, text:\n%s", subject, text)
	}

	// A server without STARTTLS is refused, the password never sent.
	plain := smtptest.Start(t)
	plain.NoSTARTTLS = true
	err := (&notify.Email{Addr: plain.Addr, From: "a@b.example", To: []string{"c@d.example"}, Password: "s3cret"}).Send(context.Background(), notify.Message{Text: "x"})
	if err == nil || !strings.Contains(err.Error(), "STARTTLS") || len(plain.Messages()) != 0 {
		t.Fatalf("no STARTTLS: %v, %d messages", err, len(plain.Messages()))
	}
}

// A channel that is down never makes Notify wait; its message is tried
// again with backoff, each failure counted, and goes once it is back.
func TestDownChannelRetriedNeverWaits(t *testing.T) {
	srv := smtptest.Start(t)
	srv.FailNext(2)
	rc := newReceiver(t, "")
	hang := make(chan struct{})
	rc.mu.Lock()
	rc.hang = hang
	rc.mu.Unlock()
	em := &notify.Email{Addr: srv.Addr, From: "h@shop.example", To: []string{"o@shop.example"}, RootCAs: srv.Pool}
	n := run(t, notify.Options{Channels: []notify.Channel{em, webhookChannel(t, rc.URL)}, Attempts: 5})
	n.Notify(notify.Event{Kind: notify.Held, Sender: "s", Key: "k1"})
	// The webhook receiver hangs: events keep being taken.
	taken := make(chan int)
	go func() {
		for i := range 10000 {
			n.Notify(notify.Event{Kind: notify.Refused, Sender: "s", Key: "x", Reason: notify.ReasonSignature})
			_ = i
		}
		taken <- 10000
	}()
	select {
	case <-taken:
	case <-time.After(10 * time.Second):
		t.Fatal("Notify waited on a hanging channel")
	}
	srv.Wait(t, 1, 10*time.Second)
	if f := testutil.ToFloat64(n.Failures("email")); f != 2 {
		t.Fatalf("email failures = %v, want 2 (the two refused tries)", f)
	}
	close(hang)
	d := verified(t, rc.wait(t, 1)[0])
	if d.Kind != "held" && d.Kind != "refused" {
		t.Fatalf("webhook got %q", d.Kind)
	}
}

// A channel that keeps failing gives a message up after its tries, and
// its full queue drops the oldest message; the next message sent says so.
func TestQueueDropsOldestAndSaysSo(t *testing.T) {
	ch := &gate{open: make(chan struct{}), started: make(chan struct{}, 10)}
	n := run(t, notify.Options{Channels: []notify.Channel{ch}, Queue: 2, DigestWait: time.Millisecond})
	n.Notify(notify.Event{Kind: notify.Held, Sender: "s", Key: "first"})
	<-ch.started // the first message is at the channel, which hangs
	for _, k := range []notify.Kind{notify.Unretried, notify.StoreFailing, notify.ReloadFailed} {
		n.Notify(notify.Event{Kind: k, Sender: "s", Key: string(k)})
		time.Sleep(150 * time.Millisecond) // one message each, in this order
	}
	close(ch.open)
	got := ch.wait(t, 3)
	kinds := []notify.Kind{got[0].Kind, got[1].Kind, got[2].Kind}
	if kinds[0] != notify.Held || kinds[1] != notify.StoreFailing || kinds[2] != notify.ReloadFailed {
		t.Fatalf("sent %v, want held, then the two newest (the oldest waiting, unretried, dropped)", kinds)
	}
	if !strings.Contains(got[1].Text, "1 earlier notices were dropped") {
		t.Fatalf("the message after the drop does not say so:\n%s", got[1].Text)
	}
}

// gate is a channel that holds every send until open is closed.
type gate struct {
	open    chan struct{}
	started chan struct{}
	mu      sync.Mutex
	sent    []notify.Message
}

func (g *gate) Name() string { return "gate" }

func (g *gate) Send(ctx context.Context, m notify.Message) error {
	g.started <- struct{}{}
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	g.mu.Lock()
	g.sent = append(g.sent, m)
	g.mu.Unlock()
	return nil
}

func (g *gate) wait(t *testing.T, n int) []notify.Message {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		g.mu.Lock()
		s := append([]notify.Message(nil), g.sent...)
		g.mu.Unlock()
		if len(s) >= n {
			return s
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("fewer than %d messages sent", n)
	return nil
}

// BenchmarkNotifyWhileChannelHangs is what a delivery pays for a notice
// while the only channel hangs: a lock and an append.
func BenchmarkNotifyWhileChannelHangs(b *testing.B) {
	ch := &gate{open: make(chan struct{}), started: make(chan struct{}, 1)}
	defer close(ch.open)
	n := notify.New(notify.Options{Channels: []notify.Channel{ch}, DigestWait: time.Millisecond, Host: "bench"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		e := notify.Event{Kind: notify.Refused, Sender: "stripe", Key: "evt_1", Reason: notify.ReasonSignature}
		for pb.Next() {
			n.Notify(e)
		}
	})
}
