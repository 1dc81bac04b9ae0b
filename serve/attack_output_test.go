package serve_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/serve"
)

// rawStream reads an event stream's bytes until stop is called.
type rawStream struct {
	mu   sync.Mutex
	buf  strings.Builder
	stop func()
	done chan struct{}
}

func openStream(t *testing.T, c *http.Client, url string, auth func(*http.Request)) *rawStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if auth != nil {
		auth(req)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	s := &rawStream{stop: cancel, done: make(chan struct{})}
	first := make(chan struct{})
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		b := make([]byte, 4096)
		once := sync.Once{}
		for {
			n, err := resp.Body.Read(b)
			s.mu.Lock()
			s.buf.Write(b[:n])
			s.mu.Unlock()
			if n > 0 {
				once.Do(func() { close(first) })
			}
			if err != nil {
				once.Do(func() { close(first) })
				return
			}
		}
	}()
	<-first // the opening comment: subscribed
	t.Cleanup(cancel)
	return s
}

func (s *rawStream) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// checkFrames parses an event stream as a browser does (WHATWG HTML
// 9.2.6: lines end at CR LF, LF or CR; a blank line ends an event) and
// checks that every event is a "status" or "progress" event with one
// data line of JSON about run.
func checkFrames(t *testing.T, what, stream, run string) (progress []string) {
	t.Helper()
	norm := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(stream)
	if norm != stream {
		t.Errorf("BROKEN: %s holds a raw CR, which ends an SSE line", what)
	}
	for _, frame := range strings.Split(norm, "\n\n") {
		if frame == "" {
			continue
		}
		var name, data, id string
		datas := 0
		for _, line := range strings.Split(frame, "\n") {
			switch {
			case strings.HasPrefix(line, ":"), line == "":
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
				datas++
			case strings.HasPrefix(line, "id: "):
				// A run's status events carry its audit sequence.
				id = strings.TrimPrefix(line, "id: ")
				if n, err := strconv.ParseInt(id, 10, 64); err != nil || n < 0 || strconv.FormatInt(n, 10) != id {
					t.Errorf("BROKEN: %s has an id %q that is not an audit sequence", what, id)
				}
			default:
				t.Errorf("BROKEN: %s has a line %q that is no field the stream writes", what, line)
			}
		}
		if name == "" && datas == 0 {
			continue // a comment
		}
		var ev serve.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil || datas != 1 {
			t.Errorf("BROKEN: %s: event %q has %d data lines, %q", what, name, datas, data)
			continue
		}
		if (name != "status" && name != "progress") || ev.Type != name || ev.Run != run {
			t.Errorf("BROKEN: %s: a forged event %q %+v", what, name, ev)
		}
		if id != "" && name != "status" {
			t.Errorf("BROKEN: %s: a %s event has an id (%s); only status events carry one", what, name, id)
		}
		if name == "progress" {
			progress = append(progress, ev.Text)
		}
	}
	return progress
}

