package serve_test

import (
	"os"
	"path/filepath"
	"time"

	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/openplaybook/openplaybook/internal/stripemock"
	"github.com/openplaybook/openplaybook/runtime"
)

// agentSaid is what the fake model writes before its refund call: markup,
// a bidi override, the harness's Stripe key, line breaks and a line far
// wider than a phone.
var agentSaid = "The customer was charged twice for order 1234,\nso I refund the duplicate ch_2. <script>alert(1)</script> \u202e key " +
	consoleSecret + "\n" + strings.Repeat("wide", 300)

// modelRefundRun starts, on a console rig whose agent "model" is the
// OpenAI driver against a loopback fake of Chat Completions, a run of
// approval.json whose model replies agentSaid with a call to
// charge.refund, and waits until the call waits for approval.
func modelRefundRun(t *testing.T) (*rig, string) {
	t.Helper()
	rec := stripemock.Proxy(t, stripemock.Start(t))
	args, _ := json.Marshal(`{"chargeId":"ch_2","reason":"duplicate"}`)
	content, _ := json.Marshal(agentSaid)
	reply := `{"id":"c","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"finish_reason":"tool_calls","message":` +
		`{"role":"assistant","content":` + string(content) + `,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"charge__refund","arguments":` + string(args) + `}}]}}]}`
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == "GET" && r.URL.Path == "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"gpt-test","object":"model","created":1,"owned_by":"me"}]}`)
		case r.Method == "POST" && r.URL.Path == "/v1/chat/completions":
			io.WriteString(w, reply)
		default:
			http.Error(w, "no such route", http.StatusNotFound)
		}
	}))
	t.Cleanup(model.Close)
	t.Setenv("STRIPE_API_KEY", consoleSecret)
	r := newRigAgents(t, "  model: {driver: openai, model: gpt-test, baseURL: "+model.URL+"/v1, maxRetries: 0}\n",
		"connections:\n  stripe:\n    authKind: api_token\n    secrets: {apiKey: STRIPE_API_KEY}\n    baseURL: "+rec.URL+"\n")
	doc := strings.Replace(string(readTestdata(t, "approval.json")), `"agent": "outside"`, `"agent": "model"`, 1)
	doc = strings.Replace(doc, `"id": "serve-approval"`, `"id": "serve-agent-text"`, 1)
	run, ds, err := r.srv.CreateRun(context.Background(), "agent-text.json", []byte(doc), nil)
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "call")
	return r, run
}

