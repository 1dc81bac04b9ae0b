package llm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/drivertest"
	"github.com/openplaybook/openplaybook/driver/internal/llm"
)

// Whatever order a Turn reads its signals in, one that says cut off
// counts over the others (contradictory stop signals count as cut off),
// then filtered, refused, malformed; the id and argument checks come
// after, and only for a reply with calls.
func TestCheckPrecedence(t *testing.T) {
	calls := []driver.Call{{ID: "a", Name: "t", Arguments: jsontext.Value(`{}`)}}
	tools := []driver.Tool{{Name: "t", InputSchema: jsontext.Value(`{"type":"object","required":["x"]}`)}}
	for _, tc := range []struct {
		name    string
		signals []llm.Signal
		calls   []driver.Call
		code    driver.ReplyCode
		want    string
	}{
		{"cut off last", []llm.Signal{{driver.ReplyMalformed, "m"}, {driver.ReplyRefused, "r"}, {driver.ReplyFiltered, "f"}, {driver.ReplyTruncated, "cut"}}, calls, driver.ReplyTruncated, "cut"},
		{"filtered over refused", []llm.Signal{{driver.ReplyRefused, "r"}, {driver.ReplyFiltered, "f"}}, calls, driver.ReplyFiltered, "f"},
		{"first of a code", []llm.Signal{{driver.ReplyMalformed, "m1"}, {driver.ReplyMalformed, "m2"}}, nil, driver.ReplyMalformed, "m1"},
		{"blank arguments", nil, []driver.Call{{ID: "a", Name: "t"}}, driver.ReplyMalformed, `tool call 1 ("t") has no arguments`},
		{"reused id", nil, []driver.Call{{ID: "old", Name: "t", Arguments: jsontext.Value(`{"x":1}`)}}, driver.ReplyMalformed, `the call_id "old" of tool call 1 was already used`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := llm.Check("p", llm.Reply{Stop: "s", Calls: tc.calls, Signals: tc.signals}, llm.IDs{"old": true}, tools, "call_id")
			var re *driver.ReplyError
			if !errors.As(err, &re) || re.Code != tc.code || !strings.Contains(re.Reason, tc.want) || re.StopReason != "s" {
				t.Errorf("Check = %v, want %s naming %q", err, tc.code, tc.want)
			}
		})
	}
	if err := llm.Check("p", llm.Reply{Calls: []driver.Call{{ID: "a", Name: "t", Arguments: jsontext.Value(`{"x":1}`)}}}, llm.IDs{}, tools, ""); err != nil {
		t.Errorf("a good reply: %v", err)
	}
}

// fakeTurn is a Turn that replays replies and logs what the loop did.
type fakeTurn struct {
	replies []llm.Reply
	log     []string
}

func (f *fakeTurn) Send(context.Context) (llm.Reply, error) {
	f.log = append(f.log, "send")
	if len(f.replies) == 0 {
		return llm.Reply{}, errors.New("no more replies")
	}
	r := f.replies[0]
	f.replies = f.replies[1:]
	return r, nil
}
func (f *fakeTurn) Accept(r llm.Reply) {
	f.log = append(f.log, fmt.Sprintf("accept %d raw=%v", len(r.Calls), r.Raw != nil))
}
func (f *fakeTurn) Answer(c driver.Call, res driver.Result) {
	f.log = append(f.log, "answer "+c.ID+" "+string(res.Content)+res.Error)
}
func (f *fakeTurn) EndTurn() { f.log = append(f.log, "end") }

