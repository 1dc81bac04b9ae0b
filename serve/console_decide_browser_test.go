package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/internal/stripemock"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
)

// axeSource is axe-core's browser build, from the version package.json
// pins (npm ci installs it; scripts/deps.sh).
func axeSource(t *testing.T) string {
	t.Helper()
	p := filepath.Join(mcptest.RepoRoot(t), "node_modules", "axe-core", "axe.min.js")
	b, err := os.ReadFile(p)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s: %v (npm ci installs axe-core from package.json)", p, err)
		}
		t.Skipf("%s: %v (npm ci installs axe-core from package.json)", p, err)
	}
	return string(b)
}

// screenshotDir is where the test keeps its screenshots: the directory
// CONSOLE_SCREENSHOTS names (docs/console is where docs/console.md reads
// them), else one under the system's temporary directory, which the test
// logs.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CONSOLE_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "openplaybook-console-screenshots")
	} else if !filepath.IsAbs(dir) {
		dir = filepath.Join(mcptest.RepoRoot(t), dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// axeViolation is what the test reports of one axe-core violation.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// refundAgent is an external agent asking for one refund until a person
// decides it: each call waits serve.approvalWait and answers "pending"
// until then. done gets the call's last answer.
type refundAgent struct {
	done chan refundAnswer
}

type refundAnswer struct {
	text  string
	isErr bool
	err   error
}

func startRefundAgent(ctx context.Context, a *agent, args map[string]any) *refundAgent {
	ra := &refundAgent{done: make(chan refundAnswer, 1)}
	go func() {
		for ctx.Err() == nil {
			res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: "charge__refund", Arguments: args})
			if err != nil {
				ra.done <- refundAnswer{err: err}
				return
			}
			text := resultText(res)
			if res.IsError && strings.Contains(text, "pending") {
				continue
			}
			ra.done <- refundAnswer{text: text, isErr: res.IsError}
			return
		}
		ra.done <- refundAnswer{err: ctx.Err()}
	}()
	return ra
}

func (ra *refundAgent) answer(t *testing.T) refundAnswer {
	t.Helper()
	select {
	case a := <-ra.done:
		if a.err != nil {
			t.Fatalf("the agent: %v", a.err)
		}
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("the refund call got no answer")
	}
	return refundAnswer{}
}

