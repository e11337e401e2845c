//go:build !linux

package servetest

import "syscall"

func dieWithParent(*syscall.SysProcAttr) {}
