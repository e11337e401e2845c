package redistest

import (
	"fmt"
	"os/exec"
)

// StartServer runs a fresh redis-server on loopback with its files in dir,
// for programs that have no testing.TB (the bench/compare command). Extra
// arguments are appended to the command line. The caller must Close it.
func StartServer(dir string, extra ...string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redistest: redis-server not found: %w", err)
	}
	return start(bin, dir, extra...)
}
