//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package oneshot

import (
	"net"
	"syscall"
)

// quiet reports whether nothing waits to be read on c: no byte and no end
// of stream. It peeks at the socket without blocking and takes nothing
// from it. A connection it cannot look into is not quiet.
func quiet(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var buf [1]byte
	empty := false
	err = rc.Read(func(fd uintptr) bool {
		_, _, perr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		empty = perr == syscall.EAGAIN || perr == syscall.EWOULDBLOCK
		return true // never wait for the socket to become readable
	})
	return err == nil && empty
}
