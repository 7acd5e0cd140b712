//go:build unix

package execstage

import (
	"os/exec"
	"syscall"
)

// killGroup runs cmd in its own process group and makes cancelling its
// context kill the whole group: the program and whatever it started (a
// shell's children, a pipeline), which would otherwise run on, orphaned,
// holding the output pipes.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
