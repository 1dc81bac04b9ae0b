package serve_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleWaitingOnMeBrowser: in Chromium, the runs list filtered to
// what waits on the operator (its "waiting on me" box ticked and the
// form sent) and the approvals page's "Only what waits on me" have no
// axe-core violation, and the box is checked on the page it leads to.
func TestConsoleWaitingOnMeBrowser(t *testing.T) {
	axe := axeSource(t)
	r := newRig(t, "")
	bctx := newBrowser(t)
	problems := pageProblems(t, bctx)
	run, ds, err := r.srv.CreateRun(context.Background(), "gate.json", readTestdata(t, "gate.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "gate")
	do := browserDo(t, bctx)
	// violations runs axe-core on the page shown.
	violations := func(name string) {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		js := axe + `;axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(r.violations.map(v => v.id + ": " + v.help + " at " + v.nodes.map(n => n.target.join(" ")).join(", "))))`
		raw, err := chromedp.Run(c, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		var v []string
		if err == nil {
			err = json.Unmarshal([]byte(raw), &v)
		}
		if err != nil {
			t.Fatalf("axe-core on %s: %v %s", name, err, raw)
		}
		for _, x := range v {
			t.Errorf("axe-core, %s: %s", name, x)
		}
	}
	do("log in", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(r.ts.URL+"/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), operatorToken),
		chromedp.Click(chromedp.CSS(`form.login button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("table.runs")))
	do("tick waiting on me", chromedp.Click(chromedp.CSS(`input[name="mine"]`)), chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`input[name="mine"]:checked`)), chromedp.WaitVisible(chromedp.CSS(`a.decide-link[href^="/runs/`+run+`#"]`)))
	violations("the runs waiting on me")
	do("approvals", chromedp.Navigate(r.ts.URL+"/approvals"), chromedp.WaitVisible(chromedp.CSS(`a[href="/approvals?mine=1"]`)),
		chromedp.Click(chromedp.CSS(`a[href="/approvals?mine=1"]`)), chromedp.WaitVisible(chromedp.CSS(`a[href="/approvals"]`)))
	violations("the approvals waiting on me")
	for _, p := range problems() {
		t.Errorf("the browser: %s", p)
	}
}
