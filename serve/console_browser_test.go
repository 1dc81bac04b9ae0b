package serve_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	cdppage "github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/internal/stripemock"
)

// chromiumPath is where Debian's chromium package installs the browser
// (.ci/run installs it).
const chromiumPath = "/usr/bin/chromium"

// newBrowser starts headless Chromium for the test, or skips the test
// without it (fails under CI). Start it after the servers it visits: it
// is closed first, so that its open event streams do not hold their
// Close.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s: %v (CI is set, so this fails instead of skipping; apt-get install chromium)", chromiumPath, err)
		}
		t.Skipf("%s: %v (apt-get install chromium)", chromiumPath, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.NoSandbox, // as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil { // starts the browser, with no timeout
		t.Fatalf("starting %s: %v", chromiumPath, err)
	}
	return ctx
}

// browserDo returns what runs steps in the browser bctx within 30
// seconds, failing t with what on an error.
func browserDo(t *testing.T, bctx context.Context) func(what string, steps ...chromedp.Action[chromedp.Void]) {
	return func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(c, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// pageProblems collects, until ctx ends, what the browser says is wrong
// with the pages it shows: Content-Security-Policy violations (something
// the console's own policy refused: an inline script or style, a load
// from elsewhere) and uncaught script exceptions.
func pageProblems(t *testing.T, ctx context.Context) func() []string {
	t.Helper()
	var mu sync.Mutex
	var probs []string
	add := func(s string) {
		mu.Lock()
		probs = append(probs, s)
		mu.Unlock()
	}
	entries := chromedp.Events(ctx, cdplog.EntryAdded)
	exceptions := chromedp.Events(ctx, cdpruntime.ExceptionThrown)
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("enabling the browser's log: %v", err)
	}
	go func() {
		for ev, err := range entries {
			if err != nil {
				return
			}
			if e := ev.Entry; e != nil && (strings.Contains(e.Text, "Content Security Policy") || strings.Contains(e.Text, "Refused to")) {
				add(e.URL + ": " + e.Text)
			}
		}
	}()
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			if d := ev.ExceptionDetails; d != nil {
				msg := d.URL + ": " + d.Text
				if d.Exception != nil {
					msg += " " + d.Exception.Description
				}
				add(msg)
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), probs...)
	}
}

