package serve_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// runLinks are the ids of the runs a console page links to.
var runLinks = regexp.MustCompile(`href="/runs/([^"/#]+)[#"]`)

// linkedRuns returns the sorted, distinct ids of the runs body links to.
func linkedRuns(body string) []string {
	var out []string
	for _, m := range runLinks.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func sorted(ids ...string) []string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return ids
}

// getWith GETs path with cookie and wants 200.
func getWith(t *testing.T, base string, cookie *http.Cookie, path string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+path, nil)
	req.AddCookie(cookie)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, res.StatusCode, body)
	}
	return string(body)
}

// TestConsoleWaitingOnMe: with serve.oidc (deciders: finance), alice,
// bob and carol (not of finance) each start a run that waits at its
// gate. Logged in to the console through Hydra, alice finds waiting on
// her the runs of bob and carol (not her own: self-approval), bob those
// of alice and carol, in the runs list (?mine=1) and on the approvals
// page (?mine=1), while ?decide=1 lists all three to each; carol and a
// session of the operator token read why nothing waits on them. After
// bob approves carol's gate, it waits on no one.
func TestConsoleWaitingOnMe(t *testing.T) {
	ir := newIdentityRig(t, "")
	runA := ir.startGateRun(ir.api(ir.token(alice, apiAudience)))
	runB := ir.startGateRun(ir.api(ir.token(bob, apiAudience)))
	runC := ir.startGateRun(ir.api(ir.token(carol, apiAudience)))
	all := sorted(runA, runB, runC)

	aliceCookie, _ := ir.login(alice)
	bobCookie, bobCSRF := ir.login(bob)
	carolCookie, _ := ir.login(carol)
	for _, c := range []struct {
		who    string
		cookie *http.Cookie
		mine   []string
	}{
		{"alice", aliceCookie, sorted(runB, runC)},
		{"bob", bobCookie, sorted(runA, runC)},
	} {
		if got := linkedRuns(getWith(t, ir.ts.URL, c.cookie, "/?decide=1")); !slices.Equal(got, all) {
			t.Errorf("%s: /?decide=1 lists %v, want %v", c.who, got, all)
		}
		page := getWith(t, ir.ts.URL, c.cookie, "/?mine=1")
		if got := linkedRuns(page); !slices.Equal(got, c.mine) {
			t.Errorf("%s: /?mine=1 lists %v, want %v", c.who, got, c.mine)
		}
		if !strings.Contains(page, "Waiting on you: 2 of runs 1–3 waiting for a decision (all 3 of them).") ||
			!strings.Contains(page, `name="mine" value="1" checked`) {
			t.Errorf("%s: /?mine=1 does not say what it counts, or its box is not checked:\n%s", c.who, page)
		}
		if got := linkedRuns(getWith(t, ir.ts.URL, c.cookie, "/?mine=1&playbook=another")); len(got) != 0 {
			t.Errorf("%s: /?mine=1&playbook=another lists %v", c.who, got)
		}
		if got := linkedRuns(getWith(t, ir.ts.URL, c.cookie, "/approvals")); !slices.Equal(got, all) {
			t.Errorf("%s: /approvals lists %v, want %v", c.who, got, all)
		}
		page = getWith(t, ir.ts.URL, c.cookie, "/approvals?mine=1")
		if got := linkedRuns(page); !slices.Equal(got, c.mine) {
			t.Errorf("%s: /approvals?mine=1 lists %v, want %v", c.who, got, c.mine)
		}
		if !strings.Contains(page, "2 waiting on you") || !strings.Contains(page, `href="/approvals">Everything that waits`) {
			t.Errorf("%s: /approvals?mine=1 lacks its count or the way back:\n%s", c.who, page)
		}
	}

	// carol is no decider; the operator token decides nothing with
	// serve.oidc.
	for _, c := range []struct {
		who, why string
		cookie   *http.Cookie
	}{
		{"carol", "carol is not one of serve.oidc.deciders", carolCookie},
		{"the operator token", "the operator token does not", operatorSession(t, ir.ts.URL)},
	} {
		for _, path := range []string{"/?mine=1", "/approvals?mine=1"} {
			page := getWith(t, ir.ts.URL, c.cookie, path)
			if got := linkedRuns(page); len(got) != 0 || !strings.Contains(page, "Nothing waits on you") || !strings.Contains(page, c.why) {
				t.Errorf("%s: %s lists %v, or does not say why nothing waits:\n%s", c.who, path, got, page)
			}
		}
	}

	// bob approves carol's gate in the console: it waits on no one.
	cs := &apiClient{t: t, base: ir.ts.URL, cookie: bobCookie, csrf: bobCSRF, spec: loadSpec(t)}
	want(t, "bob approves carol's run", cs.do("POST", "/api/v1/runs/"+runC+"/decisions/review", map[string]any{"approve": true, "reason": "ok"}), 200)
	ir.waitStatus(runC, "waiting", "agent")
	if got := linkedRuns(getWith(t, ir.ts.URL, aliceCookie, "/?mine=1")); !slices.Equal(got, []string{runB}) {
		t.Errorf("alice after bob approved carol's gate: /?mine=1 lists %v, want [%s]", got, runB)
	}
}

// operatorSession logs in to the console with the operator token and
// returns the session cookie.
func operatorSession(t *testing.T, base string) *http.Cookie {
	t.Helper()
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := cl.PostForm(base+"/login", url.Values{"token": {operatorToken}, "next": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == "openplaybook_session" && c.Value != "" {
			return c
		}
	}
	t.Fatalf("the operator token's login (%d) set no session cookie", res.StatusCode)
	return nil
}

// TestConsoleWaitingOnMeWithoutOIDC: without serve.oidc the operator
// decides everything, so ?mine=1 lists what ?decide=1 lists, on the runs
// list and the approvals page; a run waiting for its agent is in
// neither.
func TestConsoleWaitingOnMeWithoutOIDC(t *testing.T) {
	r := newRig(t, "")
	ctx := context.Background()
	var gates []string
	for range 2 {
		run, ds, err := r.srv.CreateRun(ctx, "gate.json", readTestdata(t, "gate.json"), []byte(`{"customerId":"cus_ada"}`))
		if err != nil {
			t.Fatalf("create: %v %v", err, ds)
		}
		r.waitStatus(run, "waiting", "gate")
		gates = append(gates, run)
	}
	agentRun, ds, err := r.srv.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(agentRun, "waiting", "agent")
	b := r.browser()
	b.login()
	decide := linkedRuns(b.get("/?decide=1").body)
	if want := sorted(gates...); !slices.Equal(decide, want) {
		t.Fatalf("/?decide=1 lists %v, want %v", decide, want)
	}
	p := b.get("/?mine=1")
	if got := linkedRuns(p.body); p.status != 200 || !slices.Equal(got, decide) {
		t.Errorf("/?mine=1 (%d) lists %v, want what /?decide=1 lists, %v", p.status, got, decide)
	}
	if got := linkedRuns(b.get("/approvals?mine=1").body); !slices.Equal(got, decide) {
		t.Errorf("/approvals?mine=1 lists %v, want %v", got, decide)
	}
}
