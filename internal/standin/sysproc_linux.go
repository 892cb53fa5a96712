package standin

import "syscall"

// sysProcAttr makes a stand-in die with the test binary, so that a crashed
// or killed test leaves no process behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
