package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/openplaybook/openplaybook/internal/teststore"
	"github.com/openplaybook/openplaybook/runtime"
)

// rotatingGitHub is GitHub at the HTTP wire: a token endpoint that rotates
// the refresh token on every refresh and revokes the whole grant when one
// is presented twice, and an API that accepts only the grant's current
// access tokens, counting the issues it created.
type rotatingGitHub struct {
	mu        sync.Mutex
	refresh   string
	used      map[string]bool
	valid     map[string]bool
	revoked   bool
	n         int
	refreshes int
	issues    int
	srv       *httptest.Server
	// scope, when set, is the scope the token endpoint says it granted.
	scope string
}

func newRotatingGitHub(t *testing.T) *rotatingGitHub {
	g := &rotatingGitHub{refresh: "ghr_bound_refresh_0000000000", used: map[string]bool{}, valid: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /login/oauth/access_token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		g.mu.Lock()
		defer g.mu.Unlock()
		g.refreshes++
		w.Header().Set("Content-Type", "application/json")
		rt := r.Form.Get("refresh_token")
		if g.used[rt] {
			g.revoked, g.valid = true, map[string]bool{}
		}
		if g.revoked || rt != g.refresh {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error": "bad_refresh_token"}`)
			return
		}
		g.used[rt] = true
		g.n++
		g.refresh = fmt.Sprintf("ghr_rotated_%d_%s", g.n, strings.Repeat("r", 20))
		at := fmt.Sprintf("ghu_issued_%d_%s", g.n, strings.Repeat("a", 20))
		g.valid[at] = true
		if g.scope != "" {
			b, _ := json.Marshal(map[string]any{"access_token": at, "refresh_token": g.refresh, "token_type": "bearer", "expires_in": 28800, "scope": g.scope})
			w.Write(b)
			return
		}
		fmt.Fprintf(w, `{"access_token": %q, "refresh_token": %q, "token_type": "bearer", "expires_in": 28800}`, at, g.refresh)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		defer g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if !g.valid[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")] {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"message": "Bad credentials"}`)
			return
		}
		switch {
		case r.Method == "GET" && r.URL.Path == "/repos/octocat/Hello-World":
			io.WriteString(w, `{"full_name": "octocat/Hello-World", "default_branch": "main", "private": false, "description": "d", "html_url": "https://github.test/octocat/Hello-World", "open_issues_count": 0, "archived": false}`)
		case r.Method == "POST" && r.URL.Path == "/repos/acme/widgets/issues":
			g.issues++
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"number": %d, "html_url": "https://github.test/acme/widgets/issues/%d"}`, g.issues, g.issues)
		default:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"message": "Not Found"}`)
		}
	})
	g.srv = httptest.NewServer(mux)
	t.Cleanup(g.srv.Close)
	return g
}

// expire: time passes, every access token issued so far runs out.
func (g *rotatingGitHub) expire() {
	g.mu.Lock()
	g.valid = map[string]bool{}
	g.mu.Unlock()
}

func (g *rotatingGitHub) counts() (refreshes, issues int, revoked bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refreshes, g.issues, g.revoked
}

const vaultKeyValue = "3b1f5c0e9d7a4b2c8e6f1a0d5c9b7e3f2a4d6c8b0e1f3a5c7d9b2e4f6a8c0d1e"

