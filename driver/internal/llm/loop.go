package llm

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
)

// Turn is one provider's half of a step's conversation: it builds the
// requests and reads the replies of one run of a step, and nothing else.
// The step's loop ([Loop.Run]) is shared by every model driver: the turn
// limit, the deadline, usage, the checks of a reply, the replay of a
// resumed step's calls and the calls themselves are made there, once.
//
// A Turn is used by one run of one step; its methods are called in this
// order: for a resumed step, Accept, Answer for each made call, EndTurn;
// then for each request Send, and for an accepted reply with calls
// Accept, Answer for each call, in order, and EndTurn.
type Turn interface {
	// Send sends the conversation so far and reads the reply. An error is
	// the request's (an API error, a timeout, a stream that is no stream;
	// see each driver), returned as it is; a Reply with Usage may come
	// with it (the response arrived, and is not usable).
	Send(ctx context.Context) (Reply, error)
	// Accept appends an accepted reply with calls to the conversation, as
	// what was decided: each call's arguments in canonical form
	// ([CanonicalArgs]) under its name as sent (Reply.Wires). A resumed
	// step's calls come as a Reply of [Made] (no Raw).
	Accept(r Reply)
	// Answer appends the answer to call c of the accepted reply.
	Answer(c driver.Call, res driver.Result)
	// EndTurn ends the answers of a reply (a message that carries them,
	// images that follow them).
	EndTurn()
}

// Reply is what a [Turn] read of one reply.
type Reply struct {
	// Stop is the provider's stop signal as it sent it (a finish_reason,
	// a stop_reason, a status), for [driver.ReplyError].StopReason.
	Stop string
	// Calls are the reply's tool calls as the Caller gets them (names
	// mapped back with [driver.SpecName], arguments as sent); Wires their
	// names as sent, by index.
	Calls []driver.Call
	Wires []string
	// Text is the reply's text: the step's output when it has no calls.
	Text string
	// Signals are what the reply's stop signals and shape say against
	// running it: one for each, as the Turn read them. Several may
	// contradict each other; [Check] picks the one that counts.
	Signals []Signal
	// Usage is the response's usage (Provider, Model and Turn are set by
	// the loop); nil when the server reported none.
	Usage *driver.Usage
	// Raw is the provider's message, for its Turn's Accept; nil for a
	// resumed step's calls.
	Raw any
}

// Signal is one reason a reply may not run: its code and why.
type Signal struct {
	Code   driver.ReplyCode
	Reason string
}

// Refuse adds a signal with code and reason to r.
func (r *Reply) Refuse(code driver.ReplyCode, reason string) {
	r.Signals = append(r.Signals, Signal{Code: code, Reason: reason})
}

// precedence is the order in which signals count: contradictory stop
// signals count as cut off when one of them says so (a half-written call
// is never run), then filtered, refused and malformed.
var precedence = []driver.ReplyCode{driver.ReplyTruncated, driver.ReplyFiltered, driver.ReplyRefused, driver.ReplyMalformed}

// Check returns the *[driver.ReplyError] of a reply that may not run, or
// nil (docs/drivers.md, "Stop reasons"). The reply is refused whole, none
// of its calls reaching the Caller, when any of its Signals says so: the
// first signal of the first code in the order reply-truncated,
// reply-filtered, reply-refused, reply-malformed counts. A reply with
// calls is also malformed when a call's id is missing, given twice, or
// one of an earlier turn (seen, [IDs.Check]; idName names the id in the
// reason: "id", "call_id"), or when its arguments are blank while its
// tool needs some ([Unfilled]; tools are the step's).
func Check(provider string, r Reply, seen IDs, tools []driver.Tool, idName string) error {
	refuse := func(code driver.ReplyCode, reason string) error {
		return Refused(provider, code, r.Stop, reason, r.Calls)
	}
	for _, code := range precedence {
		for _, s := range r.Signals {
			if s.Code == code {
				return refuse(code, s.Reason)
			}
		}
	}
	if len(r.Calls) == 0 {
		return nil
	}
	if why := seen.Check(r.Calls); why != "" {
		if idName != "" && idName != "id" {
			why = strings.ReplaceAll(why, "the id ", "the "+idName+" ")
		}
		return refuse(driver.ReplyMalformed, why)
	}
	if why := Unfilled(r.Calls, tools); why != "" {
		return refuse(driver.ReplyMalformed, why)
	}
	return nil
}

