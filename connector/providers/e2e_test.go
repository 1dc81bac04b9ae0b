package providers_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/connector/httpconn"
)

// The end-to-end tests run every tool of every declarative connector
// through `openplaybook run`, with the transcript driver, against a mock
// serving the provider's own description: Prism for OpenAPI
// (@stoplight/prism-cli, which refuses requests that do not match the
// description) and scripts/graphql-mock.mjs for GraphQL (which refuses
// documents that do not validate against the SDL). A counting proxy in
// front of the mock records what reached it and what it answered.

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// openplaybook builds the CLI once per test binary.
func openplaybook(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "openplaybook-e2e-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "openplaybook")
		out, err := exec.Command("go", "build", "-o", binPath, "../../cmd/openplaybook").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// mocks bounds how many mocks run at once (Prism takes about 250 MB on
// GitHub's description).
var mocks = make(chan struct{}, 3)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startMock starts the provider's mock on a free port and returns its
// root URL; it is stopped when the test ends. The mock counts as listening
// only when the socket listening on its port is its own (listenerOwned):
// a port another process took between freePort and the mock's start (the
// machine is shared) is given up, and the mock started again on another
// one, at most 3 times; what answers there is never used.
func startMock(t *testing.T, spec httpconn.Spec, description string) string {
	t.Helper()
	for try := 1; ; try++ {
		base, err := startMockOnce(t, spec, description)
		if err == nil {
			return base
		}
		if errors.Is(err, errCannotTell) {
			t.Skip(err)
		}
		if try == 3 {
			t.Fatal(err)
		}
		t.Logf("%v; starting the mock on another port", err)
	}
}

func startMockOnce(t *testing.T, spec httpconn.Spec, description string) (string, error) {
	t.Helper()
	port := freePort(t)
	var cmd *exec.Cmd
	if spec.Description.Kind == "graphql" {
		cmd = exec.Command(nodeBinary(t), filepath.Join(repoRoot, "scripts", "graphql-mock.mjs"), "--port", fmt.Sprint(port), "--schema", description)
	} else {
		cmd = exec.Command(nodeBinary(t), filepath.Join(repoRoot, "node_modules", "@stoplight", "prism-cli", "dist", "index.js"),
			"mock", "-h", "127.0.0.1", "-p", fmt.Sprint(port), description)
	}
	// A process group of its own: the listening socket may be a child's.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(90 * time.Second)
	for {
		ok, err := listenerOwned(port, cmd.Process.Pid)
		if err != nil {
			stop()
			return "", err
		}
		if ok {
			break
		}
		select {
		case <-exited:
			return "", fmt.Errorf("the mock exited before listening on %s:\n%s", addr, tail(logs.String(), 4000))
		default:
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("the mock did not listen on %s within 90 s:\n%s", addr, tail(logs.String(), 4000))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("mock output:\n%s", tail(logs.String(), 4000))
		}
	})
	return "http://" + addr, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// hit is one request the mock got.
type hit struct {
	method, path string
	status       int
	body         string
}

// countingProxy forwards to target and records each request and the
// mock's answer status.
func countingProxy(t *testing.T, target string) (string, func() []hit) {
	t.Helper()
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	var mu sync.Mutex
	var hits []hit
	rp.ModifyResponse = func(r *http.Response) error {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		mu.Lock()
		hits = append(hits, hit{r.Request.Method, r.Request.URL.Path, r.StatusCode, tail(string(b), 600)})
		mu.Unlock()
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL, func() []hit {
		mu.Lock()
		defer mu.Unlock()
		return append([]hit(nil), hits...)
	}
}

// TestEndToEnd calls each tool of each declarative connector through
// `openplaybook run` against the provider's mock.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a mock per provider")
	}
	bin := openplaybook(t)
	for _, p := range allProviders(t) {
		spec := p.Spec()
		t.Run(p.Name(), func(t *testing.T) {
			t.Parallel()
			mocks <- struct{}{}
			defer func() { <-mocks }()
			description := descriptionPath(t, spec.Description)
			mock := startMock(t, spec, description)
			base, hits := countingProxy(t, mock)
			dir := t.TempDir()
			names := writeRig(t, dir, p, base)
			code, out := runToEnd(t, bin, dir)
			got := hits()
			if code != 0 {
				t.Errorf("the run ended with exit %d:\n%s", code, out)
			}
			// Every call succeeded, by the audit log (a transcript step
			// goes on after a failed call).
			if kinds := auditKinds(t, bin, dir, out); kinds["call.succeeded"] != len(names) || kinds["call.failed"]+kinds["call.refused"] > 0 {
				t.Errorf("audit: %d calls succeeded, %d failed, %d refused; want %d, 0, 0", kinds["call.succeeded"], kinds["call.failed"], kinds["call.refused"], len(names))
			}
			// Each tool's request reached the mock once; the check tool's
			// also once per preflight (run and each resume).
			conn := openFor(t, p, base)
			check := ""
			if spec.Check != nil {
				check = spec.Check.Tool
			}
			for _, name := range names {
				req, err := conn.Request(context.Background(), name, p.Example(name), "")
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, h := range got {
					if h.method == req.Method && h.path == req.URL.Path {
						n++
					}
				}
				if n == 0 || (n > 1 && name != check && !sharesRequest(t, conn, p, names, name)) {
					t.Errorf("%s: the mock got %d requests %s %s; want 1", name, n, req.Method, req.URL.Path)
				}
			}
			for i, h := range got {
				if h.status < 200 || h.status > 299 {
					t.Errorf("request %d (%s %s) was refused by the mock with %d: %s", i, h.method, h.path, h.status, h.body)
				}
			}
		})
	}
}

