package mcphost

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the server in its own process group (so killing the
// group kills what it started) and has the kernel kill it if this process
// dies without closing it (a crash, a kill), so no server is orphaned.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
