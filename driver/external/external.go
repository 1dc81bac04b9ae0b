// Package external is the driver of agents that are not in this process:
// an MCP client (Claude Code, Cursor, the MCP inspector, any other) that
// connects to a run and acts as the agent of the run's executing step.
// A harness binds such an agent with `driver: mcp`.
//
// An [Exchange] is the meeting point. The runtime runs a step bound to
// driver "mcp" through [Exchange.Driver]: when no agent is attached to the
// run, RunStep returns [driver.ErrAwaitAgent] at once and the run waits
// for its agent; with one attached, the step is published and RunStep
// waits until the agent finishes it ([Step.Finish]). The server that
// speaks MCP to the agent (package serve) attaches sessions with
// [Exchange.Attach], finds the executing step with [Exchange.Current],
// and passes every tool call to [Step.Call], which is the runtime's one
// decision path ([runtime.Caller]). Nothing here decides a call.
package external

import (
	"context"
	"errors"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
)

// Name is the driver name a harness binds external agents with.
const Name = "mcp"

// CheckSettings checks an agent binding of driver "mcp": it takes no
// settings.
func CheckSettings(settings map[string]any) error {
	for k := range settings {
		return errors.New("driver \"mcp\" takes no settings; remove \"" + k + "\" (the agent is the MCP client that connects to the run: see docs/serve.md)")
	}
	return nil
}

// ErrStepEnded is what [Step.Call] and [Step.Finish] return once the step
// has ended (finished, failed, or stopped by the run).
var ErrStepEnded = errors.New("the step has ended; its tools are no longer offered")

// Exchange pairs runs' executing steps with the agent sessions attached to
// them. It is safe for concurrent use. The zero value is not usable; use
// [New].
type Exchange struct {
	mu   sync.Mutex
	runs map[string]*runState
}

type runState struct {
	agents  int
	step    *Step
	changed chan struct{} // closed (and replaced) when step changes
}

// New returns an empty Exchange.
func New() *Exchange { return &Exchange{runs: map[string]*runState{}} }

func (x *Exchange) state(run string) *runState {
	rs := x.runs[run]
	if rs == nil {
		rs = &runState{changed: make(chan struct{})}
		x.runs[run] = rs
	}
	return rs
}

func (rs *runState) notify() {
	close(rs.changed)
	rs.changed = make(chan struct{})
}

// Attach records that an agent session serves run, and returns what
// detaches it (idempotent). While at least one is attached, a step of the
// run bound to driver "mcp" is published instead of waiting.
func (x *Exchange) Attach(run string) (detach func()) {
	x.mu.Lock()
	rs := x.state(run)
	rs.agents++
	x.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			x.mu.Lock()
			defer x.mu.Unlock()
			rs.agents--
			if rs.agents == 0 && rs.step == nil {
				delete(x.runs, run)
			}
		})
	}
}

// Attached reports how many agent sessions serve run.
func (x *Exchange) Attached(run string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	if rs := x.runs[run]; rs != nil {
		return rs.agents
	}
	return 0
}

// Current returns the run's executing step bound to driver "mcp" (nil
// when none is: between steps, at a gate, or before the run reached one)
// and a channel closed when that changes.
func (x *Exchange) Current(run string) (*Step, <-chan struct{}) {
	x.mu.Lock()
	defer x.mu.Unlock()
	rs := x.state(run)
	return rs.step, rs.changed
}

// Driver returns the driver of agents bound to driver "mcp".
func (x *Exchange) Driver() driver.Driver { return exchangeDriver{x} }

type exchangeDriver struct{ x *Exchange }

// RunStep publishes the step to the run's attached agents and waits for
// one of them to finish it. With none attached it returns
// [driver.ErrAwaitAgent]; so it does when ctx ends (the server stops):
// the step then waits for its agent again.
func (d exchangeDriver) RunStep(ctx context.Context, in driver.StepInput, caller driver.Caller) (jsontext.Value, error) {
	x := d.x
	x.mu.Lock()
	rs := x.runs[in.RunID]
	if rs == nil || rs.agents == 0 {
		x.mu.Unlock()
		return nil, driver.ErrAwaitAgent
	}
	st := &Step{In: in, caller: caller, done: make(chan struct{})}
	rs.step = st
	rs.notify()
	x.mu.Unlock()

	var out jsontext.Value
	var err error
	select {
	case <-st.done:
		out, err = st.output, st.err
	case <-ctx.Done():
		st.end(nil, driver.ErrAwaitAgent)
		out, err = st.output, st.err
	}
	// No call is in flight past here: end waits for the call lock.
	st.mu.Lock()
	st.mu.Unlock()

	x.mu.Lock()
	if rs.step == st {
		rs.step = nil
		rs.notify()
	}
	if rs.agents == 0 && rs.step == nil {
		delete(x.runs, in.RunID)
	}
	x.mu.Unlock()
	return out, err
}

// Continuing reports that an external agent keeps its own state across
// a resume of its step ([driver.Continuing]): it is not run again from
// the start.
func (exchangeDriver) Continuing() bool { return true }

// Absent is the driver of agents bound to driver "mcp" in a process that
// serves none: every step returns [driver.ErrAwaitAgent], so the run waits
// for its agent until a server resumes it.
type Absent struct{}

// RunStep returns [driver.ErrAwaitAgent].
func (Absent) RunStep(context.Context, driver.StepInput, driver.Caller) (jsontext.Value, error) {
	return nil, driver.ErrAwaitAgent
}

// Step is a run's executing step as its external agent sees it.
type Step struct {
	// In is what the agent is shown: purpose, input, earlier outputs and
	// the allowed tools.
	In driver.StepInput

	// mu is held shared by every call in flight and exclusively by Finish
	// and by the end of RunStep, which so wait for those calls.
	mu     sync.RWMutex
	caller driver.Caller

	once   sync.Once
	done   chan struct{}
	output jsontext.Value
	err    error
}

// Done is closed when the step has ended.
func (s *Step) Done() <-chan struct{} { return s.done }

func (s *Step) end(out jsontext.Value, err error) {
	s.once.Do(func() {
		s.output, s.err = out, err
		close(s.done)
	})
}

func (s *Step) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Call passes one call of the agent to the runtime's decision path. Calls
// may be made concurrently (the runtime's Caller decides them one at a
// time and lets their tools execute concurrently). It returns what the
// agent is to be answered; its error is [ErrStepEnded] when the step had
// already ended, [driver.ErrSuspended] when the call waits for a person
// (ask again, with the same name and arguments, to learn the decision),
// and otherwise an error that ended the step ([driver.ErrCallLimit], a
// store failure), which the runtime also sees.
func (s *Step) Call(ctx context.Context, c driver.Call) (driver.Result, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.ended() {
		return driver.Result{}, ErrStepEnded
	}
	res, err := s.caller.Call(ctx, c)
	if err != nil && !errors.Is(err, driver.ErrSuspended) {
		s.end(nil, err)
	}
	return res, err
}

// Finish ends the step with output as its output (any JSON value). It
// returns [ErrStepEnded] when the step had already ended.
func (s *Step) Finish(output jsontext.Value) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended() {
		return ErrStepEnded
	}
	if len(output) == 0 {
		output = jsontext.Value("null")
	}
	s.end(output, nil)
	return nil
}
