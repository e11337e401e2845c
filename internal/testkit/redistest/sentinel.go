package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SentinelMaster is the master name the Sentinel deployment monitors.
const SentinelMaster = "hookonce"

// Sentinel is a Redis Sentinel deployment for failover tests: a primary,
// replicas (each through a Link the test can stall) and sentinels, all
// redis-server processes on 127.0.0.1 at random ports, stopped by PID in
// tb's cleanup.
type Sentinel struct {
	Primary   *Server
	Replicas  []*Server
	Links     []*Link // Links[i] carries Replicas[i]'s replication stream
	Sentinels []*Server

	bin, dir string
}

// SentinelOptions shapes StartSentinel's deployment.
type SentinelOptions struct {
	Replicas  int // default 2
	Sentinels int // default 3 (quorum: a majority)
	// DownAfter is down-after-milliseconds (default 500ms): how long the
	// primary must not answer before a sentinel thinks it down.
	DownAfter time.Duration
	// FailoverTimeout is failover-timeout (default 60s). Keep it longer
	// than the test: past it, Sentinel repoints a replica that replicates
	// from "the wrong address" (the Link) straight at the primary.
	FailoverTimeout time.Duration
	// ServerArgs are appended to every data node's command line (primary
	// and replicas: a replica may become the primary), e.g.
	// "--min-replicas-to-write", "1".
	ServerArgs []string
}

// StartSentinel starts the deployment and waits until every sentinel
// sees the primary, every replica and every other sentinel.
func StartSentinel(tb testing.TB, o SentinelOptions) *Sentinel {
	tb.Helper()
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	if o.Sentinels == 0 {
		o.Sentinels = 3
	}
	if o.DownAfter == 0 {
		o.DownAfter = 500 * time.Millisecond
	}
	if o.FailoverTimeout == 0 {
		o.FailoverTimeout = 60 * time.Second
	}
	d := &Sentinel{bin: Binary(tb), dir: tb.TempDir()}
	node := []string{"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}
	d.Primary = Start(tb, append(node, o.ServerArgs...)...)
	for range o.Replicas {
		link := StartLink(tb, d.Primary.Addr)
		r := Start(tb, append(append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(link.Port())}, node...), o.ServerArgs...)...)
		d.Replicas = append(d.Replicas, r)
		d.Links = append(d.Links, link)
	}
	d.waitReplicas(tb, d.Primary, o.Replicas, 20*time.Second)
	quorum := o.Sentinels/2 + 1
	for range o.Sentinels {
		s, err := d.startSentinel(quorum, o)
		if err != nil {
			tb.Fatalf("start sentinel: %v", err)
		}
		tb.Cleanup(s.Close)
		d.Sentinels = append(d.Sentinels, s)
	}
	want := fmt.Sprintf("address=%s,slaves=%d,sentinels=%d", d.Primary.Addr, o.Replicas, o.Sentinels)
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range d.Sentinels {
		for {
			info, err := bulk(s.Addr, "INFO sentinel")
			if err == nil && strings.Contains(info, "status=ok,"+want) {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("sentinel %s does not see the deployment (want %q): %v %q", s.Addr, want, err, info)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return d
}

func (d *Sentinel) startSentinel(quorum int, o SentinelOptions) (*Server, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		conf := filepath.Join(d.dir, fmt.Sprintf("sentinel-%d.conf", port))
		host, pport, _ := strings.Cut(d.Primary.Addr, ":")
		text := fmt.Sprintf(`sentinel monitor %[1]s %[2]s %[3]s %[4]d
sentinel down-after-milliseconds %[1]s %[5]d
sentinel failover-timeout %[1]s %[6]d
sentinel parallel-syncs %[1]s 1
`, SentinelMaster, host, pport, quorum, o.DownAfter.Milliseconds(), o.FailoverTimeout.Milliseconds())
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			return nil, err
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), port: port, dir: d.dir, bin: d.bin,
			args: []string{"--sentinel"}, conf: conf}
		if lastErr = s.launch(); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

// waitReplicas waits until primary has n replicas online.
func (d *Sentinel) waitReplicas(tb testing.TB, primary *Server, n int, within time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		info, err := bulk(primary.Addr, "INFO replication")
		if err == nil && strings.Count(info, "state=online") >= n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: %d replicas not online after %v: %v %q", primary.Addr, n, within, err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// AddReplica starts a fresh replica of primary (directly, not through a
// Link), adds it to d.Replicas and waits until it is in sync.
func (d *Sentinel) AddReplica(tb testing.TB, primary *Server) *Server {
	tb.Helper()
	r := Start(tb, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port()),
		"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0")
	d.Replicas = append(d.Replicas, r)
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := bulk(primary.Addr, "INFO replication")
		if err == nil && strings.Contains(info, "port="+strconv.Itoa(r.Port())+",state=online") {
			return r
		}
		if time.Now().After(deadline) {
			tb.Fatalf("new replica %s of %s not online after 20s: %v %q", r.Addr, primary.Addr, err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// URL is the redis+sentinel:// URL naming every sentinel; query is
// appended (e.g. "wait_replicas=1"), "" for none.
func (d *Sentinel) URL(query string) string {
	u := "redis+sentinel://" + d.Sentinels[0].Addr + "?master_name=" + SentinelMaster
	for _, s := range d.Sentinels[1:] {
		u += "&addr=" + s.Addr
	}
	if query != "" {
		u += "&" + query
	}
	return u
}

// Master is the primary's address as the first answering sentinel
// reports it ("" when none answers).
func (d *Sentinel) Master() string {
	for _, s := range d.Sentinels {
		info, err := bulk(s.Addr, "INFO sentinel")
		if err != nil {
			continue
		}
		_, rest, ok := strings.Cut(info, "address=")
		if !ok {
			continue
		}
		addr, _, _ := strings.Cut(rest, ",")
		return addr
	}
	return ""
}

// WaitFailover waits until every sentinel names a primary other than old
// and that primary has replicas online (the rest of the deployment
// reconfigured to follow it), and returns it.
func (d *Sentinel) WaitFailover(tb testing.TB, old string, replicas int, within time.Duration) *Server {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		agreed := ""
		for i, s := range d.Sentinels {
			info, _ := bulk(s.Addr, "INFO sentinel")
			_, rest, _ := strings.Cut(info, "address=")
			addr, _, _ := strings.Cut(rest, ",")
			if addr == "" || addr == old || (i > 0 && addr != agreed) {
				agreed = ""
				break
			}
			agreed = addr
		}
		if agreed != "" {
			for _, r := range d.Replicas {
				if r.Addr == agreed {
					d.waitReplicas(tb, r, replicas, time.Until(deadline))
					return r
				}
			}
			tb.Fatalf("sentinels promoted %s, which is none of the replicas", agreed)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("no failover away from %s within %v (sentinel says %q)", old, within, d.Master())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Info returns the server's INFO section (e.g. "replication").
func (s *Server) Info(tb testing.TB, section string) string {
	tb.Helper()
	info, err := bulk(s.Addr, "INFO "+section)
	if err != nil {
		tb.Fatalf("INFO %s on %s: %v", section, s.Addr, err)
	}
	return info
}
