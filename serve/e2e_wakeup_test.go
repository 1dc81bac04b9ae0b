package serve_test

import (
	"bytes"
	"context"
	encjson "encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/serve"
	"github.com/openplaybook/openplaybook/store"
)

// wakeupRuns is how many runs TestManyRunsEachWithItsAgent starts at
// once, and wakeupRounds how many times it does so.
const (
	wakeupRuns   = 100
	wakeupRounds = 3
)

// TestManyRunsEachWithItsAgent: 100 runs are created at once through the
// API, and each gets its agent (a go-sdk MCP client over streamable HTTP)
// as soon as its id is known, so that agents attach while their runs are
// being opened, are reaching their step, or have just found no agent and
// are about to wait for one. Every agent's first message after
// connecting is a call of the step's tool: it must run (no "no step is
// waiting" refusal), and every run must complete. The store must hold
// exactly one succeeded call per run. Repeated for a few rounds.
func TestManyRunsEachWithItsAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 100 runs at once")
	}
	r := newRig(t, "")
	ctx := context.Background()
	doc := readTestdata(t, "lookup.json")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4 * wakeupRuns
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}

	for round := range wakeupRounds {
		runs := make([]string, wakeupRuns)
		errs := make(chan string, wakeupRuns)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range wakeupRuns {
			wg.Go(func() {
				<-start
				run, msg := wakeupAgent(ctx, hc, r.ts.URL, doc, fmt.Sprintf("r%d-a%d", round, i))
				runs[i] = run
				if msg != "" {
					errs <- fmt.Sprintf("round %d, run %d (%s): %s", round, i, run, msg)
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		failed := 0
		for msg := range errs {
			if failed++; failed <= 5 {
				t.Error(msg)
			}
		}
		if failed > 0 {
			t.Fatalf("round %d: %d of %d agents failed", round, failed, wakeupRuns)
		}
		for _, run := range runs {
			r.waitStatus(run, "completed", "")
			calls, err := r.st.Calls(ctx, run, store.CallFilter{Step: "lookup"})
			if err != nil {
				t.Fatal(err)
			}
			if len(calls) != 1 || calls[0].State != store.CallSucceeded {
				t.Fatalf("round %d: run %s has %d calls of its step, want 1 succeeded: %+v", round, run, len(calls), calls)
			}
		}
	}
}

// wakeupAgent creates a run of doc over the API, issues its agent token,
// connects an agent, calls customer.get first and finishes the step. It
// returns the run's id and what went wrong ("" when nothing did).
func wakeupAgent(ctx context.Context, hc *http.Client, base string, doc []byte, name string) (string, string) {
	var started struct {
		Run string `json:"run"`
	}
	if msg := postJSON(ctx, hc, base+"/api/v1/runs", createBody(doc, `{"customerId":"cus_ada"}`), http.StatusCreated, &started); msg != "" {
		return "", "create: " + msg
	}
	var tok serve.IssuedToken
	if msg := postJSON(ctx, hc, base+"/api/v1/runs/"+started.Run+"/agent-token", []byte(`{"by":"wakeup-test"}`), http.StatusCreated, &tok); msg != "" {
		return started.Run, "agent token: " + msg
	}
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: tok.MCPURL, HTTPClient: &http.Client{Transport: bearer{tok.Token, hc.Transport}}}, nil)
	if err != nil {
		return started.Run, "connecting: " + err.Error()
	}
	defer cs.Close()
	t0 := time.Now()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "customer__get", Arguments: map[string]any{"customerId": "cus_ada"}})
	if err != nil {
		return started.Run, "first call: " + err.Error()
	}
	if text := resultText(res); res.IsError || !strings.Contains(text, "Ada Lovelace") {
		return started.Run, fmt.Sprintf("first call answered after %v (isError %v): %s", time.Since(t0).Round(time.Millisecond), res.IsError, text)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: serve.FinishTool, Arguments: map[string]any{"output": "found"}})
	if err != nil {
		return started.Run, "finish: " + err.Error()
	}
	if res.IsError {
		return started.Run, "finish answered: " + resultText(res)
	}
	return started.Run, ""
}