// writeRig writes a playbook calling every tool of p once (its example
// arguments), its transcript and a harness binding p to base. It returns
// the tool names in call order.
func writeRig(t *testing.T, dir string, p *httpconn.Provider, base string) []string {
	t.Helper()
	defs := p.Definitions()
	info := p.Info()
	kind := info.AuthKinds[0]
	var names []string
	var calls []map[string]any
	for _, d := range defs {
		names = append(names, d.Name)
		calls = append(calls, map[string]any{"tool": d.Name, "arguments": json.RawMessage(p.Example(d.Name))})
	}
	doc := map[string]any{
		"openplaybook": "1.6",
		"manifest": map[string]any{
			"id": "e2e-" + strings.ReplaceAll(p.Name(), "_", "-"), "name": "End to end: " + p.Name(), "version": "1.0.0",
			"description": "Calls every tool of the " + p.Name() + " connector once.", "requiredConnectors": []string{p.Name()},
		},
		"inputSchema": map[string]any{"type": "object"},
		"requires": map[string]any{
			"connections": []any{map[string]any{"provider": p.Name(), "authKind": kind.Kind, "scopes": []string{}, "capabilities": names}},
			"mcpServers":  []any{}, "secrets": []any{},
		},
		"tools": defs,
		"steps": []any{map[string]any{
			"id": "call", "kind": "agent", "agent": "tester", "purpose": "Call every tool of the connector once.",
			"allowedTools": names,
		}},
	}
	write := func(name string, v any) {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("playbook.json", doc)
	write("transcript.json", map[string]any{"steps": map[string]any{"call": calls}})
	var secrets []string
	for _, role := range kind.Secrets {
		secrets = append(secrets, fmt.Sprintf("%s: %s", role, envName(role)))
	}
	harness := fmt.Sprintf(`connections:
  %s:
    authKind: %s
    secrets: {%s}
    baseURL: %s
agents:
  tester: {driver: transcript, transcript: transcript.json}
store:
  sqlite: state.db
`, p.Name(), kind.Kind, strings.Join(secrets, ", "), base)
	if err := os.WriteFile(filepath.Join(dir, "harness.yaml"), []byte(harness), 0o600); err != nil {
		t.Fatal(err)
	}
	return names
}

func envName(role string) string {
	return "E2E_" + strings.ToUpper(role)
}

// runToEnd runs the playbook, approving every pending call, until the run
// ends; it returns the last exit code and the output.
func runToEnd(t *testing.T, bin, dir string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := os.Environ()
	for role, v := range fakeSecrets {
		env = append(env, envName(role)+"="+v)
	}
	exe := func(args ...string) (int, string) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}
	code, out := exe("run", "--harness", "harness.yaml", "--format", "json", "--input", "{}", "playbook.json")
	for round := 0; code == 3 && round < 20; round++ {
		var o struct {
			Run     string `json:"run"`
			Waiting []struct {
				Kind, ID string
			} `json:"waiting"`
		}
		if err := json.Unmarshal([]byte(jsonPart(out)), &o); err != nil {
			t.Fatalf("reading the run's outcome: %v\n%s", err, out)
		}
		for _, w := range o.Waiting {
			if w.Kind != "call" {
				t.Fatalf("the run waits for %s, not a call approval:\n%s", w.Kind, out)
			}
			if c, o2 := exe("approve", "--harness", "harness.yaml", "--reason", "end-to-end test", o.Run, w.ID); c != 0 {
				t.Fatalf("approve: exit %d\n%s", c, o2)
			}
		}
		code, out = exe("resume", "--harness", "harness.yaml", "--format", "json", o.Run)
	}
	return code, out
}

