//go:build !linux

package standin

import "syscall"

// sysProcAttr: only Linux has a parent-death signal; elsewhere the cleanup
// of each test stops its processes.
func sysProcAttr() *syscall.SysProcAttr { return nil }
