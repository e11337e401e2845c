//go:build benchcompare

package main

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestSwitches reads this test's own threads as the deploy table reads a
// serve process's, and refuses a process it cannot read rather than
// counting it as none.
func TestSwitches(t *testing.T) {
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: &exec.Cmd{Process: self}}
	n0, ok := p.switches()
	if !ok || n0 <= 0 {
		t.Fatalf("switches of this process = %d, %v; want a count", n0, ok)
	}
	time.Sleep(5 * time.Millisecond) // a sleep is a voluntary switch
	if n1, ok := p.switches(); !ok || n1 <= n0 {
		t.Fatalf("after a sleep, switches = %d, %v; want more than %d", n1, ok, n0)
	}

	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true(1):", err)
	}
	gone := &serveProc{cmd: cmd} // exited and reaped: its /proc entry is gone
	if n, ok := gone.switches(); ok {
		t.Fatalf("switches of an exited process = %d, true; want not counted", n)
	}
}
