package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/testenv"
	"github.com/jackc/pgx/v5/pgconn"
)

// Link is a TCP relay on 127.0.0.1 that stands for the network between a
// standby and its primary. Stall stops it moving bytes (both ways: the
// standby's acknowledgements wait too), Resume lets them move again, and
// Cut closes every connection it carries, dropping what it holds: what the
// primary sent while the link was stalled never reaches the standby, as
// when a stalled link dies with the primary. (Pausing the standby itself
// would not do: WAL already in its socket buffer is read when it resumes.)
type Link struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cond    *sync.Cond
	stalled bool
	cut     bool // Cut ran; connections accepted since are closed at once
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// NewLink relays 127.0.0.1:<Port()> to target (host:port). Close it.
func NewLink(target string) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("pgtest: link: %w", err)
	}
	l := &Link{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	l.cond = sync.NewCond(&l.mu)
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// Port is the link's port on 127.0.0.1.
func (l *Link) Port() int { return l.ln.Addr().(*net.TCPAddr).Port }

func (l *Link) accept() {
	defer l.wg.Done()
	for {
		in, err := l.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.DialTimeout("tcp", l.target, 2*time.Second)
		if err != nil {
			in.Close()
			continue
		}
		l.mu.Lock()
		l.conns[in], l.conns[out] = struct{}{}, struct{}{}
		l.mu.Unlock()
		l.wg.Add(2)
		go l.pipe(out, in)
		go l.pipe(in, out)
	}
}

// pipe copies src to dst, holding each chunk while the link is stalled.
func (l *Link) pipe(dst, src net.Conn) {
	defer l.wg.Done()
	defer func() {
		dst.Close()
		src.Close()
		l.mu.Lock()
		delete(l.conns, dst)
		delete(l.conns, src)
		l.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			l.mu.Lock()
			for l.stalled && !l.cut {
				l.cond.Wait()
			}
			dropped := l.cut
			l.mu.Unlock()
			if dropped {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // io.EOF or a closed connection alike
		}
	}
}

// Stall stops the link moving bytes; connections stay open.
func (l *Link) Stall() {
	l.mu.Lock()
	l.stalled = true
	l.mu.Unlock()
}

// Resume undoes Stall.
func (l *Link) Resume() {
	l.mu.Lock()
	l.stalled = false
	l.cond.Broadcast()
	l.mu.Unlock()
}

// Cut closes every connection the link carries, discarding the bytes it
// holds, and lets new connections through again (not stalled).
func (l *Link) Cut() {
	l.mu.Lock()
	l.cut = true
	for c := range l.conns {
		c.Close()
	}
	l.cond.Broadcast()
	l.mu.Unlock()
	// The pipes see the closed connections and end; then the link is
	// usable again.
	for {
		l.mu.Lock()
		n := len(l.conns)
		if n == 0 {
			l.cut, l.stalled = false, false
		}
		l.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Close stops the link and closes its connections.
func (l *Link) Close() error {
	err := l.ln.Close()
	l.Cut()
	l.wg.Wait()
	return err
}

// StartStandby makes a streaming standby of primary, pg_basebackup -R run
// as the unprivileged user through a Link (the standby's primary_conninfo
// names the link), and starts it on a port of its own. It is a hot standby
// (it answers reads; target_session_attrs=read-write refuses it) until
// Promote. Both are closed when the test ends. The primary's settings
// (Options) are the standby's; synchronous replication is the primary's
// SetSynchronousStandbys, made after this.
func StartStandby(t testing.TB, primary *Server) (*Server, *Link) {
	t.Helper()
	skipWithoutBinaries(t)
	if _, err := os.Stat(filepath.Join(primary.bin, "pg_basebackup")); err != nil {
		testenv.Missing(t, "pgtest: pg_basebackup not found beside postgres in "+primary.bin, "apt-get install postgresql")
	}
	link, err := NewLink(net.JoinHostPort("127.0.0.1", strconv.Itoa(primary.Port())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	sb, err := newStandby(primary, link)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb, link
}

func newStandby(primary *Server, link *Link) (*Server, error) {
	dir, err := os.MkdirTemp("", "pgtest-standby-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: temp dir: %w", err)
	}
	s := &Server{bin: primary.bin, dir: dir, data: filepath.Join(dir, "data"), opts: primary.opts, cred: primary.cred}
	if s.cred != nil {
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: chown %s: %w", dir, err)
		}
	}
	// -c fast: no waiting for a spread checkpoint. -R writes standby.signal
	// and a primary_conninfo naming the link.
	cmd := s.command("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(link.Port()), "-U", "postgres",
		"-D", s.data, "-R", "-X", "stream", "-c", "fast", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: pg_basebackup: %w\n%s", err, out)
	}
	if err := s.startOnFreePort(); err != nil {
		return nil, err
	}
	return s, nil
}

// exec runs one statement as postgres on database postgres.
func (s *Server) exec(ctx context.Context, sql string) ([]*pgconn.Result, error) {
	c, err := pgconn.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return nil, fmt.Errorf("pgtest: connect: %w", err)
	}
	defer c.Close(context.Background())
	res, err := c.Exec(ctx, sql).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("pgtest: %s: %w", sql, err)
	}
	return res, nil
}

// SetSynchronousStandbys sets synchronous_standby_names on this (primary)
// server (ALTER SYSTEM, so that it lasts across Stop and Start, and is not
// carried to a standby made before) and waits, up to 30s, until as many
// standbys stream synchronously as want says (0: none waited for).
func (s *Server) SetSynchronousStandbys(names string, want int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.exec(ctx, `ALTER SYSTEM SET synchronous_standby_names = '`+names+`'`); err != nil {
		return err
	}
	if _, err := s.exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		return err
	}
	for {
		res, err := s.exec(ctx, `SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')`)
		if err == nil && len(res) == 1 && len(res[0].Rows) == 1 {
			if n, _ := strconv.Atoi(string(res[0].Rows[0][0])); n >= want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgtest: %d synchronous standbys not streaming after 30s (last error %v)", want, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Kill kills the postmaster and every process it started with SIGKILL
// (kill -9: no shutdown, nothing more sent to a standby). The data
// directory is kept; Start would run crash recovery.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	pid := s.cmd.Process.Pid
	kids := children(pid) // before the postmaster dies and they are reparented
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for _, c := range kids {
		_ = syscall.Kill(c, syscall.SIGKILL)
		_ = syscall.Kill(c, syscall.SIGCONT)
	}
	_ = syscall.Kill(pid, syscall.SIGCONT)
	<-s.done
	s.cmd = nil
	return nil
}

// Promote ends a standby's recovery (pg_promote) and waits until it takes
// writes.
func (s *Server) Promote() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.exec(ctx, `SELECT pg_promote(true, 50)`)
	if err != nil {
		return err
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) != "t" {
		return fmt.Errorf("pgtest: pg_promote did not finish:\n%s", s.logTail())
	}
	return nil
}
