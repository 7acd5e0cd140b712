//go:build unix && !linux

package emulator

import "syscall"

// sysProcAttr puts the child in its own process group so Stop can signal the
// whole group. (There is no parent-death signal outside Linux: a test binary
// that crashes without calling Stop leaks the server there.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func signalGroup(pid int, sig syscall.Signal) error {
	return syscall.Kill(-pid, sig)
}
