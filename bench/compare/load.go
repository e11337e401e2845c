//go:build benchcompare

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/openloop"
	"github.com/hookonce/hookonce/proxy"
)

// op is one request of a path: i numbers the requests of one run.
type op func(ctx context.Context, i int64) error

// sample is what one measurement of one path gave.
type sample struct {
	Requests  int64
	Errors    int64
	FirstErr  string
	Elapsed   time.Duration
	P50, P99  time.Duration
	P999      time.Duration
	SelfCPU   time.Duration // this process (load generator, proxies, in-process upstream)
	ServerCPU time.Duration // the external servers' processes (nginx, postgres, redis)
	ProcCPU   time.Duration // the hookonce serve process measured, if any
	Max       time.Duration // the slowest request (open loop)
	Tails     tails         // what else happened meanwhile (open loop)
}

// meters read the CPU time of the processes outside this one that a path
// runs on; a nil func reads 0.
type meters struct {
	servers func() time.Duration // external servers (nginx, postgres, redis)
	proc    func() time.Duration // a hookonce serve process
}

func (m meters) read() (servers, proc time.Duration) {
	if m.servers != nil {
		servers = m.servers()
	}
	if m.proc != nil {
		proc = m.proc()
	}
	return servers, proc
}

func (s sample) rps() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Requests) / s.Elapsed.Seconds()
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// seq numbers every request of the program, so that event ids never repeat
// across paths and rounds.
var seq atomic.Int64

// closedLoop runs conns workers, each issuing its next request as soon as
// the last was answered, for d (after a warm-up of warm, not counted).
func closedLoop(conns int, warm, d time.Duration, f op, m meters) sample {
	run := func(d time.Duration, record bool) sample {
		ctx, cancel := context.WithTimeout(context.Background(), d+10*time.Second)
		defer cancel()
		deadline := time.Now().Add(d)
		lat := make([][]time.Duration, conns)
		var errs atomic.Int64
		var firstErr atomic.Value
		var wg sync.WaitGroup
		cpu0 := selfCPU()
		srv0, proc0 := m.read()
		start := time.Now()
		for w := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if record {
					lat[w] = make([]time.Duration, 0, 4096)
				}
				for time.Now().Before(deadline) {
					i := seq.Add(1)
					t0 := time.Now()
					if err := f(ctx, i); err != nil {
						errs.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
						continue
					}
					if record {
						lat[w] = append(lat[w], time.Since(t0))
					}
				}
			}()
		}
		wg.Wait()
		elapsed, cpu1 := time.Since(start), selfCPU()
		srv1, proc1 := m.read()
		s := sample{Elapsed: elapsed, Errors: errs.Load(), SelfCPU: cpu1 - cpu0, ServerCPU: srv1 - srv0, ProcCPU: proc1 - proc0}
		if e, ok := firstErr.Load().(string); ok {
			s.FirstErr = e
		}
		var all []time.Duration
		for _, l := range lat {
			all = append(all, l...)
		}
		s.Requests = int64(len(all))
		s.P50, s.P99, s.P999 = percentiles(all)
		return s
	}
	if warm > 0 {
		run(warm, false)
	}
	return run(d, true)
}

// openLoop issues requests at a fixed rate for d, each on its own
// goroutine, whatever the answers' latency; latency is measured from the
// time the request was due, so that a stall counts for every request it
// delayed. At most maxInFlight requests are outstanding; above that the
// request counts as an error.
func openLoop(rate float64, d time.Duration, f op, m meters) sample {
	const maxInFlight = 2000
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	n := int64(d / time.Duration(float64(time.Second)/rate))
	cpu0 := selfCPU()
	srv0, proc0 := m.read()
	tm := startTails()
	res := openloop.Run(rate, n, nil, maxInFlight, func(int64) error { return f(ctx, seq.Add(1)) })
	cpu1 := selfCPU()
	srv1, proc1 := m.read()
	all := res.Latencies
	s := sample{Elapsed: res.Elapsed, Errors: res.Errors, SelfCPU: cpu1 - cpu0, ServerCPU: srv1 - srv0, ProcCPU: proc1 - proc0,
		Requests: int64(len(all)), Tails: tm.stop()}
	if res.FirstErr != nil {
		s.FirstErr = res.FirstErr.Error()
	}
	s.P50, s.P99, s.P999 = percentiles(all)
	if len(all) > 0 {
		s.Max = all[len(all)-1]
	}
	return s
}

func percentiles(all []time.Duration) (p50, p99, p999 time.Duration) {
	if len(all) == 0 {
		return 0, 0, 0
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	at := func(p float64) time.Duration { return all[int(float64(len(all)-1)*p)] }
	return at(0.50), at(0.99), at(0.999)
}

// poster sends webhooks with one shared keep-alive transport sized for
// the number of connections.
type poster struct {
	client *http.Client
}

func newPoster(conns int) *poster {
	return &poster{client: &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        conns * 2,
			MaxIdleConnsPerHost: conns * 2,
			DisableCompression:  true,
			IdleConnTimeout:     90 * time.Second,
		},
	}}
}

func (p *poster) close() { p.client.CloseIdleConnections() }

// check judges an answer.
type check func(resp *http.Response) error

func wantStatus(code int) check {
	return func(resp *http.Response) error {
		if resp.StatusCode != code {
			return fmt.Errorf("status %d, want %d", resp.StatusCode, code)
		}
		return nil
	}
}

func wantReplay(replayed bool) check {
	return func(resp *http.Response) error {
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d, want 200", resp.StatusCode)
		}
		if got := resp.Header.Get(proxy.ReplayHeader) == "true"; got != replayed {
			return fmt.Errorf("replayed=%v, want %v", got, replayed)
		}
		return nil
	}
}

func (p *poster) post(ctx context.Context, url, id string, body []byte, c check) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if id != "" {
		req.Header.Set("X-Event-Id", id)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return c(resp)
}