// newVaultEnv: a gate, then a step that creates one GitHub issue through
// an oauth connection with a refresh token, on the rotating fake; the
// harness keeps the tokens in the credential vault when vaulted.
func newVaultEnv(t *testing.T, g *rotatingGitHub, vaulted bool) (*rtEnv, string) {
	e := newRTEnv(t, rtConfig{transcripts: map[string]string{"clerk": rtTranscript(map[string][]map[string]any{
		"file": {rtCall("github.issue.create", map[string]any{"repo": "acme/widgets", "title": "Exports time out"})},
	})}})
	var reg struct {
		Providers []struct {
			Provider string           `json:"provider"`
			Tools    []map[string]any `json:"tools"`
		} `json:"providers"`
	}
	var out bytes.Buffer
	if code := (&CLI{Stdout: &out, Stderr: io.Discard}).Main([]string{"registry", "--format", "json"}); code != 0 {
		t.Fatalf("registry: exit %d", code)
	}
	if err := json.Unmarshal(out.Bytes(), &reg); err != nil {
		t.Fatal(err)
	}
	var def map[string]any
	for _, p := range reg.Providers {
		for _, tl := range p.Tools {
			if tl["name"] == "github.issue.create" {
				def = tl
			}
		}
	}
	doc := map[string]any{
		"openplaybook": "1.6",
		"manifest":     map[string]any{"id": "file-issue", "name": "file-issue", "version": "1.0.0", "description": "Files an issue after a person confirms.", "requiredConnectors": []string{"github"}},
		"requires": map[string]any{"connections": []any{map[string]any{"provider": "github", "authKind": "oauth", "scopes": []string{"issues:write"}, "capabilities": []string{"github.issue.create"}}},
			"mcpServers": []any{}, "secrets": []any{}},
		"tools": []any{def},
		"steps": []any{
			map[string]any{"id": "confirm", "kind": "gate", "purpose": "A person confirms the issue is wanted.", "next": "file"},
			map[string]any{"id": "file", "kind": "agent", "agent": "clerk", "purpose": "File the issue.", "allowedTools": []string{"github.issue.create"}},
		},
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	path := e.write("doc.json", string(b))

	hb, err := os.ReadFile(e.harness)
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	json.Unmarshal(hb, &h)
	h["connections"] = map[string]any{"github": map[string]any{"authKind": "oauth", "scopes": []string{"issues:write"}, "baseURL": g.srv.URL, "tokenURL": g.srv.URL + "/login/oauth/access_token",
		"secrets": map[string]any{"accessToken": "GITHUB_ACCESS_TOKEN", "refreshToken": "GITHUB_REFRESH_TOKEN", "clientId": "GITHUB_CLIENT_ID", "clientSecret": "GITHUB_CLIENT_SECRET"}}}
	if vaulted {
		h["store"].(map[string]any)["vault"] = map[string]any{"keySecret": "OPENPLAYBOOK_VAULT_KEY"}
	}
	hb, _ = json.MarshalIndent(h, "", "  ")
	e.write("harness.json", string(hb))
	e.write("secrets.env", "STRIPE_API_KEY="+runStripeSecret+"\nMEMORY_TOKEN="+runMemorySecret+
		"\nGITHUB_ACCESS_TOKEN=ghu_bound_expired_0000000000\nGITHUB_REFRESH_TOKEN=ghr_bound_refresh_0000000000\nGITHUB_CLIENT_ID=Iv1.0123456789abcdef\nGITHUB_CLIENT_SECRET=client-secret-0123456789abcdef0123\nOPENPLAYBOOK_VAULT_KEY="+vaultKeyValue+"\n")
	return e, path
}

// TestVaultRotatedRefreshAcrossResume: a run refreshes its GitHub token
// (the provider rotates the refresh token), waits at a gate, is approved,
// and its tokens run out; the resume is a new process. With the vault it
// refreshes from the rotated refresh token the store holds: the grant
// holds and the issue is created once, counted at the provider. Without
// it the resume presents the bound refresh token again, the provider
// revokes the grant and the approved call never runs (what issue 22
// reported); check warns about that harness.
func TestVaultRotatedRefreshAcrossResume(t *testing.T) {
	t.Parallel()
	for _, vaulted := range []bool{true, false} {
		t.Run(fmt.Sprintf("vault=%v", vaulted), func(t *testing.T) {
			g := newRotatingGitHub(t)
			e, doc := newVaultEnv(t, g, vaulted)
			o := e.outcome(ExitWaiting, "run", doc)
			e.cli(ExitOK, "approve", o.Run, "confirm")
			g.expire()
			if vaulted {
				if o := e.outcome(ExitOK, "resume", o.Run); o.Status != runtime.Completed {
					t.Fatalf("resume: %+v", o)
				}
				refreshes, issues, revoked := g.counts()
				if issues != 1 || revoked || refreshes != 2 {
					t.Fatalf("at the provider: %d issues, %d refreshes, grant revoked %v; want 1, 2, false", issues, refreshes, revoked)
				}
				// The store holds the tokens sealed; nothing printed
				// them.
				g.mu.Lock()
				cur := g.refresh
				g.mu.Unlock()
				raw := storeBytes(t, e)
				for _, s := range []string{cur, "ghu_issued_", "ghr_rotated_", "ghr_bound_refresh"} {
					if raw != nil && bytes.Contains(raw, []byte(s)) {
						t.Errorf("the store file holds %q in the clear", s)
					}
					if strings.Contains(e.printed.String(), s) {
						t.Errorf("a command printed %q", s)
					}
				}
				list, _ := e.cli(ExitOK, "auth", "list")
				if !strings.Contains(list, "connection:github") || !strings.Contains(list, "refresh_token") || strings.Contains(list, "ghu_") || strings.Contains(list, "ghr_") {
					t.Errorf("auth list:\n%s", list)
				}
				return
			}
			e.cli(ExitProblems, "resume", o.Run)
			if _, issues, revoked := g.counts(); issues != 0 || !revoked {
				t.Fatalf("without the vault: %d issues, revoked %v; want the fixture to revoke the grant", issues, revoked)
			}
			_, stderr := e.cli(ExitProblems, "check", doc)
			if !strings.Contains(stderr+e.printed.String(), "preflight-connection-vault") {
				t.Errorf("check does not warn of tokens kept in memory only")
			}
		})
	}
}

// storeBytes is the SQLite store file's bytes (nil on PostgreSQL, whose
// rows the vault test of package vault checks).
func storeBytes(t *testing.T, e *rtEnv) []byte {
	if teststore.Postgres(t) {
		return nil
	}
	var raw []byte
	filepath.WalkDir(filepath.Join(e.dir, "state"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			raw = append(raw, b...)
		}
		return nil
	})
	return raw
}

