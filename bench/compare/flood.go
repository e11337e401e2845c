//go:build benchcompare

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// flood is the memory measurement: a real `hookonce serve` process (built
// from this checkout) with max_inflight: 128 in front of a slow site, hit by
// 256 concurrent 1 MiB webhooks at once. Its peak RSS is read from the
// kernel (VmHWM), so the load generator's own buffers are not counted.
type flood struct {
	senders, inflight int
	bodySize          int
	siteDelay         time.Duration
	peakRSS, baseRSS  int64 // bytes
	status            map[int]int
	err               error
}

const floodConfig = `max_inflight: %d
max_body: 2MiB
senders:
  - name: shop
    match: { path: /hooks/shop }
    key: [ { header: X-Event-Id } ]
    upstream_timeout: 30s
`

func runFlood(dir string) flood {
	f := flood{senders: 256, inflight: 128, bodySize: 1 << 20, siteDelay: 500 * time.Millisecond, status: map[int]int{}}
	f.err = f.run(dir)
	return f
}

func (f *flood) run(dir string) error {
	bin, err := buildHookonce(dir)
	if err != nil {
		return err
	}
	cfg := filepath.Join(dir, "flood.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(floodConfig, f.inflight)), 0o644); err != nil {
		return err
	}
	site, err := serveHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(f.siteDelay)
		upstreamHandler(w, r)
	}))
	if err != nil {
		return err
	}
	defer site.stop()
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	admin, err := freeAddr()
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "serve", "--upstream", site.URL, "--listen", addr, "--admin-listen", admin,
		"--config", cfg, "--store", "sqlite:"+filepath.Join(dir, "flood.db"), "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	if err := waitReady("http://" + admin + "/readyz"); err != nil {
		return err
	}
	f.baseRSS = procStatus(cmd.Process.Pid, "VmRSS")

	body := bytes.Repeat([]byte("x"), f.bodySize)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: f.senders, DisableCompression: true}, Timeout: time.Minute}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range f.senders {
		wg.Go(func() {
			<-start
			req, _ := http.NewRequest("POST", "http://"+addr+hookPath, bytes.NewReader(body))
			req.Header.Set("X-Event-Id", "flood-"+strconv.Itoa(i))
			req.Header.Set("Content-Type", "application/octet-stream")
			code := 0
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				code = resp.StatusCode
			}
			mu.Lock()
			f.status[code]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	f.peakRSS = procStatus(cmd.Process.Pid, "VmHWM")
	if f.peakRSS == 0 {
		return errors.New("no VmHWM in /proc")
	}
	return nil
}

// freeAddr is a loopback address nothing listens on (just now).
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func waitReady(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s never answered 200", url)
}

// procStatus reads a kB field of /proc/PID/status, in bytes.
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func (f flood) markdown() string {
	if f.err != nil {
		return fmt.Sprintf("Memory under a flood: not measured (%v).\n", f.err)
	}
	var codes []string
	for _, c := range []int{200, 503, 0} {
		if n := f.status[c]; n > 0 {
			name := strconv.Itoa(c)
			if c == 0 {
				name = "no answer"
			}
			codes = append(codes, fmt.Sprintf("%d × %s", n, name))
		}
	}
	for c, n := range f.status {
		if c != 200 && c != 503 && c != 0 {
			codes = append(codes, fmt.Sprintf("%d × %d", n, c))
		}
	}
	return fmt.Sprintf("Memory under a flood: a `hookonce serve` process (built from this checkout, SQLite store) with `max_inflight: %d` in front of a site answering after %s, %d concurrent %d KiB webhooks at once: answers %s; RSS %.0f MiB before, **peak RSS %.0f MiB** (VmHWM).\n",
		f.inflight, f.siteDelay, f.senders, f.bodySize>>10, strings.Join(codes, ", "),
		float64(f.baseRSS)/(1<<20), float64(f.peakRSS)/(1<<20))
}
