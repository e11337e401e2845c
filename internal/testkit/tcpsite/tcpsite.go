// Package tcpsite is a site at the TCP level for tests: a loopback
// listener whose handler reads and writes raw bytes (answers before the
// request is read, resets, stalls), counting connections.
package tcpsite

import (
	"bufio"
	"net"
	"sync/atomic"
	"testing"
)

// Start accepts connections on loopback and runs handle on each, until
// t ends; it counts the connections.
func Start(t *testing.T, handle func(c net.Conn, br *bufio.Reader)) (addr string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				handle(c, bufio.NewReader(c))
			}()
		}
	}()
	return ln.Addr().String(), conns
}
