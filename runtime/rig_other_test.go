//go:build !linux

package runtime_test

import "os/exec"

// stripeShareable: without a parent-death signal a shared stripe-mock
// would outlive the test binary, so each test starts its own.
const stripeShareable = false

func stripeProcAttr(*exec.Cmd) {}
