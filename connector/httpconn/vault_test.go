package httpconn_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/connector"
	"github.com/openplaybook/openplaybook/internal/pgtest"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/engine"
	"github.com/openplaybook/openplaybook/vault"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var bg = context.Background()

// rotating is a provider whose token endpoint rotates the refresh token on
// every refresh and, when a refresh token is presented a second time,
// revokes the whole grant (OAuth 2.1 section 4.3.1; what GitHub Apps,
// Xero, Atlassian and others do): every access token of the grant then
// stops working. Its API counts the payments it applied.
type rotating struct {
	mu       sync.Mutex
	refresh  string          // the one valid refresh token
	used     map[string]bool // refresh tokens presented before
	valid    map[string]bool // access tokens that work
	revoked  bool
	n        int
	refreshs int
	applied  int
	tokens   *httptest.Server
	api      *httptest.Server
}

func newRotating(t *testing.T) *rotating {
	r := &rotating{refresh: "rt_0", used: map[string]bool{}, valid: map[string]bool{}}
	r.tokens = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		req.ParseForm()
		time.Sleep(20 * time.Millisecond) // a real endpoint's latency: long enough to race
		r.mu.Lock()
		defer r.mu.Unlock()
		r.refreshs++
		w.Header().Set("Content-Type", "application/json")
		rt := req.Form.Get("refresh_token")
		if r.used[rt] {
			r.revoked, r.valid = true, map[string]bool{}
		}
		if r.revoked || rt != r.refresh || req.Form.Get("client_id") != "cid" {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error": "invalid_grant"}`)
			return
		}
		r.used[rt] = true
		r.n++
		r.refresh = fmt.Sprintf("rt_%d_%s", r.n, strings.Repeat("r", 16))
		at := fmt.Sprintf("at_%d_%s", r.n, strings.Repeat("a", 16))
		r.valid[at] = true
		fmt.Fprintf(w, `{"access_token": %q, "refresh_token": %q, "token_type": "Bearer", "expires_in": 3600, "scope": "payments:write"}`, at, r.refresh)
	}))
	r.api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.valid[strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")] {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		r.applied++
		fmt.Fprintf(w, `{"id": "pay_%d"}`, r.applied)
	}))
	t.Cleanup(func() { r.tokens.Close(); r.api.Close() })
	return r
}

// expire makes every access token issued so far stop working (they ran
// out), the grant itself intact.
func (r *rotating) expire() {
	r.mu.Lock()
	r.valid = map[string]bool{}
	r.mu.Unlock()
}

func (r *rotating) counts() (refreshes, applied int, revoked bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refreshs, r.applied, r.revoked
}

// process opens the connection as a new process would: its own handle on
// the store (nil: no vault), the harness's secrets as bound.
func (r *rotating) process(t *testing.T, st store.Store) *connector.Config {
	cfg := &connector.Config{AuthKind: "oauth", BaseURL: r.api.URL, TokenURL: r.tokens.URL, Timeout: 10 * time.Second,
		Secrets: map[string]string{"accessToken": "at_bound_expired_000", "refreshToken": "rt_0", "clientId": "cid", "clientSecret": "csecret-0123456789"}}
	if st != nil {
		k, err := vault.NewKey(bytes.Repeat([]byte("k"), 32))
		if err != nil {
			t.Fatal(err)
		}
		sv, _ := store.As[store.Vault](st)
		cfg.Vault = vault.New(sv, k)
		cfg.Vault.Poll = 5 * time.Millisecond
	}
	return cfg
}

// TestRotatingRefreshAcrossProcesses: with the vault, a connection's
// rotating refresh token survives a restart and is refreshed once by two
// processes that need it at once: the grant is never revoked and every
// call is applied once, counted at the provider. Without the vault the
// same restart revokes the grant (the fixture detects reuse).
func TestRotatingRefreshAcrossProcesses(t *testing.T) {
	t.Run("memory only", func(t *testing.T) {
		r := newRotating(t)
		for range 2 { // two processes, one after the other
			c := open(t, spec(nil), *r.process(t, nil))
			call(t, c, "acme.payment.create", `{"amount": 1}`)
		}
		if _, _, revoked := r.counts(); !revoked {
			t.Fatal("the fixture did not revoke the grant when a restart presented the bound refresh token again")
		}
	})
	path := filepath.Join(t.TempDir(), "store.db")
	pg := pgtest.Schema(t)
	for _, eng := range []string{"sqlite", "postgres"} {
		t.Run(eng, func(t *testing.T) {
			opens := func() store.Store {
				var st store.Store
				var err error
				if eng == "sqlite" {
					st, err = engine.OpenSQLite(path)
				} else {
					st, err = engine.OpenPostgres(bg, pg)
				}
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				return st
			}
			r := newRotating(t)
			// The first process: the bound access token is refused, one
			// refresh, the call applied.
			a := open(t, spec(nil), *r.process(t, opens()))
			if _, err := call(t, a, "acme.payment.create", `{"amount": 1}`); err != nil {
				t.Fatal(err)
			}
			// A restart: the stored token is used as it is, no refresh.
			b := open(t, spec(nil), *r.process(t, opens()))
			if _, err := call(t, b, "acme.payment.create", `{"amount": 2}`); err != nil {
				t.Fatal(err)
			}
			if refreshes, applied, revoked := r.counts(); refreshes != 1 || applied != 2 || revoked {
				t.Fatalf("after a restart: %d refreshes, %d applied, revoked %v; want 1, 2, false", refreshes, applied, revoked)
			}
			// The access token runs out; two processes, each with several
			// calls in flight, need a new one at once.
			r.expire()
			procs := []*connector.Config{r.process(t, opens()), r.process(t, opens())}
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for i := range 8 {
				c := open(t, spec(nil), *procs[i%2])
				if i < 2 {
					// Warm: these already hold the expired token.
					c = b
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := call(t, c, "acme.item.get", `{"id": "1"}`)
					errs <- err
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Errorf("a call: %v", err)
				}
			}
			refreshes, applied, revoked := r.counts()
			if refreshes != 2 || applied != 2+8 || revoked {
				t.Fatalf("after the expiry: %d refreshes, %d applied, revoked %v; want 2 (one more), 10, false", refreshes, applied, revoked)
			}
			// The store holds the rotated token sealed, never in the clear.
			sv, _ := store.As[store.Vault](opens())
			c, err := sv.Credential(bg, "connection:acme")
			if err != nil {
				t.Fatal(err)
			}
			r.mu.Lock()
			cur := r.refresh
			r.mu.Unlock()
			if bytes.Contains(c.Sealed, []byte(cur)) || bytes.Contains(c.Sealed, []byte("at_2")) {
				t.Fatal("the vault entry holds a token in the clear")
			}
		})
	}
}