// TestConsoleBrowser: in Chromium, an operator logs in, reads a call that
// waits for approval with its arguments whole and approves it; the
// external agent's call then runs (exactly one refund reaches
// stripe-mock), the agent finishes the step, and the run page, following
// the event stream, shows the run completed. On the way, a form posted
// from another origin and a form without the CSRF token are refused and
// change nothing.
func TestConsoleBrowser(t *testing.T) {
	rec := stripemock.Proxy(t, stripemock.Start(t))
	r := newConsoleRig(t, rec.URL)
	bctx := newBrowser(t) // after the rig: its cleanup runs first
	problems := pageProblems(t, bctx)
	ctx := context.Background()

	run, ds, err := r.srv.CreateRun(ctx, "approval.json", readTestdata(t, "approval.json"), nil)
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	a := r.connect(tok.MCPURL, tok.Token)
	a.tools(t, "charge__refund", "charge__get", "customer__get", "openplaybook_finish_step")

	// The agent: asks for the refund until it is decided (each call waits
	// serve.approvalWait, 2 s here), then finishes the step when told.
	actx, acancel := context.WithCancel(ctx)
	t.Cleanup(acancel)
	refunded := make(chan string, 1)
	proceed := make(chan struct{})
	agentDone := make(chan error, 1)
	args := map[string]any{"chargeId": "ch_3MmlLrLkdIwHu7ix0snN0B15", "amount": 1500, "reason": "duplicate"}
	go func() {
		text, err := func() (string, error) {
			for actx.Err() == nil {
				res, err := a.cs.CallTool(actx, &mcp.CallToolParams{Name: "charge__refund", Arguments: args})
				if err != nil {
					return "", err
				}
				text := resultText(res)
				if res.IsError && strings.Contains(text, "pending") {
					continue
				}
				if res.IsError {
					return "", fmt.Errorf("charge.refund: %s", text)
				}
				return text, nil
			}
			return "", actx.Err()
		}()
		if err != nil {
			agentDone <- err
			return
		}
		refunded <- text
		select {
		case <-proceed:
		case <-actx.Done():
			agentDone <- actx.Err()
			return
		}
		res, err := a.cs.CallTool(actx, &mcp.CallToolParams{Name: "openplaybook_finish_step", Arguments: map[string]any{"output": map[string]any{"refund": text}}})
		if err == nil && res.IsError {
			err = errors.New(resultText(res))
		}
		agentDone <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if apr, _ := r.st.PendingApprovals(ctx, run); len(apr) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the refund never waited for approval")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Every browser step is bounded; the whole test takes a few seconds.
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(c, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// clickLoad clicks what sel selects and waits for the page it loads.
	clickLoad := func(what, sel string) {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		if _, err := chromedp.Run(c, chromedp.WaitEvent(cdppage.LoadEventFired, nil, chromedp.Click(chromedp.CSS(sel)))); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		s, err := chromedp.Run(c, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("the text of %s: %v", sel, err)
		}
		return s
	}

	// Log in: the approvals page sends the browser to the login form,
	// which returns to it.
	do("log in",
		chromedp.Navigate(r.ts.URL+"/approvals"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), operatorToken),
		chromedp.Click(chromedp.CSS(`form.login button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(".pending.kind-call")),
	)
	call := text(".pending.kind-call")
	for _, want := range []string{run, "charge.refund", "ch_3MmlLrLkdIwHu7ix0snN0B15", "1500", "duplicate", "Refund the duplicate charge"} {
		if !strings.Contains(call, want) {
			t.Errorf("the pending call lacks %q:\n%s", want, call)
		}
	}

	// A page on another origin posts a form to the console (the browser
	// sends the session cookie along: both are on 127.0.0.1).
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<!DOCTYPE html><form method="post" action="%s/runs/%s/cancel"><input name="reason" value="csrf"><button id="go">go</button></form>`, r.ts.URL, run)
	}))
	t.Cleanup(evil.Close)
	do("the page on another origin", chromedp.Navigate(evil.URL))
	clickLoad("the cross-origin form", "#go")
	if body := text("body"); !strings.Contains(body, "forbidden: Origin") {
		t.Errorf("the cross-origin form got %q", body)
	}
	// The console's own form without its CSRF token.
	do("the run page",
		chromedp.Navigate(r.ts.URL+"/runs/"+run),
		chromedp.WaitVisible(chromedp.CSS("form.cancel")),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('form.cancel input[name="csrf"]').remove()`),
	)
	clickLoad("the form without the CSRF token", "form.cancel button")
	if h1, msg := text("h1"), text("pre.error"); !strings.Contains(h1, "403") || !strings.Contains(msg, "CSRF") {
		t.Errorf("the form without the CSRF token got %q %q", h1, msg)
	}
	if got, _ := r.st.GetRun(ctx, run); got.Status.Ended() {
		t.Fatalf("a refused form ended the run: %s %s", got.Status, got.Reason)
	}
	if n := refunds(rec); n != 0 {
		t.Fatalf("%d refunds reached Stripe before the approval", n)
	}

	// Approve it, with a reason.
	do("approve",
		chromedp.Navigate(r.ts.URL+"/approvals"),
		chromedp.WaitVisible(chromedp.CSS(".pending.kind-call")),
		chromedp.SendKeys(chromedp.CSS(`.pending.kind-call input[name="reason"]`), "the customer was charged twice"),
		chromedp.Click(chromedp.CSS(`.pending.kind-call button[value="approve"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(".pending.kind-call")),
	)
	var refund string
	select {
	case refund = <-refunded:
	case err := <-agentDone:
		t.Fatalf("the agent: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the approved call did not complete")
	}
	if !strings.Contains(refund, "re_") {
		t.Errorf("the refund: %s", refund)
	}

	// The run page, open while the agent finishes the step, follows the
	// run to its end.
	do("the run page",
		chromedp.Navigate(r.ts.URL+"/runs/"+run),
		chromedp.WaitVisible(chromedp.ID("run-status")),
	)
	if s := text("#run-status"); s != "running" {
		t.Errorf("the run page shows %q before the step is finished, want running", s)
	}
	close(proceed)
	if err := <-agentDone; err != nil {
		t.Fatalf("the agent: %v", err)
	}
	do("the run completes", chromedp.WaitVisible(chromedp.CSS("#run-status.st-ok")))
	if s := text("#run-status"); s != "completed" {
		t.Errorf("the run page shows %q, want completed", s)
	}
	if n := refunds(rec); n != 1 {
		t.Errorf("%d refunds reached Stripe, want exactly 1", n)
	}

	// Its audit log verifies.
	do("the audit page", chromedp.Navigate(r.ts.URL+"/runs/"+run+"/audit"))
	clickLoad("verify the audit log", `main form button[type="submit"]`)
	if s := text("#verdict"); !strings.HasPrefix(s, "chain verifies: ") {
		t.Errorf("the audit page says %q", s)
	}
	for _, p := range problems() {
		t.Errorf("the browser: %s", p)
	}
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}