// TestConsoleAgentText: a model's text before a call that waits for
// approval reaches the approval.requested record as agentText (the
// harness's secret value redacted) and the call's card on the approvals
// and run pages, labelled as the agent's own words, with its markup
// escaped, the bidi override shown as \u202e and the secret never shown.
func TestConsoleAgentText(t *testing.T) {
	r, run := modelRefundRun(t)
	au, err := r.srv.Audit(context.Background(), run, false)
	if err != nil {
		t.Fatal(err)
	}
	var ar runtime.ApprovalRequested
	for _, x := range au.Records {
		if x.Kind == string(runtime.KindApprovalRequested) {
			if err := json.Unmarshal(x.Data, &ar); err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := strings.Replace(agentSaid, consoleSecret, "[redacted]", 1); ar.AgentText != want {
		t.Errorf("approval.requested's agentText %q, want %q", ar.AgentText, want)
	}
	// The API's pending items carry it too, as the description says.
	for _, path := range []string{"/api/v1/pending", "/api/v1/runs/" + run} {
		res := r.api(operatorToken).do("GET", path, nil)
		var got struct {
			Pending []runtime.Pending `json:"pending"`
			Waiting []runtime.Pending `json:"waiting"`
		}
		if err := json.Unmarshal(res.body, &got); err != nil || res.status != http.StatusOK {
			t.Fatalf("GET %s: %d %v %s", path, res.status, err, res.body)
		}
		items := append(got.Pending, got.Waiting...)
		if len(items) != 1 || items[0].Kind != "call" || items[0].AgentText != ar.AgentText {
			t.Errorf("GET %s: %s, want the call with agentText %q", path, res.body, ar.AgentText)
		}
	}
	b := r.browser()
	b.login()
	for _, path := range []string{"/approvals", "/runs/" + run} {
		p := b.get(path)
		if p.status != http.StatusOK {
			t.Fatalf("GET %s: %d", path, p.status)
		}
		for _, want := range []string{
			"The agent's words before this call",
			"(its own text, as the model wrote it; nothing checks it)",
			"The customer was charged twice for order 1234,\nso I refund the duplicate ch_2. &lt;script&gt;alert(1)&lt;/script&gt; \\u202e key [redacted]\n" + strings.Repeat("wide", 300),
		} {
			if !strings.Contains(p.body, want) {
				t.Errorf("%s lacks %q", path, want)
			}
		}
		for _, bad := range []string{"<script>alert", "\u202e", consoleSecret} {
			if strings.Contains(p.body, bad) {
				t.Errorf("%s holds %q", path, bad)
			}
		}
	}
}

// TestConsoleAgentTextBrowser: in Chromium, the card with the agent's
// words (markup, a bidi override, a line of 1200 characters without a
// space) shows them as text, with no element made of them, and the run
// and approvals pages keep no axe-core violation and stay within the
// window at 1280 and 390 px.
func TestConsoleAgentTextBrowser(t *testing.T) {
	axe := axeSource(t)
	shots := screenshotDir(t)
	r, run := modelRefundRun(t)
	bctx := newBrowser(t)
	run1 := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(c, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// value evaluates js, a JSON.stringify of what it checks, into v.
	value := func(what, js string, v any) {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		s, err := chromedp.Run(c, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err == nil {
			err = json.Unmarshal([]byte(s), v)
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	run1("log in", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(r.ts.URL+"/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), operatorToken),
		chromedp.Click(chromedp.CSS(`form.login button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("table.runs")))
	for _, path := range []string{"/runs/" + run, "/approvals"} {
		run1("open "+path, chromedp.Navigate(r.ts.URL+path), chromedp.WaitVisible(chromedp.CSS("blockquote.agent-text")))
		var shown struct {
			Text     string
			Elements int
		}
		value("the agent's words", `JSON.stringify({Text: document.querySelector("blockquote.agent-text").innerText, Elements: document.querySelectorAll("blockquote.agent-text p *").length})`, &shown)
		if !strings.Contains(shown.Text, "ch_2. <script>alert(1)</script> \\u202e key [redacted]\n") || shown.Elements != 0 {
			t.Errorf("%s shows the agent's words as %q with %d elements in them, want the markup as text and none", path, shown.Text, shown.Elements)
		}
		for _, width := range []int64{1280, 390} {
			run1("resize", chromedp.EmulateViewport(width, 900))
			var loaded bool
			if value("axe present", `JSON.stringify(typeof axe === "object")`, &loaded); !loaded {
				run1("load axe-core", chromedp.Evaluate[chromedp.Void](axe+";0"))
			}
			var v []axeViolation
			value("axe-core", `axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(" "))}))))`, &v)
			for _, x := range v {
				t.Errorf("axe-core, %s at %d px: %s (%s): %s at %v", path, width, x.ID, x.Impact, x.Help, x.Nodes)
			}
			// The words wrap: neither the page nor the text scrolls
			// sideways.
			var fit struct{ Scroll, Client, Quote, TextScroll, TextClient int }
			value("widths", `JSON.stringify({Scroll: document.documentElement.scrollWidth, Client: document.documentElement.clientWidth,
				Quote: Math.round(document.querySelector("blockquote.agent-text").getBoundingClientRect().right),
				TextScroll: document.querySelector("blockquote.agent-text p").scrollWidth, TextClient: document.querySelector("blockquote.agent-text p").clientWidth})`, &fit)
			if fit.Scroll > fit.Client || fit.Quote > fit.Client || fit.TextScroll > fit.TextClient {
				t.Errorf("%s at %d px: the page is %d px wide and the agent's words end at %d px (%d px of text in %d), the window is %d", path, width, fit.Scroll, fit.Quote, fit.TextScroll, fit.TextClient, fit.Client)
			}
			// The card in a window as tall as the page: the decision bar
			// at the card's end, not over it.
			var height int64
			value("height", `JSON.stringify(document.documentElement.scrollHeight)`, &height)
			run1("resize", chromedp.EmulateViewport(width, height))
			c, cancel := context.WithTimeout(bctx, 30*time.Second)
			img, err := chromedp.Run(c, chromedp.Screenshot(chromedp.CSS(".pending.kind-call")))
			cancel()
			if err != nil {
				t.Fatalf("screenshot: %v", err)
			}
			if err := os.WriteFile(filepath.Join(shots, fmt.Sprintf("card-agent-text-%s-%d.png", strings.Split(path, "/")[1], width)), img, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