// jsonPart is the JSON object in a command's output (stderr may precede
// it).
func jsonPart(s string) string {
	sc := bufio.NewScanner(strings.NewReader(s))
	var b strings.Builder
	in := false
	for sc.Scan() {
		line := sc.Text()
		if line == "{" {
			in = true
		}
		if in {
			b.WriteString(line + "\n")
		}
		if line == "}" {
			break
		}
	}
	return b.String()
}

// sharesRequest reports whether another tool of names sends the same
// method and path as name (GraphQL tools all POST to one endpoint).
func sharesRequest(t *testing.T, conn *httpconn.Connection, p *httpconn.Provider, names []string, name string) bool {
	t.Helper()
	a, err := conn.Request(context.Background(), name, p.Example(name), "")
	if err != nil {
		return false
	}
	for _, other := range names {
		if other == name {
			continue
		}
		b, err := conn.Request(context.Background(), other, p.Example(other), "")
		if err == nil && a.Method == b.Method && a.URL.Path == b.URL.Path {
			return true
		}
	}
	return false
}

// TestProviderErrorIsAudited: a provider's error answer (here GitHub's
// documented 404, which Prism serves when asked with a Prefer header) is
// a clear tool error with the status and the provider's message, recorded
// in the audit log, and the raw body does not reach it.
func TestProviderErrorIsAudited(t *testing.T) {
	var mu sync.Mutex
	var statuses []int
	bin, dir, _ := githubOneCall(t, "github.issues.list", func(w http.ResponseWriter, r *http.Request, prism http.Handler) {
		if r.URL.Path == "/repos/octocat/Hello-World/issues" {
			r.Header.Set("Prefer", "code=404")
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		prism.ServeHTTP(rec, r)
		mu.Lock()
		statuses = append(statuses, rec.status)
		mu.Unlock()
	})
	_, out := runToEnd(t, bin, dir)
	var o struct{ Run string }
	if err := json.Unmarshal([]byte(jsonPart(out)), &o); err != nil || o.Run == "" {
		t.Fatalf("no run: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "audit", "--harness", "harness.yaml", "--format", "json", o.Run)
	cmd.Dir = dir
	audit, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("audit: %v\n%s", err, audit)
	}
	text := string(audit)
	if !strings.Contains(text, "github.issues.list: GET") || !strings.Contains(text, "answered 404 Not Found") {
		t.Errorf("the audit log does not record the provider's 404 as the call's error:\n%s", tail(text, 3000))
	}
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, s := range statuses {
		found = found || s == 404
	}
	if !found {
		t.Errorf("the mock never answered 404: %v", statuses)
	}
}

func providerNamed(t *testing.T, name string) *httpconn.Provider {
	t.Helper()
	for _, p := range allProviders(t) {
		if p.Name() == name {
			return p
		}
	}
	t.Fatalf("no provider %s", name)
	return nil
}

// auditKinds counts the kinds of the audit records of the run whose
// outcome is out.
func auditKinds(t *testing.T, bin, dir, out string) map[string]int {
	t.Helper()
	var o struct{ Run string }
	if err := json.Unmarshal([]byte(jsonPart(out)), &o); err != nil || o.Run == "" {
		t.Fatalf("no run in the outcome: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "audit", "--harness", "harness.yaml", "--format", "json", o.Run)
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	var log struct{ Records []struct{ Kind string } }
	if err := json.Unmarshal(b, &log); err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	kinds := map[string]int{}
	for _, r := range log.Records {
		kinds[r.Kind]++
	}
	return kinds
}

// TestLostWriteIsOutcomeUnknown: a write whose answer is lost after the
// provider got it (the connection is cut once the request reached Prism)
// makes the run wait for a person as outcome-unknown, and the write is
// sent once, never retried.
func TestLostWriteIsOutcomeUnknown(t *testing.T) {
	var posts atomic.Int32
	bin, dir, _ := githubOneCall(t, "github.issue.create", func(w http.ResponseWriter, r *http.Request, prism http.Handler) {
		if r.Method == http.MethodPost && r.URL.Path == "/repos/octocat/Hello-World/issues" {
			posts.Add(1)
			// The provider gets the write; its answer is lost.
			prism.ServeHTTP(httptest.NewRecorder(), r)
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		prism.ServeHTTP(w, r)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--harness", "harness.yaml", "--format", "json", "--input", "{}", "playbook.json")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), envName("accessToken")+"="+fakeSecrets["accessToken"])
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 3 {
		t.Fatalf("exit %d, want 3 (the run waits for a person)\n%s", code, out)
	}
	var o struct {
		Waiting []struct{ Kind, Tool string } `json:"waiting"`
	}
	if err := json.Unmarshal([]byte(jsonPart(string(out))), &o); err != nil {
		t.Fatal(err)
	}
	if len(o.Waiting) != 1 || o.Waiting[0].Kind != "outcome_unknown" || o.Waiting[0].Tool != "github.issue.create" {
		t.Errorf("waiting %+v; want one outcome_unknown for github.issue.create\n%s", o.Waiting, out)
	}
	if n := posts.Load(); n != 1 {
		t.Errorf("the provider got the write %d times; want exactly 1 (never retried blindly)", n)
	}
}

// TestOAuthRefreshThroughRun: a GitHub connection that binds a refresh
// token and client credentials but no access token gets one from the
// token endpoint (a loopback fake at the wire level, RFC 6749 section 6)
// and sends it to the provider, through openplaybook run.
func TestOAuthRefreshThroughRun(t *testing.T) {
	var grants atomic.Int32
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if r.Form.Get("grant_type") != "refresh_token" || r.Form.Get("refresh_token") != "rt_e2e" || r.Form.Get("client_id") != "cid_e2e" {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error": "invalid_grant"}`)
			return
		}
		grants.Add(1)
		io.WriteString(w, `{"access_token": "gho_issuedByTheTokenEndpoint", "token_type": "bearer", "expires_in": 28800}`)
	}))
	defer tokens.Close()
	var mu sync.Mutex
	var auths []string
	bin, dir, base := githubOneCall(t, "github.pulls.list", func(w http.ResponseWriter, r *http.Request, prism http.Handler) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		prism.ServeHTTP(w, r)
	})
	harness := fmt.Sprintf(`connections:
  github:
    authKind: oauth
    secrets: {refreshToken: GH_REFRESH, clientId: GH_CLIENT_ID, clientSecret: GH_CLIENT_SECRET}
    baseURL: %s
    tokenURL: %s
agents:
  tester: {driver: transcript, transcript: transcript.json}
store:
  sqlite: state.db
`, base, tokens.URL)
	if err := os.WriteFile(filepath.Join(dir, "harness.yaml"), []byte(harness), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--harness", "harness.yaml", "--format", "json", "--input", "{}", "playbook.json")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GH_REFRESH=rt_e2e", "GH_CLIENT_ID=cid_e2e", "GH_CLIENT_SECRET=cs_e2e")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if kinds := auditKinds(t, bin, dir, string(out)); kinds["call.succeeded"] != 1 {
		t.Errorf("audit kinds %v; want the call to succeed", kinds)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auths) == 0 {
		t.Fatal("nothing reached the provider")
	}
	for _, a := range auths {
		if a != "Bearer gho_issuedByTheTokenEndpoint" {
			t.Errorf("the provider got Authorization %q; want the issued token", a)
		}
	}
	// One grant per process: check's preflight and the run share it.
	if n := grants.Load(); n < 1 || n > 2 {
		t.Errorf("%d grants", n)
	}
	if strings.Contains(string(out), "gho_issuedByTheTokenEndpoint") {
		t.Errorf("the issued token is in the output:\n%s", out)
	}
}

// githubOneCall starts Prism on GitHub's description behind front (which
// gets each request and the proxy to Prism), and writes a rig whose
// transcript makes the one call tool with its example arguments. It
// returns the CLI, the rig's directory and front's URL.
func githubOneCall(t *testing.T, tool string, front func(w http.ResponseWriter, r *http.Request, prism http.Handler)) (bin, dir, base string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Prism")
	}
	bin = openplaybook(t)
	p := providerNamed(t, "github")
	mocks <- struct{}{}
	t.Cleanup(func() { <-mocks })
	mock := startMock(t, p.Spec(), descriptionPath(t, p.Spec().Description))
	u, _ := url.Parse(mock)
	prism := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { front(w, r, prism) }))
	t.Cleanup(srv.Close)
	dir = t.TempDir()
	writeRig(t, dir, p, srv.URL)
	calls := map[string]any{"steps": map[string]any{"call": []any{map[string]any{"tool": tool, "arguments": json.RawMessage(p.Example(tool))}}}}
	b, _ := json.Marshal(calls)
	if err := os.WriteFile(filepath.Join(dir, "transcript.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return bin, dir, srv.URL
}

// statusRecorder notes the status a handler answered with.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}