// TestAuthCommands: auth list names the entries without their tokens,
// revoke removes one, rekey reseals what an earlier key sealed once the
// harness names a new key and the old one as previous; a harness without
// store.vault, or with a short key, is told what to add.
func TestAuthCommands(t *testing.T) {
	t.Parallel()
	g := newRotatingGitHub(t)
	e, doc := newVaultEnv(t, g, true)
	if out, _ := e.cli(ExitOK, "auth", "list"); !strings.Contains(out, "the credential vault is empty") {
		t.Errorf("empty list: %q", out)
	}
	e.outcome(ExitWaiting, "run", doc)
	out, _ := e.cli(ExitOK, "auth", "list", "--format", "json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || rows[0]["name"] != "connection:github" || rows[0]["currentKey"] != true || rows[0]["refreshToken"] != true {
		t.Fatalf("auth list --format json: %s (%v)", out, err)
	}
	oldKey := rows[0]["keyId"]

	// Rotate: a new key, the old one as previous.
	hb, _ := os.ReadFile(e.harness)
	var h map[string]any
	json.Unmarshal(hb, &h)
	h["store"].(map[string]any)["vault"] = map[string]any{"keySecret": "NEW_VAULT_KEY", "previousKeySecrets": []string{"OPENPLAYBOOK_VAULT_KEY"}}
	hb, _ = json.MarshalIndent(h, "", "  ")
	e.write("harness.json", string(hb))
	env, _ := os.ReadFile(filepath.Join(e.dir, "secrets.env"))
	e.write("secrets.env", string(env)+"NEW_VAULT_KEY="+strings.Repeat("9f", 20)+"\n")
	if out, _ := e.cli(ExitOK, "auth", "list"); !strings.Contains(out, "(old key)") {
		t.Errorf("list before rekey: %s", out)
	}
	if out, _ := e.cli(ExitOK, "auth", "rekey"); !strings.Contains(out, "resealed 1 entry") {
		t.Errorf("rekey: %s", out)
	}
	out, _ = e.cli(ExitOK, "auth", "list", "--format", "json")
	json.Unmarshal([]byte(out), &rows)
	if len(rows) != 1 || rows[0]["keyId"] == oldKey || rows[0]["currentKey"] != true {
		t.Errorf("after rekey: %s", out)
	}
	// The old key alone no longer opens it.
	h["store"].(map[string]any)["vault"] = map[string]any{"keySecret": "OPENPLAYBOOK_VAULT_KEY"}
	hb, _ = json.MarshalIndent(h, "", "  ")
	e.write("harness.json", string(hb))
	if out, _ := e.cli(ExitOK, "auth", "list"); !strings.Contains(out, "sealed with a key this harness does not give") {
		t.Errorf("list with the old key only: %s", out)
	}
	h["store"].(map[string]any)["vault"] = map[string]any{"keySecret": "NEW_VAULT_KEY"}
	hb, _ = json.MarshalIndent(h, "", "  ")
	e.write("harness.json", string(hb))

	if out, _ := e.cli(ExitOK, "auth", "revoke", "connection:github"); !strings.Contains(out, "removed connection:github") {
		t.Errorf("revoke: %s", out)
	}
	if _, stderr := e.cli(ExitProblems, "auth", "revoke", "connection:github"); !strings.Contains(stderr, "no entry") {
		t.Errorf("second revoke: %s", stderr)
	}
	if out, _ := e.cli(ExitOK, "auth", "list"); !strings.Contains(out, "empty") {
		t.Errorf("after revoke: %s", out)
	}

	// A short key is refused, naming the secret and never its value.
	e.write("secrets.env", string(env)+"NEW_VAULT_KEY=short-key-value\n")
	if _, stderr := e.cli(ExitProblems, "auth", "list"); !strings.Contains(stderr, "NEW_VAULT_KEY") || !strings.Contains(stderr, "at least 32") || strings.Contains(stderr, "short-key-value") {
		t.Errorf("short key: %s", stderr)
	}
	delete(h["store"].(map[string]any), "vault")
	hb, _ = json.MarshalIndent(h, "", "  ")
	e.write("harness.json", string(hb))
	if _, stderr := e.cli(ExitUsage, "auth", "list"); !strings.Contains(stderr, "store.vault.keySecret") {
		t.Errorf("no vault: %s", stderr)
	}
	if strings.Contains(e.printed.String(), vaultKeyValue) || strings.Contains(e.printed.String(), "ghu_") {
		t.Error("a key or token was printed")
	}
}
