//go:build unix && !linux

package mcphost

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the server in its own process group, so killing the
// group kills what it started.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
