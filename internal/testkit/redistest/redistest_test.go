package redistest_test

import (
	"net"
	"testing"
	"time"

	"github.com/hookonce/hookonce/internal/testkit/redistest"
)

func TestStopAndStartKeepThePort(t *testing.T) {
	s := redistest.Start(t)
	if got := s.Do(t, "SET", "k", "v"); got != "+OK" {
		t.Fatalf("SET = %q", got)
	}
	pid := s.PID()
	s.Stop(t)
	if c, err := net.DialTimeout("tcp", s.Addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after Stop", s.Addr)
	}
	s.Start(t)
	if s.PID() == pid || s.PID() == 0 {
		t.Fatalf("pid after restart = %d (before %d)", s.PID(), pid)
	}
	// No persistence: the restarted server is empty.
	if got := s.Do(t, "EXISTS", "k"); got != ":0" {
		t.Fatalf("EXISTS k after restart = %q, want :0", got)
	}
}

func TestSharedIsReused(t *testing.T) {
	a, b := redistest.Shared(t), redistest.Shared(t)
	if a != b || a.PID() == 0 {
		t.Fatalf("Shared returned %p and %p (pid %d)", a, b, a.PID())
	}
	a.FlushAll(t)
}

func TestMain(m *testing.M) { redistest.Main(m) }

func TestMissingBinarySkipsOutsideCI(t *testing.T) {
	reached := false
	t.Run("no redis-server", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir()) // an empty directory: nothing to find
		t.Setenv("CI", "")
		redistest.Binary(t)
		reached = true
	})
	if reached {
		t.Fatal("Binary returned although redis-server is not in PATH")
	}
}