// postJSON posts body as the operator and decodes a want answer into out;
// it returns what went wrong ("" when nothing did).
func postJSON(ctx context.Context, hc *http.Client, url string, body []byte, want int, out any) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	res, err := hc.Do(req)
	if err != nil {
		return err.Error()
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err.Error()
	}
	if res.StatusCode != want {
		return fmt.Sprintf("%d, want %d: %s", res.StatusCode, want, b)
	}
	if err := encjson.Unmarshal(b, out); err != nil {
		return fmt.Sprintf("decoding %s: %v", b, err)
	}
	return ""
}

// TestManyRunsEachWithTwoAgents: 50 runs of two steps, each bound to
// another agent, are created at once; each run's two agents (a token
// each) connect as soon as the run exists. The researcher's first call
// runs; as soon as it has finished its step, the writer's first call
// (its step becoming ready at that moment) runs too, and every run
// completes with exactly one call of each step in the store.
func TestManyRunsEachWithTwoAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 50 runs at once")
	}
	const n = 50
	r := newRig(t, "")
	ctx := context.Background()
	doc := readTestdata(t, "two-agents.json")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4 * n
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	for round := range 2 {
		runs := make([]string, n)
		errs := make(chan string, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				run, msg := twoAgents(ctx, hc, r.ts.URL, doc)
				runs[i] = run
				if msg != "" {
					errs <- fmt.Sprintf("round %d, run %d (%s): %s", round, i, run, msg)
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		failed := 0
		for msg := range errs {
			if failed++; failed <= 5 {
				t.Error(msg)
			}
		}
		if failed > 0 {
			t.Fatalf("round %d: %d of %d runs failed", round, failed, n)
		}
		for _, run := range runs {
			r.waitStatus(run, "completed", "")
			for step, tool := range map[string]string{"research": "customer.get", "write": "note.add"} {
				calls, err := r.st.Calls(ctx, run, store.CallFilter{Step: step})
				if err != nil {
					t.Fatal(err)
				}
				if len(calls) != 1 || calls[0].Tool != tool || calls[0].State != store.CallSucceeded {
					t.Fatalf("round %d: run %s step %s has %+v, want one succeeded %s", round, run, step, calls, tool)
				}
			}
		}
	}
}

// twoAgents creates a run of doc (two-agents.json), connects its writer
// and its researcher, and has each make its step's call first and finish.
func twoAgents(ctx context.Context, hc *http.Client, base string, doc []byte) (string, string) {
	var started struct {
		Run string `json:"run"`
	}
	if msg := postJSON(ctx, hc, base+"/api/v1/runs", createBody(doc, `{"customerId":"cus_ada"}`), http.StatusCreated, &started); msg != "" {
		return "", "create: " + msg
	}
	run := started.Run
	sessions := map[string]*mcp.ClientSession{}
	for _, agent := range []string{"writer", "researcher"} {
		var tok serve.IssuedToken
		if msg := postJSON(ctx, hc, base+"/api/v1/runs/"+run+"/agent-token", []byte(`{"by":"wakeup-test","agent":"`+agent+`"}`), http.StatusCreated, &tok); msg != "" {
			return run, agent + " token: " + msg
		}
		c := mcp.NewClient(&mcp.Implementation{Name: agent, Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: tok.MCPURL, HTTPClient: &http.Client{Transport: bearer{tok.Token, hc.Transport}}}, nil)
		if err != nil {
			return run, agent + " connecting: " + err.Error()
		}
		defer cs.Close()
		sessions[agent] = cs
	}
	for _, c := range []struct{ agent, tool, args, want string }{
		{"researcher", "customer__get", `{"customerId":"cus_ada"}`, "Ada Lovelace"},
		{"writer", "note__add", `{"customerId":"cus_ada","body":"written"}`, ""},
	} {
		var args map[string]any
		_ = encjson.Unmarshal([]byte(c.args), &args)
		t0 := time.Now()
		res, err := sessions[c.agent].CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: args})
		if err != nil {
			return run, c.agent + "'s first call: " + err.Error()
		}
		if text := resultText(res); res.IsError || !strings.Contains(text, c.want) {
			return run, fmt.Sprintf("%s's first call answered after %v (isError %v): %s", c.agent, time.Since(t0).Round(time.Millisecond), res.IsError, text)
		}
		res, err = sessions[c.agent].CallTool(ctx, &mcp.CallToolParams{Name: serve.FinishTool, Arguments: map[string]any{"output": c.agent + " done"}})
		if err != nil || res.IsError {
			return run, fmt.Sprintf("%s's finish: %v %v", c.agent, err, res)
		}
	}
	return run, ""
}
