// Package drivertest provides a [driver.Caller] for testing drivers: it
// allows a fixed list of tool names, compared byte for byte as the
// runtime compares them, refuses every other name and arguments that are
// not one JSON value, and records each call, each call that ran and each
// model turn's usage.
package drivertest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
)

// Caller is a [driver.Caller] for tests. The zero value refuses every
// call. It is safe for concurrent use.
type Caller struct {
	// Allowed are the tool names that run, compared byte for byte.
	Allowed []string
	// Results holds the result of an allowed tool by name. An allowed
	// tool with no entry returns {"ok":true}.
	Results map[string]driver.Result
	// Err, when not nil, is returned by the call numbered ErrAt (1-based;
	// 0 means the first), after it is recorded, as a runtime error that
	// stops the step (driver.ErrSuspended, driver.ErrCallLimit).
	Err   error
	ErrAt int

	// OnCall, when set, is called with each call before it is answered
	// (without the Caller's lock): a test can let time pass there.
	OnCall func(c driver.Call)

	mu     sync.Mutex
	calls  []driver.Call
	ran    []driver.Call
	usages []driver.Usage
}

// Refusal returns the error text the Caller gives the agent for a name it
// does not allow.
func Refusal(name string) string {
	return fmt.Sprintf("tool %q is not allowed in this step", name)
}

// Call records c and answers it.
func (k *Caller) Call(ctx context.Context, c driver.Call) (driver.Result, error) {
	if k.OnCall != nil {
		k.OnCall(c)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	c.Arguments = slices.Clone(c.Arguments)
	k.calls = append(k.calls, c)
	if k.Err != nil && len(k.calls) == max(k.ErrAt, 1) {
		return driver.Result{}, k.Err
	}
	if !slices.Contains(k.Allowed, c.Name) {
		return driver.Result{Error: Refusal(c.Name)}, nil
	}
	if len(bytes.TrimSpace(c.Arguments)) > 0 && !jsontext.Value(c.Arguments).IsValid() {
		// As the runtime: blank arguments are {}; any others must be
		// exactly one complete JSON value.
		return driver.Result{Error: "the arguments are not valid JSON"}, nil
	}
	k.ran = append(k.ran, c)
	if r, ok := k.Results[c.Name]; ok {
		return r, nil
	}
	return driver.Result{Content: jsontext.Value(`{"ok":true}`)}, nil
}

// Calls returns the calls made so far, in order.
func (k *Caller) Calls() []driver.Call {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.calls)
}

// Ran returns the calls that ran so far, in order: those the Caller let
// through to the tool (an allowed name, arguments that are blank or
// exactly one JSON value), as the runtime would; refused calls are not among them.
func (k *Caller) Ran() []driver.Call {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.ran)
}

// RecordUsage records u: the Caller is a [driver.UsageRecorder].
func (k *Caller) RecordUsage(_ context.Context, u driver.Usage) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.usages = append(k.usages, u)
	return nil
}

// Usages returns the usage recorded so far, in order.
func (k *Caller) Usages() []driver.Usage {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.usages)
}

var (
	_ driver.Caller        = (*Caller)(nil)
	_ driver.UsageRecorder = (*Caller)(nil)
)