// TestAttackHostileAgentText: what a hostile agent chooses (its client
// name and version, tool names it calls, the step output) reaches the
// operator's event streams, pages and audit log. It must not forge or
// break an SSE event, inject markup, hide text with bidi or control
// characters, or show a secret value of the harness.
func TestAttackHostileAgentText(t *testing.T) {
	// The Stripe connection is not used by agent.json: its key is the
	// secret no view may show.
	r := newConsoleRig(t, "http://127.0.0.1:9")
	ctx := context.Background()
	run, _, err := r.srv.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatal(err)
	}
	r.waitStatus(run, "waiting", "agent")
	b := r.browser()
	b.login()
	api := openStream(t, http.DefaultClient, r.ts.URL+"/api/v1/runs/"+run+"/events", func(req *http.Request) { req.Header.Set("Authorization", "Bearer "+operatorToken) })
	all := openStream(t, http.DefaultClient, r.ts.URL+"/api/v1/events", func(req *http.Request) { req.Header.Set("Authorization", "Bearer "+operatorToken) })
	con := openStream(t, b.c, r.ts.URL+"/events?run="+run, nil)

	forged := "\r\n\r\nevent: status\r\ndata: {\"type\":\"status\",\"run\":\"run_forged\"}\r\n\r\n\revent: gate\rdata: x\r\r"
	markup := "</code></pre><script>alert(1)</script><img src=x onerror=alert(2)>"
	hidden := "\u202e\u2066\u200b\u2028\x1b[2J"
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "evil" + forged + markup + hidden + consoleSecret, Version: forged + "1"}, nil)
	// At 2025-11-25: at 2026-07-28 go-sdk's client puts the tool name in
	// an Mcp-Name header, and net/http sends no header with a newline.
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: tok.MCPURL, HTTPClient: &http.Client{Transport: bearer{tok.Token, http.DefaultTransport}}}, sessionRevision)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	a := &agent{cs: cs, changed: make(chan struct{}, 16)}
	a.tools(t, "customer__get", "note__add", serve.FinishTool)
	if _, isErr := a.call(t, "x"+forged+markup+hidden+consoleSecret, map[string]any{"k": markup + forged}); !isErr {
		t.Fatal("a hostile tool name ran")
	}
	if _, isErr := a.call(t, "note__add", map[string]any{"customerId": "cus_ada", "body": markup + hidden + forged + consoleSecret}); isErr {
		t.Fatal("note.add failed")
	}
	if _, isErr := a.call(t, serve.FinishTool, map[string]any{"output": map[string]any{markup + hidden: forged + consoleSecret}}); isErr {
		t.Fatal("finish failed")
	}
	r.waitStatus(run, "waiting", "gate")

	pages := map[string]page{}
	for _, path := range []string{"/", "/approvals", "/runs/" + run, "/runs/" + run + "/audit", "/runs/" + run + "/audit?verify=1"} {
		pages[path] = b.get(path)
		if pages[path].status != http.StatusOK {
			t.Fatalf("GET %s: %d", path, pages[path].status)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, r.ts.URL+"/api/v1/runs/"+run+"/audit", nil)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	pages["API audit"] = page{status: resp.StatusCode, body: string(body)}

	api.stop()
	all.stop()
	con.stop()
	<-api.done
	<-all.done
	<-con.done
	for what, s := range map[string]*rawStream{"the API run stream": api, "the API stream of every run": all, "the console stream": con} {
		text := s.text()
		prog := checkFrames(t, what, text, run)
		if what == "the API stream of every run" {
			continue
		}
		attached := false
		for _, p := range prog {
			if strings.Contains(p, "agent attached") {
				attached = true
			}
		}
		if !attached {
			t.Errorf("%s has no 'agent attached' progress event: %q", what, text)
		}
		if strings.Contains(text, consoleSecret) {
			t.Errorf("BROKEN: %s shows the secret value", what)
		}
	}
	if strings.Contains(con.text(), "\u202e") {
		t.Errorf("BROKEN: the console stream holds a raw U+202E")
	}
	for path, p := range pages {
		if strings.Contains(p.body, consoleSecret) {
			t.Errorf("BROKEN: %s shows the secret value", path)
		}
		if path == "API audit" {
			continue // JSON for machines: text as it is, but no secret
		}
		for _, bad := range []string{"<script>alert", "<img src=x", "\u202e", "\u2066", "\u200b", "\u2028", "\x1b", "\r"} {
			if strings.Contains(p.body, bad) {
				t.Errorf("BROKEN: %s holds %q raw", path, bad)
			}
		}
	}
	// The hostile text is there, shown inert.
	if ap := pages["/runs/"+run+"/audit"].body; !strings.Contains(ap, "&lt;script&gt;alert(1)") || !strings.Contains(ap, `\u202e`) {
		t.Errorf("the audit page does not show the agent's text escaped")
	}
	au, err := r.srv.Audit(ctx, run, true)
	if err != nil || !*au.Verified {
		t.Fatalf("audit: %v %+v", err, au.Problems)
	}
}

// TestAttackHostileDocument: a document author's free text (the
// playbook's name and description, steps' purposes, tools' descriptions)
// is shown on the run page (with explain's step graph embedded as
// markup), the runs and approvals pages and a gate's decision form. None
// of it may become markup, close the graph early, or show bidi or
// control characters raw.
func TestAttackHostileDocument(t *testing.T) {
	r := newRig(t, "")
	ctx := context.Background()
	evil := `</svg></div></text></title><script>alert(1)</script><svg onload=alert(2)><a href="javascript:alert(3)">x</a>` +
		"\u202e\u2067\u200b\u2028\x1b]0;owned\x07" + `{{.CSRF}}</textarea><style>*{display:none}</style>`
	var doc map[string]any
	if err := json.Unmarshal(readTestdata(t, "agent.json"), &doc); err != nil {
		t.Fatal(err)
	}
	m := doc["manifest"].(map[string]any)
	m["name"] = "Playbook " + evil
	m["description"] = "Description " + evil
	for _, st := range doc["steps"].([]any) {
		s := st.(map[string]any)
		s["purpose"] = s["purpose"].(string) + " " + evil
	}
	for _, tl := range doc["tools"].([]any) {
		tm := tl.(map[string]any)
		tm["description"] = tm["description"].(string) + " " + evil
	}
	src, _ := json.Marshal(doc)
	run, ds, err := r.srv.CreateRun(ctx, "evil.json", src, []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	a := r.connect(tok.MCPURL, tok.Token)
	a.tools(t, "customer__get", "note__add", serve.FinishTool)
	if _, isErr := a.call(t, serve.FinishTool, map[string]any{"output": evil}); isErr {
		t.Fatal("finish failed")
	}
	r.waitStatus(run, "waiting", "gate")
	b := r.browser()
	b.login()
	for _, path := range []string{"/", "/approvals", "/runs/" + run, "/runs/" + run + "/audit"} {
		p := b.get(path)
		if p.status != http.StatusOK {
			t.Fatalf("GET %s: %d", path, p.status)
		}
		for _, bad := range []string{"<script>alert", "<svg onload", `href="javascript:`, "<style>*", "</textarea>", "\u202e", "\u2067", "\u200b", "\u2028", "\x1b", "\x07", b.csrf + "</"} {
			if strings.Contains(p.body, bad) {
				i := strings.Index(p.body, bad)
				t.Errorf("BROKEN: %s holds %q raw: ...%s...", path, bad, p.body[max(0, i-120):min(len(p.body), i+60)])
			}
		}
		if o, c := strings.Count(p.body, "<svg"), strings.Count(p.body, "</svg>"); o != c {
			t.Errorf("BROKEN: %s has %d <svg and %d </svg>", path, o, c)
		}
	}
}
