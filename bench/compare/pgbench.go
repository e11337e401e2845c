//go:build benchcompare

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// childCPU is the CPU time of this process's waited-for children.
func childCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var tpsRe = regexp.MustCompile(`tps = ([0-9.]+)`)

// runPgbench runs real pgbench with the floor's script (floorScript, in
// the file script): extended protocol with prepared statements (-M
// prepared, as hookonce's store sends them), conns clients, 2 threads, for
// d (whole seconds, at least 1), and reads every script run's latency (the
// two statements) from its per-transaction log. With rate > 0 it is an
// open loop (-R: that many runs a second, latency counted from when each
// was due, as pgbench does under -R). Its own CPU time (a child of this
// process) counts as load-generator CPU.
func runPgbench(bin, script string, port int, db string, conns int, rate float64, d time.Duration) sample {
	secs := max(int((d+time.Second/2)/time.Second), 1)
	logs := filepath.Join(filepath.Dir(script), fmt.Sprintf("log-%d", time.Now().UnixNano()))
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return sample{Errors: 1, FirstErr: err.Error()}
	}
	defer os.RemoveAll(logs)
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(conns), "-j", "2", "-T", strconv.Itoa(secs), "-f", script,
		"-l", "--log-prefix=" + filepath.Join(logs, "pgb"),
		"-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "postgres"}
	if rate > 0 {
		args = append(args, "-R", strconv.FormatFloat(rate, 'f', -1, 64))
	}
	cmd := exec.Command(bin, append(args, db)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// The server's CPU is not counted: pgbench's backends exit with it,
	// before /proc could be read.
	cpu0, ch0 := selfCPU(), childCPU()
	out, err := cmd.CombinedOutput()
	s := sample{SelfCPU: selfCPU() - cpu0 + childCPU() - ch0}
	if err != nil {
		s.Errors, s.FirstErr = 1, fmt.Sprintf("pgbench: %v: %s", err, errorLine(out))
		return s
	}
	m := tpsRe.FindSubmatch(out)
	if m == nil {
		s.Errors, s.FirstErr = 1, "no tps in pgbench output: "+lastLine(out)
		return s
	}
	tps, _ := strconv.ParseFloat(string(m[1]), 64)
	files, _ := filepath.Glob(filepath.Join(logs, "pgb*"))
	var all []time.Duration
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			// client_id transaction_no time(µs) script_no time_epoch time_us
			f := strings.Fields(sc.Text())
			if len(f) < 3 {
				continue
			}
			us, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				continue
			}
			all = append(all, time.Duration(us)*time.Microsecond)
		}
		fh.Close()
	}
	s.Requests = int64(len(all))
	if tps > 0 {
		s.Elapsed = time.Duration(float64(s.Requests) / tps * float64(time.Second))
	}
	s.P50, s.P99, s.P999 = percentiles(all)
	return s
}

// errorLine is pgbench's first error line, else its last line.
func errorLine(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "error") && !strings.Contains(l, "Run was aborted") {
			return strings.TrimSpace(l)
		}
	}
	return lastLine(b)
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// pgbenchBin finds pgbench: PATH, then next to the server binaries.
func pgbenchBin(serverBin string) (string, error) {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	p := filepath.Join(serverBin, "pgbench")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("pgbench not installed")
	}
	return p, nil
}
