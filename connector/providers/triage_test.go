package providers_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// recorded is one request a fake provider got.
type recorded struct {
	method, path string
	body         []byte
}

// fakeAPI answers every request with answer and records what it got.
func fakeAPI(t *testing.T, answer string) (string, func() []recorded) {
	t.Helper()
	var mu sync.Mutex
	var got []recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, recorded{r.Method, r.URL.EscapedPath(), b})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []recorded {
		mu.Lock()
		defer mu.Unlock()
		return append([]recorded(nil), got...)
	}
}

func callTool(t *testing.T, provider, base, name, args string) map[string]any {
	t.Helper()
	conn := openFor(t, providerNamed(t, provider), base)
	tool := conn.Tools()[name]
	if tool == nil {
		t.Fatalf("the %s connector has no tool %s", provider, name)
	}
	res, err := tool.Call(context.Background(), jsontext.Value(args))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	if err := json.Unmarshal(res.Content, &out); err != nil {
		t.Fatalf("%s answered %s: %v", name, res.Content, err)
	}
	return out
}

// TestGitHubIssueGet: github.issue.get reads the issue of that number, one
// GET of /repos/{owner}/{repo}/issues/{number}, and maps GitHub's answer
// (labels as objects, a pull request flagged by its pull_request member).
func TestGitHubIssueGet(t *testing.T) {
	base, got := fakeAPI(t, `{"number": 1347, "title": "Found a bug", "state": "closed", "state_reason": "completed",
		"user": {"login": "octocat"}, "labels": [{"name": "bug"}, {"name": "p1"}], "assignees": [{"login": "hubot"}],
		"comments": 3, "created_at": "2026-11-02T10:00:00Z", "updated_at": "2026-11-03T10:00:00Z", "closed_at": "2026-11-03T10:00:00Z",
		"html_url": "https://github.com/octocat/Hello-World/issues/1347", "body": "It crashes."}`)
	out := callTool(t, "github", base, "github.issue.get", `{"repo": "octocat/Hello-World", "number": 1347}`)
	want := map[string]any{"number": 1347.0, "title": "Found a bug", "state": "closed", "stateReason": "completed", "author": "octocat",
		"labels": []any{"bug", "p1"}, "assignees": []any{"hubot"}, "comments": 3.0, "isPullRequest": false,
		"createdAt": "2026-11-02T10:00:00Z", "updatedAt": "2026-11-03T10:00:00Z", "closedAt": "2026-11-03T10:00:00Z",
		"url": "https://github.com/octocat/Hello-World/issues/1347", "body": "It crashes."}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("github.issue.get answered\n%v\nwant\n%v", out, want)
	}
	if r := got(); len(r) != 1 || r[0].method != "GET" || r[0].path != "/repos/octocat/Hello-World/issues/1347" {
		t.Errorf("GitHub got %+v, want one GET /repos/octocat/Hello-World/issues/1347", r)
	}

	base, _ = fakeAPI(t, `{"number": 7, "title": "Add it", "state": "open", "html_url": "https://github.com/o/r/pull/7", "pull_request": {"url": "x"}}`)
	if out := callTool(t, "github", base, "github.issue.get", `{"repo": "o/r", "number": 7}`); out["isPullRequest"] != true {
		t.Errorf("a pull request is not flagged: %v", out)
	}
}

// TestLinearIssuesSearch: linear.issues.search sends one searchIssues query
// with the term, the team filter and the limit as variables (never spliced
// into the document), and maps the nodes.
func TestLinearIssuesSearch(t *testing.T) {
	base, got := fakeAPI(t, `{"data": {"searchIssues": {"nodes": [{"identifier": "ENG-142", "title": "CSV export times out", "url": "https://linear.app/acme/issue/ENG-142",
		"priority": 2, "updatedAt": "2026-11-03T10:00:00.000Z", "state": {"name": "In Progress"}, "labels": {"nodes": [{"name": "bug"}]}, "team": {"key": "ENG"}}]}}}`)
	term := `CSV export" } mutation { issueDelete(id: "x") { success } } #`
	args, _ := json.Marshal(map[string]any{"term": term, "teamKey": "ENG", "limit": 10})
	out := callTool(t, "linear", base, "linear.issues.search", string(args))
	want := map[string]any{"issues": []any{map[string]any{"key": "ENG-142", "title": "CSV export times out", "state": "In Progress", "priority": 2.0,
		"labels": []any{"bug"}, "team": "ENG", "url": "https://linear.app/acme/issue/ENG-142", "updatedAt": "2026-11-03T10:00:00.000Z"}}}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("linear.issues.search answered\n%v\nwant\n%v", out, want)
	}
	r := got()
	if len(r) != 1 || r[0].method != "POST" || r[0].path != "/graphql" {
		t.Fatalf("Linear got %+v, want one POST /graphql", r)
	}
	var sent struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if err := json.Unmarshal(r[0].body, &sent); err != nil {
		t.Fatal(err)
	}
	wantVars := map[string]any{"term": term, "filter": map[string]any{"team": map[string]any{"key": map[string]any{"eq": "ENG"}}}, "first": 10.0}
	if !reflect.DeepEqual(sent.Variables, wantVars) {
		t.Errorf("variables %v, want %v", sent.Variables, wantVars)
	}
	if strings.Contains(sent.Query, "issueDelete") || !strings.Contains(sent.Query, "searchIssues(term: $term") {
		t.Errorf("the query document is not the tool's own: %s", sent.Query)
	}

	// Only a term: no team filter, Linear's page of 25.
	base, got = fakeAPI(t, `{"data": {"searchIssues": {"nodes": []}}}`)
	if out := callTool(t, "linear", base, "linear.issues.search", `{"term": "timeout"}`); !reflect.DeepEqual(out, map[string]any{"issues": []any{}}) {
		t.Errorf("no match answered %v", out)
	}
	var only struct {
		Variables map[string]any `json:"variables"`
	}
	if err := json.Unmarshal(got()[0].body, &only); err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"term": "timeout", "first": 25.0}; !reflect.DeepEqual(only.Variables, want) {
		t.Errorf("variables %v, want %v", only.Variables, want)
	}
}
