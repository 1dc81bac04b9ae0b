package stripemock

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill stripe-mock when the test binary
// dies without running its cleanups (a test timeout, a kill), so no
// orphan keeps its ports.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
