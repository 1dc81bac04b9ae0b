package cli

import (
	"runtime/debug"
	"testing"
)

// The commands that make calls raise the GC percentage only when GOGC is
// not set, and then to gcPercentForCalls.
func TestGCForCalls(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	debug.SetGCPercent(100)
	gcForCalls()
	if got := debug.SetGCPercent(100); got != gcPercentForCalls {
		t.Errorf("GOGC unset: GC percent %d, want %d", got, gcPercentForCalls)
	}
	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	gcForCalls()
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("GOGC=150: GC percent %d, want 150 (the user's)", got)
	}
}
