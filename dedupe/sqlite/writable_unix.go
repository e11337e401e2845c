//go:build unix

package sqlite

import "golang.org/x/sys/unix"

// writable reports why this process may not write path, if it may not
// (permissions, a read-only file system).
func writable(path string) error {
	return unix.Access(path, unix.W_OK)
}
