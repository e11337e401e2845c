//go:build benchcompare

package main

// Issue 46's check in the deployment mode: a notify: channel that is down
// does not slow deliveries. A SQLite serve process whose notify: channels
// (Telegram's api_url and the outgoing webhook) point at a loopback port
// that accepts and never answers, under the open loop's new events with
// one request in refusedEvery sent without its key (a missing-key refusal,
// above notify's threshold, so refusal notices are produced all along),
// beside the same load on a serve process without notify:.

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// refusedEvery: one request in this many is sent without its key.
const refusedEvery = 10

// blackhole is a loopback listener that accepts connections, reads what
// they send and never answers: a notify channel that is down.
type blackhole struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	n     atomic.Int64 // connections accepted
	done  chan struct{}
}

func startBlackhole() (*blackhole, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &blackhole{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.n.Add(1)
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	return b, nil
}

func (b *blackhole) URL() string { return "http://" + b.ln.Addr().String() }

func (b *blackhole) close() {
	b.ln.Close()
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		c.Close()
	}
}

// notifyDownConfig is config with a notify: block whose two channels both
// go to down (an address that never answers), refusal notices from the
// first refusal on, a message of a kind at most every second and a
// digest wait of 1 ms (0 would mean notify's default, 20 s): as many
// notices as notify lets through. The secrets are files in dir.
func notifyDownConfig(dir, down string) (string, error) {
	tok := filepath.Join(dir, "telegram-token")
	if err := os.WriteFile(tok, []byte("123456789:benchmarkTokenNeverValid\n"), 0o600); err != nil {
		return "", err
	}
	sec := filepath.Join(dir, "webhook-secret")
	if err := os.WriteFile(sec, []byte("whsec_"+base64.StdEncoding.EncodeToString([]byte("compare-notify-secret"))+"\n"), 0o600); err != nil {
		return "", err
	}
	return config + fmt.Sprintf(`notify:
  telegram: { token_file: %s, chat_id: "1", api_url: %s }
  webhook: { url: %s/hook, secret_file: %s }
  digest_wait: 1ms
  interval: 1s
  refusals: { count: 1, within: 1m }
`, tok, down, down, sec), nil
}

// mixedEvents sends new events with one request in refusedEvery without
// its key (answered 400: missing key), counting those in refused.
func mixedEvents(p *poster, url, prefix string, refused *atomic.Int64) op {
	var n atomic.Int64
	return func(ctx context.Context, i int64) error {
		if n.Add(1)%refusedEvery == 0 {
			refused.Add(1)
			return p.post(ctx, url, "", bodyA, wantStatus(http.StatusBadRequest))
		}
		return p.post(ctx, url, prefix+strconv.FormatInt(i, 10), bodyA, wantReplay(false))
	}
}

// metricSum reads the serve process's /metrics (admin listener) and sums
// the samples of the metric name.
func (s *serveProc) metricSum(name string) (float64, error) {
	req, err := http.NewRequest(http.MethodGet, s.admin+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+profToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("metrics: %s", resp.Status)
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, name) || (len(l) > len(name) && l[len(name)] != '{' && l[len(name)] != ' ') {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum, sc.Err()
}
