package httpconn_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/engine"
)

// TestVaultRefreshErrorRedactsStoredRefreshToken: a hostile token endpoint
// that answers a refresh with an error whose code echoes the refresh
// token it was sent (and control characters, and a megabyte of text).
// The refresh token came from the vault (another process rotated it), so
// this process's redactor had never been told it: the error a call
// returns, which reaches the run's journal and audit log, must carry
// none of it, no control character, and stay short.
func TestVaultRefreshErrorRedactsStoredRefreshToken(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run(fmt.Sprint("plain=", plain), func(t *testing.T) { vaultRefreshErrorEcho(t, plain) })
	}
}

// vaultRefreshErrorEcho: plain, the error code is the refresh token alone
// (characters RFC 6749 allows in a code); else with control characters
// and half a megabyte of text.
func vaultRefreshErrorEcho(t *testing.T, plain bool) {
	const rotated = "Zq7fK2mWp9LxR4vT8nB3cY6hJ1sD5gA0eU"
	var mu sync.Mutex
	hostile := false
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		req.ParseForm()
		mu.Lock()
		first := !hostile
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if first {
			// A short-lived access token: the next process refreshes.
			fmt.Fprintf(w, `{"access_token": "at_1_aaaaaaaaaaaaaaaa", "refresh_token": %q, "token_type": "Bearer", "expires_in": 30}`, rotated)
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		code := "invalid_grant " + req.Form.Get("refresh_token") + " \x1b[2J\r\n" + strings.Repeat("x", 1<<19)
		if plain {
			code = req.Form.Get("refresh_token")
		}
		b, _ := json.Marshal(map[string]string{"error": code})
		w.Write(b)
	}))
	defer tokens.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "Bearer at_1_aaaaaaaaaaaaaaaa" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		io.WriteString(w, `{"id": "1"}`)
	}))
	defer api.Close()
	r := &rotating{tokens: tokens, api: api}
	path := filepath.Join(t.TempDir(), "store.db")
	opens := func() store.Store {
		st, err := engine.OpenSQLite(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a := open(t, spec(nil), *r.process(t, opens()))
	if _, err := call(t, a, "acme.item.get", `{"id": "1"}`); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	hostile = true
	mu.Unlock()
	b := open(t, spec(nil), *r.process(t, opens()))
	_, err := call(t, b, "acme.item.get", `{"id": "1"}`)
	if err == nil {
		t.Fatal("the refresh the hostile endpoint refused succeeded")
	}
	msg := err.Error()
	if strings.Contains(msg, rotated) {
		t.Errorf("the error carries the refresh token from the vault: %.200q", msg)
	}
	if strings.ContainsFunc(msg, unicode.IsControl) {
		t.Errorf("the error carries the token endpoint's control characters: %.200q", msg)
	}
	if len(msg) > 1000 {
		t.Errorf("the error is %d bytes: the token endpoint's error code is not clipped", len(msg))
	}
}

// TestVaultUnsendableAccessTokenNotKeptForever: a hostile token endpoint
// answers one refresh with an access token holding a line break and no
// expiry (and a rotated refresh token). The connection rightly never
// sends it; but the vault keeps it as a fresh token, so every later call
// of every process on the store fails "nothing was sent" and nothing
// ever refreshes it (no 401 comes back), until an operator runs auth
// revoke. Before the vault a restart cleared it. The next call should
// refresh, from the rotated refresh token, and succeed.
func TestVaultUnsendableAccessTokenNotKeptForever(t *testing.T) {
	var mu sync.Mutex
	n := 0
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		req.ParseForm()
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if first {
			io.WriteString(w, `{"access_token": "at_bad\r\nX-Injected: 1", "refresh_token": "rt_rotated_0123456789abcdef", "token_type": "Bearer"}`)
			return
		}
		if req.Form.Get("refresh_token") != "rt_rotated_0123456789abcdef" {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error": "invalid_grant"}`)
			return
		}
		io.WriteString(w, `{"access_token": "at_good_0123456789abcdef", "refresh_token": "rt_rotated_0123456789abcdef", "token_type": "Bearer", "expires_in": 3600}`)
	}))
	defer tokens.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "Bearer at_good_0123456789abcdef" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		io.WriteString(w, `{"id": "1"}`)
	}))
	defer api.Close()
	r := &rotating{tokens: tokens, api: api}
	path := filepath.Join(t.TempDir(), "store.db")
	opens := func() store.Store {
		st, err := engine.OpenSQLite(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a := open(t, spec(nil), *r.process(t, opens()))
	// The first call may fail or refresh again; the token is never sent
	// (the API would answer 401 and the call fail).
	call(t, a, "acme.item.get", `{"id": "1"}`)
	if _, err := call(t, a, "acme.item.get", `{"id": "1"}`); err != nil {
		t.Errorf("the next call of the same process: %v", err)
	}
	b := open(t, spec(nil), *r.process(t, opens()))
	if _, err := call(t, b, "acme.item.get", `{"id": "1"}`); err != nil {
		t.Errorf("a new process: %v", err)
	}
}
