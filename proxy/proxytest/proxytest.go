// Package proxytest holds test helpers shared by every backend's tests: a
// counting site, a proxy started in front of it, and the acceptance
// protocol (docs/decision-table.md) run through real HTTP.
package proxytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookonce/hookonce/contract"
	"github.com/hookonce/hookonce/dedupe"
	"github.com/hookonce/hookonce/proxy"
)

// Site is a site that counts executions of its handler per event id
// (the X-Event-Id header, else the JSON body's "id"), and its peak
// concurrency.
type Site struct {
	*httptest.Server
	handler http.HandlerFunc
	key     func(r *http.Request, body []byte) string // what a call is counted under (EventID by default)

	mu        sync.Mutex // guards the fields below
	execs     map[string]int
	times     map[string][]time.Time // when each call for an id came
	total     int
	inflight  int
	peak      int
	lastByKey map[string]http.Header
}

// NewSite starts a counting site. h runs after the call is counted
// (CallNumber tells it which call of its id it is); nil answers 200
// {"ok":true,"id":…}.
func NewSite(t testing.TB, h http.HandlerFunc) *Site {
	t.Helper()
	return NewSiteWith(t, h, nil)
}

// NewSiteWith is NewSite with configure run on the site's server
// before it starts (nil: nothing).
func NewSiteWith(t testing.TB, h http.HandlerFunc, configure func(*http.Server)) *Site {
	t.Helper()
	return newSite(t, h, nil, configure)
}

func newSite(t testing.TB, h http.HandlerFunc, key func(*http.Request, []byte) string, configure func(*http.Server)) *Site {
	t.Helper()
	u := &Site{handler: h, key: key, execs: map[string]int{}, times: map[string][]time.Time{}, lastByKey: map[string]http.Header{}}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	if configure != nil {
		configure(u.Server.Config)
	}
	u.Server.Start()
	t.Cleanup(u.Close)
	return u
}

// NewSiteKeyed is NewSite counting each call under key(r, body) instead
// of its event id: Executions, Times and LastHeader then take that key
// (a site whose deliveries carry no id it reads, such as forms counted by
// path and body).
func NewSiteKeyed(t testing.TB, key func(r *http.Request, body []byte) string, h http.HandlerFunc) *Site {
	t.Helper()
	return newSite(t, h, key, nil)
}

// EventID returns the id the site counts a request under.
func EventID(r *http.Request, body []byte) string {
	if id := r.Header.Get("X-Event-Id"); id != "" {
		return id
	}
	var v struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(body, &v) == nil && v.ID != nil {
		if s, ok := v.ID.(string); ok {
			return s
		}
		b, _ := json.Marshal(v.ID)
		return string(b)
	}
	return ""
}

func (u *Site) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	id := ""
	if u.key != nil {
		id = u.key(r, body)
	} else {
		id = EventID(r, body)
	}
	u.mu.Lock()
	u.execs[id]++
	n := u.execs[id]
	u.times[id] = append(u.times[id], time.Now())
	u.total++
	u.inflight++
	if u.inflight > u.peak {
		u.peak = u.inflight
	}
	u.lastByKey[id] = r.Header.Clone()
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		u.inflight--
		u.mu.Unlock()
	}()
	if u.handler != nil {
		u.handler(w, r.WithContext(context.WithValue(r.Context(), callKey{}, n)))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true,"id":`+jsonString(id)+`}`)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

type callKey struct{}

// CallNumber is, in a Site's handler, the call's number among the
// calls for its id, from 1 (0 outside one).
func CallNumber(r *http.Request) int {
	n, _ := r.Context().Value(callKey{}).(int)
	return n
}

// Times returns when the handler ran for id.
func (u *Site) Times(id string) []time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]time.Time(nil), u.times[id]...)
}

// Executions returns how many times the handler ran for id.
func (u *Site) Executions(id string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.execs[id]
}

// Total returns every call the handler got.
func (u *Site) Total() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.total
}

// Peak returns the highest number of calls running at once.
func (u *Site) Peak() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.peak
}

// LastHeader returns the headers of the last call for id.
func (u *Site) LastHeader(id string) http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.lastByKey[id]
}

// Instance is a proxy started for a test.
type Instance struct {
	*httptest.Server
	Proxy    *proxy.Proxy
	Registry *prometheus.Registry
	Logs     *SyncBuffer
}

// SyncBuffer is a bytes.Buffer safe for a logger and a test to share.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Start runs a proxy with configYAML in front of siteURL, logging JSON
// into Logs and registering metrics in a fresh registry.
func Start(t testing.TB, store dedupe.Store, siteURL, configYAML string) *Instance {
	t.Helper()
	return StartWith(t, store, siteURL, configYAML, nil)
}

// StartWith is Start with opts applied to the proxy's options (nil:
// none). A config with an ack: durable sender gets its owed deliveries
// sent (Proxy.RunDurable) until the test ends.
func StartWith(t testing.TB, store dedupe.Store, siteURL, configYAML string, opts func(*proxy.Options)) *Instance {
	t.Helper()
	c, err := contract.Parse([]byte(configYAML), "test.yaml")
	if err != nil {
		t.Fatalf("test config: %v", err)
	}
	u, err := url.Parse(siteURL)
	if err != nil {
		t.Fatal(err)
	}
	in := &Instance{Registry: prometheus.NewRegistry(), Logs: &SyncBuffer{}}
	o := proxy.Options{
		Upstream: u, Contract: c, Store: store, Registerer: in.Registry,
		Logger:           slog.New(slog.NewJSONHandler(in.Logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		HitFlushInterval: 50 * time.Millisecond,
		KeepIdle:         proxy.DefaultKeepIdle, // as serve runs
	}
	if opts != nil {
		opts(&o)
	}
	in.Proxy, err = proxy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	in.Server = httptest.NewServer(in.Proxy)
	stop := func() {}
	for _, s := range c.Senders {
		if s.Ack == contract.AckDurable {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); in.Proxy.RunDurable(ctx) }()
			stop = func() { cancel(); <-done }
			break
		}
	}
	t.Cleanup(func() {
		in.Server.Close()
		stop()
		_ = in.Proxy.Close(context.Background())
	})
	return in
}

// StartProxy is Start for callers that only need the server.
func StartProxy(t testing.TB, store dedupe.Store, siteURL, configYAML string) *httptest.Server {
	t.Helper()
	return Start(t, store, siteURL, configYAML).Server
}

// Reply is one answer as the sender saw it.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// Replayed reports whether the answer carries the replay marker.
func (r Reply) Replayed() bool { return r.Header.Get(proxy.ReplayHeader) == "true" }

// Post sends body to url with the given extra headers.
func Post(t testing.TB, url, body string, header ...string) Reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("POST %s: %v", url, err)
		return Reply{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("read answer: %v", err)
	}
	return Reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// AssertFreed fails unless the claim on (sender, key) is free: no record,
// or a released one (kept with its attempts, owned by nobody).
func AssertFreed(t testing.TB, store dedupe.Store, sender, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, err := store.Get(ctx, sender, key)
	if errors.Is(err, dedupe.ErrNotFound) {
		return
	}
	if err != nil || rec.State != dedupe.StateReleased || rec.Owner != "" {
		t.Errorf("claim on %s/%s not freed: %+v, %v", sender, key, rec, err)
	}
}

// Metric sums the series of the metric name in reg whose labels include
// every given name/value pair (counters and gauges alike); 0 when none.
func Metric(t testing.TB, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total
}
