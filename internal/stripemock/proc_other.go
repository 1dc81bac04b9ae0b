//go:build !linux

package stripemock

import "os/exec"

// setDeathSignal does nothing where the kernel offers no parent-death
// signal; t.Cleanup still kills stripe-mock.
func setDeathSignal(cmd *exec.Cmd) {}