// TestConsoleDecisionBrowser: in Chromium, an approver opens a refund's
// card from the runs list, reads the amount and what the tool's
// inputSchema says of it, and approves (one refund reaches stripe-mock);
// denies a second refund with a note, which the agent (an MCP client)
// reads as the refusal's reason; reads on a gate what Approve unlocks. On
// every page, at 1280 and 390 px: no axe-core violation, nothing wider
// than the window, and a screenshot kept. Focus stays where it was when
// a live update reloads the page.
func TestConsoleDecisionBrowser(t *testing.T) {
	axe := axeSource(t)
	shots := screenshotDir(t)
	rec := stripemock.Proxy(t, stripemock.Start(t))
	r := newConsoleRig(t, rec.URL)
	bctx := newBrowser(t)
	problems := pageProblems(t, bctx)
	ctx := context.Background()
	actx, acancel := context.WithCancel(ctx)
	t.Cleanup(acancel)

	// Two refunds waiting for a person, and a run at its gate.
	refund := func(charge string, amount int) (string, *refundAgent) {
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
		ra := startRefundAgent(actx, a, map[string]any{"chargeId": charge, "amount": amount, "reason": "duplicate"})
		deadline := time.Now().Add(20 * time.Second)
		for {
			if apr, _ := r.st.PendingApprovals(ctx, run); len(apr) == 1 {
				return run, ra
			}
			if time.Now().After(deadline) {
				t.Fatal("the refund never waited for approval")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	approveRun, approveAgent := refund("ch_3MmlLrLkdIwHu7ix0snN0B15", 1500)
	denyRun, denyAgent := refund("ch_3MmlLrLkdIwHu7ix0snN0B16", 99900)
	gateRun, ds, err := r.srv.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(gateRun, "waiting", "agent")
	tok, err := r.srv.IssueAgentToken(ctx, gateRun, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	ga := r.connect(tok.MCPURL, tok.Token)
	ga.tools(t, "customer__get", "note__add", "openplaybook_finish_step")
	proposal := "Proposal: extend Ada's trial by 14 days; she hit the sync bug twice."
	if text, isErr := ga.call(t, "openplaybook_finish_step", map[string]any{"output": map[string]any{"summary": proposal, "customer": map[string]any{"id": "cus_ada", "plan": "trial"}}}); isErr {
		t.Fatalf("finish: %s", text)
	}
	r.waitStatus(gateRun, "waiting", "gate")

	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(c, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// clickGone clicks button and waits until gone is not on the page.
	// The page redraws its list as the runs' events come, so the button
	// found may be replaced before the click reaches it (chromedp: "Could
	// not find node with given id"): nothing was clicked then, and it is
	// found and clicked again.
	clickGone := func(what, button, gone string) {
		t.Helper()
		for try := 1; ; try++ {
			c, cancel := context.WithTimeout(bctx, 30*time.Second)
			_, err := chromedp.Run(c, chromedp.Click(chromedp.CSS(button)))
			if err == nil {
				_, err = chromedp.Run(c, chromedp.WaitNotPresent(chromedp.CSS(gone)))
				cancel()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				return
			}
			cancel()
			if !strings.Contains(err.Error(), "Could not find node") || try == 3 {
				t.Fatalf("%s: %v", what, err)
			}
		}
	}
	clickLoad := func(what, sel string) {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		if _, err := chromedp.Run(c, chromedp.WaitEvent(cdppage.LoadEventFired, nil, chromedp.Click(chromedp.CSS(sel)))); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(what, js string) []byte {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		v, err := chromedp.Run(c, chromedp.Evaluate[[]byte](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
	text := func(sel string) string {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		s, err := chromedp.Run(c, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("the text of %s: %v", sel, err)
		}
		return s
	}
	// check runs axe-core on the page shown at both widths, checks that
	// nothing is wider than the window and "Log out" is in it, and keeps
	// a screenshot of each.
	check := func(name string) {
		t.Helper()
		for _, width := range []int64{1280, 390} {
			do("resize", chromedp.EmulateViewport(width, 900))
			var v []axeViolation
			if !strings.Contains(string(eval("axe present", `JSON.stringify(typeof axe)`)), "object") {
				eval("load axe-core", axe+";0")
			}
			raw := eval("axe-core on "+name, `axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(" "))}))))`)
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatalf("axe-core's answer on %s: %v %s", name, err, raw)
			}
			if err := json.Unmarshal([]byte(s), &v); err != nil {
				t.Fatalf("axe-core's answer on %s: %v %s", name, err, s)
			}
			for _, x := range v {
				t.Errorf("axe-core, %s at %d px: %s (%s): %s at %v", name, width, x.ID, x.Impact, x.Help, x.Nodes)
			}
			var fit struct {
				Scroll, Client int
				Logout         float64
			}
			raw = eval("widths", `JSON.stringify({Scroll: document.documentElement.scrollWidth, Client: document.documentElement.clientWidth, Logout: (function(){var b = document.querySelector("form.logout button"); return b ? b.getBoundingClientRect().right : 0})()})`)
			if err := json.Unmarshal(raw, &s); err == nil {
				_ = json.Unmarshal([]byte(s), &fit)
			}
			if fit.Scroll > fit.Client {
				wide := eval("what is too wide", `JSON.stringify(Array.from(document.querySelectorAll("body *")).filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1).slice(-3).map(e => e.tagName + "." + e.className + " " + Math.round(e.getBoundingClientRect().right)).join("; "))`)
				t.Errorf("%s at %d px: the page is %d px wide, the window %d: %s", name, width, fit.Scroll, fit.Client, wide)
			}
			if fit.Logout == 0 && name != "login" {
				t.Errorf("%s at %d px: no Log out button", name, width)
			}
			if fit.Logout > float64(fit.Client) {
				t.Errorf("%s at %d px: Log out ends at %.0f px, off the window (%d)", name, width, fit.Logout, fit.Client)
			}
			// The whole page in one window as tall as it is: a capture
			// beyond the window would draw the sticky decision bar where
			// the window ends.
			c, cancel := context.WithTimeout(bctx, 30*time.Second)
			height, err := chromedp.Run(c, chromedp.Evaluate[int64](`document.documentElement.scrollHeight`))
			cancel()
			if err != nil {
				t.Fatalf("the height of %s: %v", name, err)
			}
			do("resize", chromedp.EmulateViewport(width, max(height, 200)), chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
			c, cancel = context.WithTimeout(bctx, 30*time.Second)
			img, err := chromedp.Run(c, chromedp.CaptureScreenshot())
			cancel()
			if err != nil {
				t.Fatalf("screenshot of %s: %v", name, err)
			}
			if err := os.WriteFile(filepath.Join(shots, fmt.Sprintf("%s-%d.png", name, width)), img, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		do("resize", chromedp.EmulateViewport(1280, 900))
	}

	// cardShot keeps a screenshot of the element sel selects, at both
	// widths, in a window as tall as the page.
	cardShot := func(name, sel string) {
		t.Helper()
		for _, width := range []int64{1280, 390} {
			do("resize", chromedp.EmulateViewport(width, 900))
			c, cancel := context.WithTimeout(bctx, 30*time.Second)
			height, err := chromedp.Run(c, chromedp.Evaluate[int64](`document.documentElement.scrollHeight`))
			cancel()
			if err != nil {
				t.Fatalf("the height of the page: %v", err)
			}
			do("resize", chromedp.EmulateViewport(width, max(height, 200)))
			c, cancel = context.WithTimeout(bctx, 30*time.Second)
			img, err := chromedp.Run(c, chromedp.Screenshot(chromedp.CSS(sel)))
			cancel()
			if err != nil {
				t.Fatalf("screenshot of %s: %v", sel, err)
			}
			if err := os.WriteFile(filepath.Join(shots, fmt.Sprintf("%s-%d.png", name, width)), img, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		do("resize", chromedp.EmulateViewport(1280, 900))
	}

	// The login form.
	do("the login form", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(r.ts.URL+"/"), chromedp.WaitVisible(chromedp.ID("token")))
	check("login")
	do("log in",
		chromedp.SendKeys(chromedp.ID("token"), operatorToken),
		chromedp.Click(chromedp.CSS(`form.login button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("table.runs")),
	)
	if s := text("#runs-count"); !strings.Contains(s, "of 3") {
		t.Errorf("the runs list counts %q, want 3 runs", s)
	}
	check("runs")
	do("filter", chromedp.Navigate(r.ts.URL+"/?playbook=serve-approval&decide=1"), chromedp.WaitVisible(chromedp.CSS("table.runs")))
	if n := string(eval("rows", `JSON.stringify(String(document.querySelectorAll("table.runs tbody tr").length))`)); n != `"\"2\""` {
		t.Errorf("the runs list filtered by playbook serve-approval shows %s rows, want 2", n)
	}

	// Focus is kept when a live update reloads the page: the status
	// filter has focus when another run starts.
	do("focus", chromedp.Focus(chromedp.CSS(`select[name="status"]`)), chromedp.Evaluate[chromedp.Void](`window.__before = 1`))
	if _, _, err := r.srv.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_bob"}`)); err != nil {
		t.Fatal(err)
	}
	// The reload interrupts any one evaluation: ask again until the new
	// page answers.
	reloaded := time.Now().Add(20 * time.Second)
	for {
		c, cancel := context.WithTimeout(bctx, 5*time.Second)
		v, err := chromedp.Run(c, chromedp.Evaluate[string](`window.__before === undefined && document.readyState === "complete" ? "focus:" + (document.activeElement && document.activeElement.name) : "old"`))
		cancel()
		if err == nil && v != "old" {
			if v != "focus:status" {
				t.Errorf("after the live reload the focus is on %q, want the status filter", v)
			}
			break
		}
		if time.Now().After(reloaded) {
			t.Fatalf("the runs page did not reload when a run started (%q, %v)", v, err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The refund's card, opened from the runs list.
	do("the runs list", chromedp.Navigate(r.ts.URL+"/"), chromedp.WaitVisible(chromedp.CSS("table.runs")))
	clickLoad("decide", fmt.Sprintf(`a.decide-link[href^="/runs/%s#"]`, approveRun))
	do("the card", chromedp.WaitVisible(chromedp.CSS(".pending.kind-call")))
	card := text(".pending.kind-call")
	for _, want := range []string{
		"What this call does: Refund a Stripe charge in full or in part with chargeId ch_3MmlLrLkdIwHu7ix0snN0B15, amount 1500, reason duplicate",
		"Amount to refund; omit for a full refund. In the currency's smallest unit (e.g. cents).",
		"integer, minimum 0",
		"one of duplicate, fraudulent, requested_by_customer",
	} {
		if !strings.Contains(card, want) {
			t.Errorf("the refund's card lacks %q:\n%s", want, card)
		}
	}
	// The arguments come first; the digests are folded away below them.
	if got := string(eval("order", `JSON.stringify(String(!!(document.querySelector(".pending.kind-call table.args").compareDocumentPosition(document.querySelector(".pending.kind-call details.integrity")) & Node.DOCUMENT_POSITION_FOLLOWING) && !document.querySelector(".pending.kind-call details.integrity").open))`)); got != `"\"true\""` {
		t.Errorf("the arguments are not above a closed integrity section: %s", got)
	}
	check("call")
	cardShot("card-call", ".pending.kind-call")

	// The charge's current view, read on demand from the card: one read
	// reaches Stripe, recorded in the audit log; then approved from there.
	const approveCharge = "ch_3MmlLrLkdIwHu7ix0snN0B15"
	if n := chargeReads(rec, approveCharge); n != 0 {
		t.Fatalf("%d reads of the charge before anyone asked, want 0", n)
	}
	if s := text(".pending.kind-call ul.views"); !strings.Contains(s, "charge.get") || !strings.Contains(s, "chargeId "+approveCharge) {
		t.Errorf("the card offers %q, want charge.get with the refund's chargeId", s)
	}
	clickLoad("read the charge", `.pending.kind-call form.view button`)
	do("the view", chromedp.WaitVisible(chromedp.CSS(".pending.kind-call section.viewed")))
	if s := text("section.viewed"); !strings.Contains(s, "amountRefunded") || !strings.Contains(s, "Amount refunded so far") || !strings.Contains(s, approveCharge) {
		t.Errorf("the charge's view reads %q", s)
	}
	if n := chargeReads(rec, approveCharge); n != 1 {
		t.Errorf("%d reads of the charge reached Stripe, want 1", n)
	}
	if au, err := r.srv.Audit(ctx, approveRun, false); err != nil {
		t.Fatal(err)
	} else if !slices.ContainsFunc(au.Records, func(x audit.Record) bool { return x.Kind == "view.read" && x.Tool == "charge.get" }) {
		t.Errorf("no view.read record of charge.get in run %s", approveRun)
	}
	check("view")
	cardShot("card-view", ".pending.kind-call")
	do("approve", chromedp.Click(chromedp.CSS(`.pending.kind-call button[value="approve"]`)), chromedp.WaitNotPresent(chromedp.CSS(".pending.kind-call")))
	if a := approveAgent.answer(t); a.isErr || !strings.Contains(a.text, "re_") {
		t.Errorf("the approved refund answered %q (error %t)", a.text, a.isErr)
	}
	if n := refunds(rec); n != 1 {
		t.Errorf("%d refunds reached Stripe, want 1", n)
	}

	// The approvals page: the second refund and the gate.
	do("the approvals page", chromedp.Navigate(r.ts.URL+"/approvals"), chromedp.WaitVisible(chromedp.CSS(".pending.kind-gate")))
	gate := text(".pending.kind-gate")
	for _, want := range []string{"What Approve unlocks", "wrapup", "Record in memory that the customer was looked up.", "mcp.memory.create_entities", "Then the run ends.", "Reject ends the run rejected."} {
		if !strings.Contains(gate, want) {
			t.Errorf("the gate's card lacks %q:\n%s", want, gate)
		}
	}
	if strings.Contains(gate, "mcp.memory.search_nodes") {
		t.Errorf("the gate's card lists a read-only tool among what Approve unlocks:\n%s", gate)
	}
	// The earlier output is folded, its text first.
	do("open the earlier output", chromedp.Click(chromedp.CSS(".pending.kind-gate details.prior > summary")))
	if s := text(".pending.kind-gate details.prior"); !strings.Contains(s, proposal) {
		t.Errorf("the gate's earlier output shows %q, want the proposal's text", s)
	}
	check("approvals")
	cardShot("card-gate", ".pending.kind-gate")
	// At 390 px, with a card's heading at the top of the window, its
	// Approve button is in view.
	do("390", chromedp.EmulateViewport(390, 700), chromedp.ScrollIntoView(chromedp.CSS(".pending.kind-call h3")))
	if got := string(eval("in view", `JSON.stringify(String((function(){var b = document.querySelector(".pending.kind-call button[value=approve]").getBoundingClientRect(); return b.top >= 0 && b.bottom <= window.innerHeight})()))`)); got != `"\"true\""` {
		t.Errorf("at 390 px the call's Approve button is out of view with its card's heading at the top")
	}
	do("1280", chromedp.EmulateViewport(1280, 900))

	// Deny the second refund with a note: the agent reads it.
	note := "not a duplicate: the second charge is for another order"
	do("deny",
		chromedp.SendKeys(chromedp.CSS(`.pending.kind-call input[name="reason"]`), note),
		chromedp.Click(chromedp.CSS(`.pending.kind-call button[value="deny"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(".pending.kind-call")),
	)
	if a := denyAgent.answer(t); !a.isErr || !strings.Contains(a.text, note) {
		t.Errorf("the denied refund answered the agent %q (error %t), want the note %q", a.text, a.isErr, note)
	}
	if n := refunds(rec); n != 1 {
		t.Errorf("%d refunds reached Stripe after the denial, want still 1", n)
	}
	au, err := r.srv.Audit(ctx, denyRun, false)
	if err != nil {
		t.Fatal(err)
	}
	recorded := false
	for _, x := range au.Records {
		if x.Kind == "approval.denied" && strings.Contains(string(x.Data), note) {
			recorded = true
		}
	}
	if !recorded {
		t.Errorf("no approval.denied record of run %s carries the note", denyRun)
	}

	// Approve the gate; then the other pages.
	clickGone("approve the gate", `.pending.kind-gate button[value="approve"]`, ".pending.kind-gate")
	// The gate no longer waits: the run goes on to wrapup (running with
	// its agent, or waiting for it if the agent's session is not counted
	// yet), never back at the gate.
	for deadline := time.Now().Add(20 * time.Second); ; {
		rs, err := r.srv.Run(ctx, gateRun)
		if err != nil {
			t.Fatal(err)
		}
		if rs.Status == "running" || (rs.Status == "waiting" && len(rs.Waiting) > 0 && rs.Waiting[0].Kind == "agent") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the gate's approval run %s is %s (waiting %+v)", gateRun, rs.Status, rs.Waiting)
		}
		time.Sleep(10 * time.Millisecond)
	}
	do("the run page", chromedp.Navigate(r.ts.URL+"/runs/"+approveRun), chromedp.WaitVisible(chromedp.ID("run-status")))
	check("run")
	do("the audit page", chromedp.Navigate(r.ts.URL+"/runs/"+approveRun+"/audit"))
	clickLoad("verify", `main form button[type="submit"]`)
	check("audit")
	do("the playbooks page", chromedp.Navigate(r.ts.URL+"/playbooks"), chromedp.WaitVisible(chromedp.ID("document")))
	check("playbooks")
	do("check a document", chromedp.SetValue(chromedp.ID("document"), string(readTestdata(t, "agent.json"))))
	clickLoad("validate", `button[value="check"]`)
	check("playbooks-checked")
	do("an error page", chromedp.Navigate(r.ts.URL+"/no-such-page"), chromedp.WaitVisible(chromedp.CSS("pre.error")))
	check("error")
	t.Logf("screenshots in %s", shots)
	for _, p := range problems() {
		t.Errorf("the browser: %s", p)
	}
}