// The loop replays a resumed step's calls first (under their wire
// names), records usage before it checks a reply, runs the calls of an
// accepted reply in order and none of a refused one, and returns the
// final text.
func TestLoopRun(t *testing.T) {
	u := &driver.Usage{InputTokens: 3}
	f := &fakeTurn{replies: []llm.Reply{
		{Calls: []driver.Call{{ID: "c1", Name: "t", Arguments: jsontext.Value(`{}`)}, {ID: "c2", Name: "t"}}, Usage: u, Raw: 1},
		{Text: "done", Usage: u},
	}}
	caller := &drivertest.Caller{Allowed: []string{"t"}}
	in := driver.StepInput{StepID: "s", Tools: []driver.Tool{{Name: "t"}},
		Made: []driver.MadeCall{{ID: "made_0", Name: "t", Arguments: jsontext.Value(`{}`), Result: driver.Result{Content: jsontext.Value(`1`)}}}}
	out, err := llm.Loop{Provider: "p", Model: "m"}.Run(context.Background(), in, caller, f)
	if err != nil || string(out) != `"done"` {
		t.Fatalf("Run = %s, %v", out, err)
	}
	want := []string{"accept 1 raw=false", "answer made_0 1", "end", "send", "accept 2 raw=true", `answer c1 {"ok":true}`, `answer c2 {"ok":true}`, "end", "send"}
	if strings.Join(f.log, "|") != strings.Join(want, "|") {
		t.Errorf("log\n%q\nwant\n%q", f.log, want)
	}
	if us := caller.Usages(); len(us) != 2 || us[0] != (driver.Usage{Provider: "p", Model: "m", Turn: 1, InputTokens: 3}) || us[1].Turn != 2 {
		t.Errorf("usage %+v", us)
	}

	// A reply that reuses a made call's id runs nothing; its usage is
	// recorded all the same.
	f = &fakeTurn{replies: []llm.Reply{{Calls: []driver.Call{{ID: "made_0", Name: "t"}}, Usage: u}}}
	caller = &drivertest.Caller{Allowed: []string{"t"}}
	_, err = llm.Loop{Provider: "p"}.Run(context.Background(), in, caller, f)
	var re *driver.ReplyError
	if !errors.As(err, &re) || len(caller.Calls()) != 0 || len(caller.Usages()) != 1 {
		t.Errorf("err = %v, %d calls, %d usages", err, len(caller.Calls()), len(caller.Usages()))
	}

	// The turn limit.
	f = &fakeTurn{replies: []llm.Reply{{Calls: []driver.Call{{ID: "a", Name: "t"}}}, {Calls: []driver.Call{{ID: "b", Name: "t"}}}}}
	_, err = llm.Loop{Provider: "p", MaxTurns: 2}.Run(context.Background(), driver.StepInput{StepID: "s"}, &drivertest.Caller{}, f)
	if !errors.Is(err, driver.ErrTurnLimit) || !strings.Contains(err.Error(), `p: step "s": `) || !strings.Contains(err.Error(), "(2 requests)") {
		t.Errorf("err = %v", err)
	}
}

// reasonTurn is a fakeTurn that also keeps the calls answered, with
// their Reasoning as the Turn saw it.
type reasonTurn struct {
	fakeTurn
	answered []driver.Call
}

func (f *reasonTurn) Answer(c driver.Call, res driver.Result) {
	f.answered = append(f.answered, c)
	f.fakeTurn.Answer(c, res)
}

// Each call the Caller gets carries its reply's text as Reasoning, or the
// last non-blank text of an earlier reply of the run when its reply has
// none (blank text does not count); a resumed step's made calls carry
// none, and a text is never carried from one run into the next.
func TestLoopRunReasoning(t *testing.T) {
	args := jsontext.Value(`{}`)
	f := &reasonTurn{fakeTurn: fakeTurn{replies: []llm.Reply{
		{Text: "I look the order up first.", Calls: []driver.Call{{ID: "c1", Name: "t", Arguments: args}, {ID: "c2", Name: "t", Arguments: args}}},
		{Text: " \n\t", Calls: []driver.Call{{ID: "c3", Name: "t", Arguments: args}}},
		{Text: "Charged twice, so I refund ch_2.", Calls: []driver.Call{{ID: "c4", Name: "t", Arguments: args}}},
		{Calls: []driver.Call{{ID: "c5", Name: "t", Arguments: args}}},
		{Text: "done"},
	}}}
	caller := &drivertest.Caller{Allowed: []string{"t"}}
	in := driver.StepInput{StepID: "s", Tools: []driver.Tool{{Name: "t"}},
		Made: []driver.MadeCall{{ID: "made_0", Name: "t", Arguments: args, Result: driver.Result{Content: jsontext.Value(`1`)}}}}
	if _, err := (llm.Loop{Provider: "p"}).Run(context.Background(), in, caller, f); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"c1": "I look the order up first.",
		"c2": "I look the order up first.",
		"c3": "I look the order up first.",
		"c4": "Charged twice, so I refund ch_2.",
		"c5": "Charged twice, so I refund ch_2.",
	}
	calls := caller.Calls()
	if len(calls) != len(want) {
		t.Fatalf("%d calls, want %d", len(calls), len(want))
	}
	for _, c := range calls {
		if c.Reasoning != want[c.ID] {
			t.Errorf("call %s: Reasoning %q, want %q", c.ID, c.Reasoning, want[c.ID])
		}
	}
	if len(f.answered) == 0 || f.answered[0].ID != "made_0" || f.answered[0].Reasoning != "" {
		t.Errorf("made call answered as %+v, want made_0 with no Reasoning", f.answered)
	}

	// A resumed step whose first reply has no text: its call has no
	// Reasoning (the made calls had none to carry).
	f = &reasonTurn{fakeTurn: fakeTurn{replies: []llm.Reply{{Calls: []driver.Call{{ID: "c1", Name: "t", Arguments: args}}}, {Text: "done"}}}}
	caller = &drivertest.Caller{Allowed: []string{"t"}}
	if _, err := (llm.Loop{Provider: "p"}).Run(context.Background(), in, caller, f); err != nil {
		t.Fatal(err)
	}
	if calls := caller.Calls(); len(calls) != 1 || calls[0].Reasoning != "" {
		t.Errorf("calls %+v, want one with no Reasoning", calls)
	}
}
