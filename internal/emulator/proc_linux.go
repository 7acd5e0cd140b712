//go:build linux

package emulator

import "syscall"

// sysProcAttr puts the child in its own process group (so Stop can signal
// the whole group, and a terminal's Ctrl-C is not delivered to it directly)
// and asks the kernel to SIGKILL it if the parent dies, so a crashed or
// killed test binary does not leak the server.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func signalGroup(pid int, sig syscall.Signal) error {
	return syscall.Kill(-pid, sig)
}
