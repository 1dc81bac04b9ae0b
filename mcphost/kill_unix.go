//go:build unix

package mcphost

import (
	"os/exec"
	"syscall"
)

// killGroup signals the server's process group: SIGKILL when hard, else
// SIGTERM. Errors (the group is gone) are ignored.
func killGroup(cmd *exec.Cmd, hard bool) {
	if cmd.Process == nil {
		return
	}
	sig := syscall.SIGTERM
	if hard {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	_ = cmd.Process.Signal(sig)
}
