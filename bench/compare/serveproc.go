//go:build benchcompare

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// built is the hookonce binary built from this checkout (buildHookonce).
var built struct {
	path string
	err  error
}

// buildHookonce builds hookonce from the checkout (the current directory
// must be the repository's root) into dir, once per run.
func buildHookonce(dir string) (string, error) {
	if built.path == "" && built.err == nil {
		bin := filepath.Join(dir, "hookonce")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build (run from the repository root): %v: %s", err, out)
		} else {
			built.path = bin
		}
	}
	return built.path, built.err
}

// serveProc is a `hookonce serve` process: hookonce measured apart from
// the load generator and the site, which stay in this process.
type serveProc struct {
	URL   string
	admin string // the admin listener's base URL
	cmd   *exec.Cmd
	done  chan struct{}
	log   string
}

// serveEnv is added to every serve process's environment (-serve-env).
var serveEnv []string

// profToken is the admin token every serve process of this run is started
// with (HOOKONCE_ADMIN_TOKEN), so that -serveprofile can read its CPU
// profile from /debug/pprof/profile; it never leaves this machine's
// loopback.
var profToken = "compare-profile-" + strconv.FormatInt(time.Now().UnixNano(), 36)

// cpuProfile writes a CPU profile of the serve process over d to file
// (the admin listener's /debug/pprof/profile, behind the token).
func (s *serveProc) cpuProfile(d time.Duration, file string) error {
	secs := max(int((d+time.Second/2)/time.Second), 1)
	req, err := http.NewRequest(http.MethodGet, s.admin+"/debug/pprof/profile?seconds="+strconv.Itoa(secs), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+profToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile: %s", resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// serveLogLevel is serve's default --log-level (internal/cli), given
// explicitly so that HOOKONCE_LOG_LEVEL in the environment changes nothing.
const serveLogLevel = "info"

// startServe runs bin serve with the compare contract (config) in front of
// upstream on store, its listener and its admin listener on free loopback
// ports, and waits until /readyz answers 200.
func startServe(bin, dir, upstream, store string) (*serveProc, error) {
	return startServeWith(bin, dir, upstream, store, config)
}

// startServeWith is startServe with the contract contractYAML.
func startServeWith(bin, dir, upstream, store, contractYAML string) (*serveProc, error) {
	cfg := filepath.Join(dir, "serve.yaml")
	if err := os.WriteFile(cfg, []byte(contractYAML), 0o644); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "serve.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "--upstream", upstream, "--listen", addr, "--admin-listen", admin,
		"--config", cfg, "--store", store, "--log-level", serveLogLevel)
	cmd.Env = append(os.Environ(), "HOOKONCE_ADMIN_TOKEN="+profToken)
	cmd.Env = append(cmd.Env, serveEnv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &serveProc{URL: "http://" + addr, admin: "http://" + admin, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); close(s.done) }()
	if err := waitReady("http://" + admin + "/readyz"); err != nil {
		s.stop()
		b, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%w; its log: %s", err, lastLine(b))
	}
	return s, nil
}

// PID is the serve process's id.
func (s *serveProc) PID() int { return s.cmd.Process.Pid }

// CPU is the process's user+system CPU time so far (it starts no
// children).
func (s *serveProc) CPU() time.Duration { return treeCPU([]int{s.PID()}) }

// switches is how many times the process's threads have been switched
// out so far, voluntarily (a thread that sleeps: an idle Go scheduler, a
// blocking syscall) or not, from /proc/PID/task/*/status: each costs the
// kernel's switch and, to come back, a wake-up. Threads that exited are
// not counted (Go's runtime keeps its threads). false when the process's
// threads cannot be read or a count does not parse: the round then shows
// none rather than a number that is not one.
func (s *serveProc) switches() (int64, bool) {
	dir := fmt.Sprintf("/proc/%d/task", s.PID())
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "status"))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // the thread exited meanwhile
			}
			return 0, false
		}
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				c, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					return 0, false
				}
				n += c
			}
		}
	}
	return n, true
}

// stop ends the process by its PID: SIGTERM (serve drains), then SIGKILL.
func (s *serveProc) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// drained waits until the serve process owes no durable delivery
// (hookonce_pending_deliveries is 0 for every sender), for at most limit:
// a durable path's deliveries accepted in one round are otherwise still
// reaching the site in the next path's.
func (s *serveProc) drained(limit time.Duration) error {
	end := time.Now().Add(limit)
	for {
		n, err := s.metricSum("hookonce_pending_deliveries")
		if err != nil || n == 0 {
			return err
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s: %.0f durable deliveries still owed after %s", s.URL, n, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
