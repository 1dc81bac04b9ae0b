package runtime_test

import (
	"os/exec"
	"syscall"
)

// stripeShareable: one stripe-mock serves every test of the package; the
// kernel kills it when the test binary exits (stripeProcAttr).
const stripeShareable = true

// stripeProcAttr makes the kernel kill the shared stripe-mock when the
// test binary dies, so no orphan keeps its ports.
func stripeProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
