package servetest

import "syscall"

// dieWithParent has the kernel kill the process when the test process
// dies, so a crashed test leaves no serve behind.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
