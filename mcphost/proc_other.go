//go:build !unix

package mcphost

import "os/exec"

// setProcAttr does nothing where there are no process groups; Close and
// failures still kill the server process itself.
func setProcAttr(cmd *exec.Cmd) {}

// killGroup kills the server process (there is no gentler signal to send
// here, so both kinds kill).
func killGroup(cmd *exec.Cmd, hard bool) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
