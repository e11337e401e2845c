//go:build benchcompare

package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// server is something started on loopback that must be stopped.
type server struct {
	URL  string
	stop func()
}

// serveHTTP serves h on a fresh 127.0.0.1 port in this process.
func serveHTTP(h http.Handler) (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return &server{URL: "http://" + l.Addr().String(), stop: func() { _ = srv.Close() }}, nil
}

// upstreamHandler is the site: read the body, answer 200 with a small JSON.
func upstreamHandler(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true}`)
}

// nginxProc is an nginx master started by startNginx.
type nginxProc struct {
	URL  string
	Dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// startNginx runs nginx on a free loopback port with proxy_pass and an
// upstream keepalive pool in front of upstream (host:port), with a
// throwaway prefix directory, as internal/testkit/sitetest does.
func startNginx(upstream string, conns int) (*nginxProc, error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "compare-nginx-")
	if err != nil {
		return nil, err
	}
	_ = os.Chmod(dir, 0o755) // workers run as nobody when started as root
	for attempt := 1; ; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		addr := l.Addr().String()
		l.Close()
		conf := fmt.Sprintf(`daemon off;
master_process on;
worker_processes auto;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path %[1]s/body; proxy_temp_path %[1]s/proxy; fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi; scgi_temp_path %[1]s/scgi;
    keepalive_requests 1000000;
    upstream site {
        server %[2]s;
        keepalive %[4]d;
        keepalive_requests 1000000;
    }
    server {
        listen %[3]s;
        location / {
            proxy_pass http://site;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
`, dir, upstream, addr, conns*2)
		confPath := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		errorLog := filepath.Join(dir, "error.log")
		cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", errorLog)
		out, _ := os.Create(filepath.Join(dir, "nginx.out"))
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
		if err := cmd.Start(); err != nil {
			out.Close()
			os.RemoveAll(dir)
			return nil, err
		}
		out.Close()
		n := &nginxProc{URL: "http://" + addr, Dir: dir, cmd: cmd, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(n.done) }()
		if err := waitDial(addr, n.done); err == nil {
			return n, nil
		}
		logs, _ := os.ReadFile(errorLog)
		n.stopProc()
		if attempt == 3 || !strings.Contains(string(logs), "in use") {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("nginx did not start: %s", logs)
		}
	}
}

func waitDial(addr string, done chan struct{}) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-done:
			return errors.New("exited")
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// PID is the master's process id.
func (n *nginxProc) PID() int { return n.cmd.Process.Pid }

// stopProc ends nginx by its PID: SIGTERM, then SIGKILL to its group.
func (n *nginxProc) stopProc() {
	select {
	case <-n.done:
		return
	default:
	}
	pid := n.cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-n.done
	}
}

// Close stops nginx and removes its prefix.
func (n *nginxProc) Close() {
	n.stopProc()
	os.RemoveAll(n.Dir)
}

// treeCPU returns the user+system CPU time of the processes rooted at
// roots (and their descendants), from /proc. Processes that exited in
// between are not counted.
func treeCPU(roots []int) time.Duration {
	if len(roots) == 0 {
		return 0
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	type st struct {
		ppid  int
		ticks int64
	}
	procs := map[int]st{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		stt, _ := strconv.ParseInt(f[12], 10, 64)
		procs[pid] = st{ppid, ut + stt}
	}
	in := map[int]bool{}
	for _, r := range roots {
		in[r] = true
	}
	var total int64
	for pid, p := range procs {
		for q, depth := pid, 0; q > 1 && depth < 16; q, depth = procs[q].ppid, depth+1 {
			if in[q] {
				total += p.ticks
				break
			}
		}
	}
	const hz = 100 // USER_HZ on Linux
	return time.Duration(total) * time.Second / hz
}