// Made returns the calls a resumed step already made as a [Reply] (each
// under the wire name of its tool), for the loop to replay to the Turn
// before the first request (docs/drivers.md, "Resumed steps").
func Made(made []driver.MadeCall) Reply {
	r := Reply{Calls: MadeCalls(made), Wires: make([]string, len(made))}
	for i, m := range made {
		r.Wires[i] = driver.WireName(m.Name)
	}
	return r
}

// Loop is a model driver's step loop, shared by every model driver: the
// settings it runs under. See [Loop.Run].
type Loop struct {
	// Provider and Model name the driver and the model, for usage and
	// errors.
	Provider, Model string
	// MaxTurns is the configured turn limit (see [MaxTurns]).
	MaxTurns int
	// StepTimeout is the whole-step deadline (none when <= 0) and Now
	// its clock (time.Now when nil); see [StartStep].
	StepTimeout time.Duration
	Now         func() time.Time
	// Binding is where the agent is bound ("harness.yaml:12"), for
	// errors.
	Binding string
	// IDName is what the provider calls a call's id in errors ("id" when
	// empty; "call_id").
	IDName string
}

// Run runs one step's conversation with t: it replays a resumed step's
// calls (in.Made), then sends, checks each reply ([Check]) and passes its
// calls, in order, to caller, until a reply has no call: its text, as a
// JSON string, is the output.
//
// It returns caller's error unchanged, ctx's error, an error wrapping
// [driver.ErrTurnLimit] after the turn limit, an error wrapping
// [driver.ErrStepTimeout] when the step runs out of its deadline (no
// request and no call starts after it; a call running then runs to its
// end, with ctx, not the step's context), t.Send's error, and the
// *[driver.ReplyError] of a refused reply, none of whose calls ran. When
// caller is a [driver.UsageRecorder], each reply's usage goes to it
// before the reply is acted on. Each call passed to caller carries the
// reply's text as its Reasoning, or the last non-blank text of an earlier
// reply of this run when the reply has none ([driver.Call].Reasoning).
func (l Loop) Run(ctx context.Context, in driver.StepInput, caller driver.Caller, t Turn) (jsontext.Value, error) {
	step, reqCtx, cancel := StartStep(ctx, l.Provider, in.StepID, l.StepTimeout, l.Binding, l.Now)
	defer cancel()
	rec, _ := caller.(driver.UsageRecorder)
	turns := MaxTurns(l.MaxTurns, in)
	seen := IDs{}
	// said is the last non-blank text of a reply of this run, each call's
	// Reasoning: a resumed step's made calls carry none.
	said := ""
	if len(in.Made) > 0 {
		made := Made(in.Made)
		t.Accept(made)
		for i, m := range in.Made {
			t.Answer(made.Calls[i], m.Result)
		}
		t.EndTurn()
		seen.Add(made.Calls)
	}
	for turn := 1; turn <= turns; turn++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := step.Check(); err != nil {
			return nil, err
		}
		r, err := t.Send(reqCtx)
		if rec != nil && r.Usage != nil {
			u := *r.Usage
			u.Provider, u.Model, u.Turn = l.Provider, l.Model, turn
			if uerr := rec.RecordUsage(ctx, u); uerr != nil {
				return nil, uerr
			}
		}
		if err != nil {
			if serr := step.Ended(reqCtx); serr != nil && ctx.Err() == nil {
				return nil, serr
			}
			return nil, err
		}
		if rerr := Check(l.Provider, r, seen, in.Tools, l.IDName); rerr != nil {
			return nil, rerr
		}
		if len(r.Calls) == 0 {
			return Output(r.Text)
		}
		if strings.TrimSpace(r.Text) != "" {
			said = r.Text
		}
		seen.Add(r.Calls)
		t.Accept(r)
		for _, c := range r.Calls {
			if err := step.Check(); err != nil {
				return nil, err
			}
			c.Reasoning = said
			res, err := caller.Call(ctx, c)
			if err != nil {
				return nil, err
			}
			t.Answer(c, res)
		}
		t.EndTurn()
	}
	return nil, fmt.Errorf("%s: step %q: %w (%d requests)", l.Provider, in.StepID, driver.ErrTurnLimit, turns)
}
