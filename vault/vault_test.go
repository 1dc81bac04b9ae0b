package vault_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/internal/pgtest"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/engine"
	"github.com/openplaybook/openplaybook/vault"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var bg = context.Background()

// engines opens n handles on one fresh store of each engine: as n
// processes on one store would.
func engines(t *testing.T, n int) map[string][]store.Vault {
	out := map[string][]store.Vault{}
	path := filepath.Join(t.TempDir(), "store.db")
	url := pgtest.Schema(t)
	for range n {
		s, err := engine.OpenSQLite(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		p, err := engine.OpenPostgres(bg, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		for name, st := range map[string]store.Store{"sqlite": s, "postgres": p} {
			v, ok := store.As[store.Vault](st)
			if !ok {
				t.Fatalf("%s keeps no vault", name)
			}
			out[name] = append(out[name], v)
		}
	}
	return out
}

func key(t *testing.T, s string) *vault.Key {
	t.Helper()
	k, err := vault.NewKey([]byte(strings.Repeat(s, 40)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestShortKeyRefused(t *testing.T) {
	_, err := vault.NewKey([]byte("0123456789abcdef0123456789abcde"))
	if err == nil || !strings.Contains(err.Error(), "31 bytes") {
		t.Fatalf("a 31-byte key: %v; want refused, saying its length", err)
	}
}

// TestSealed: the store holds no token in the clear; an entry opens only
// under its own name and key; an altered byte never opens; an old key
// given as previous opens, and Rekey reseals with the current one.
func TestSealed(t *testing.T) {
	for eng, vs := range engines(t, 1) {
		t.Run(eng, func(t *testing.T) {
			st := vs[0]
			old, cur := key(t, "a"), key(t, "b")
			v := vault.New(st, old)
			tok := vault.Token{AccessToken: "at-SECRET-access-0123456789", RefreshToken: "rt-SECRET-refresh-0123456789", Grant: "refresh_token", Scopes: []string{"read"}, Expiry: time.Now().Add(time.Hour).UTC().Truncate(time.Second)}
			if _, err := v.Put(bg, "connection:github", tok, 0); err != nil {
				t.Fatal(err)
			}
			c, err := st.Credential(bg, "connection:github")
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{tok.AccessToken, tok.RefreshToken, "SECRET", "read"} {
				if bytes.Contains(c.Sealed, []byte(s)) {
					t.Fatalf("the store holds %q in the clear", s)
				}
			}
			got, ver, err := v.Get(bg, "connection:github")
			if err != nil || ver != 1 || got.AccessToken != tok.AccessToken || got.RefreshToken != tok.RefreshToken || !got.Expiry.Equal(tok.Expiry) {
				t.Fatalf("Get: %+v v%d %v", got, ver, err)
			}

			// The same bytes under another name do not open.
			if _, err := st.PutCredential(bg, "mcp:linear", c.Sealed, 0); err != nil {
				t.Fatal(err)
			}
			if _, _, err := v.Get(bg, "mcp:linear"); err == nil {
				t.Fatal("an entry moved to another name opened")
			}
			// Every altered byte is refused.
			for i := range c.Sealed {
				b := bytes.Clone(c.Sealed)
				b[i] ^= 0x20
				if err := st.DeleteCredential(bg, "mcp:x"); err != nil && !errors.Is(err, store.ErrNotFound) {
					t.Fatal(err)
				}
				if _, err := st.PutCredential(bg, "mcp:x", b, 0); err != nil {
					t.Fatal(err)
				}
				if got, _, err := vault.New(st, old).Get(bg, "mcp:x"); err == nil {
					t.Fatalf("byte %d altered: opened as %+v", i, got)
				} else if strings.Contains(err.Error(), "SECRET") {
					t.Fatalf("the error carries the token: %v", err)
				}
			}
			st.DeleteCredential(bg, "mcp:x")
			st.DeleteCredential(bg, "mcp:linear")

			// Another key: refused as unknown; with the old key as
			// previous: opens, and Rekey reseals.
			if _, _, err := vault.New(st, cur).Get(bg, "connection:github"); !errors.Is(err, vault.ErrUnknownKey) {
				t.Fatalf("opened with another key: %v; want ErrUnknownKey", err)
			}
			rot := vault.New(st, cur, old)
			list, err := rot.List(bg)
			if err != nil || len(list) != 1 || list[0].Current || list[0].KeyID != old.ID() || !list[0].HasRefresh || list[0].Grant != "refresh_token" {
				t.Fatalf("List before rekey: %+v %v", list, err)
			}
			if n, err := rot.Rekey(bg); n != 1 || err != nil {
				t.Fatalf("Rekey: %d %v; want 1", n, err)
			}
			if got, _, err := vault.New(st, cur).Get(bg, "connection:github"); err != nil || got.RefreshToken != tok.RefreshToken {
				t.Fatalf("after rekey, the new key alone: %+v %v", got, err)
			}
			if list, _ := rot.List(bg); len(list) != 1 || !list[0].Current || list[0].KeyID != cur.ID() {
				t.Fatalf("List after rekey: %+v", list)
			}
			if n, err := rot.Rekey(bg); n != 0 || err != nil {
				t.Fatalf("second Rekey: %d %v; want 0", n, err)
			}
		})
	}
}

// endpoint is a token endpoint that rotates refresh tokens and revokes
// the grant when a refresh token is presented twice (OAuth 2.1 section
// 4.3.1's refresh token rotation with reuse detection).
type endpoint struct {
	mu      sync.Mutex
	current string // the one valid refresh token
	used    map[string]bool
	revoked bool
	calls   atomic.Int64
	n       int
}

func newEndpoint(first string) *endpoint {
	return &endpoint{current: first, used: map[string]bool{}}
}

func (e *endpoint) refresh(rt string) (vault.Token, error) {
	e.calls.Add(1)
	time.Sleep(20 * time.Millisecond) // long enough for others to race
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.used[rt] {
		e.revoked = true
		return vault.Token{}, errors.New("invalid_grant: refresh token reused; grant revoked")
	}
	if e.revoked || rt != e.current {
		return vault.Token{}, errors.New("invalid_grant")
	}
	e.used[rt] = true
	e.n++
	e.current = fmt.Sprintf("rt-%d", e.n)
	return vault.Token{AccessToken: fmt.Sprintf("at-%d", e.n), RefreshToken: e.current, Grant: "refresh_token", Expiry: time.Now().Add(time.Hour)}, nil
}

// TestRefreshSingleFlight: many processes that all find their token
// refused refresh it once between them, and each uses the one token the
// endpoint issued; the grant is never revoked. Then a token that expires
// is refreshed once more from the rotated refresh token the store holds.
func TestRefreshSingleFlight(t *testing.T) {
	const procs = 8
	for eng, vs := range engines(t, procs) {
		t.Run(eng, func(t *testing.T) {
			ep := newEndpoint("rt-0")
			k := key(t, "k")
			seed := vault.Fingerprint("https://auth.example/token", "client", "rt-0")
			refused := "" // every process starts with no token
			var wg sync.WaitGroup
			got := make([]string, procs)
			errs := make([]error, procs)
			for i := range procs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					v := vault.New(vs[i], k)
					v.Poll = 5 * time.Millisecond
					tok, err := v.Refresh(bg, "connection:github", seed, func(t vault.Token) bool { return t.AccessToken != refused }, func(ctx context.Context, cur *vault.Token) (vault.Token, error) {
						rt := "rt-0"
						if cur != nil {
							rt = cur.RefreshToken
						}
						return ep.refresh(rt)
					})
					got[i], errs[i] = tok.AccessToken, err
				}()
			}
			wg.Wait()
			for i := range procs {
				if errs[i] != nil || got[i] != "at-1" {
					t.Errorf("process %d: %q %v; want at-1", i, got[i], errs[i])
				}
			}
			if n := ep.calls.Load(); n != 1 {
				t.Fatalf("the endpoint was asked %d times; want once", n)
			}

			// A new process (a restart) refreshes from the rotated
			// token the store holds, not the one the harness binds.
			v := vault.New(vs[procs-1], k)
			tok, err := v.Refresh(bg, "connection:github", seed, func(t vault.Token) bool { return t.AccessToken != "at-1" }, func(ctx context.Context, cur *vault.Token) (vault.Token, error) {
				rt := "rt-0"
				if cur != nil {
					rt = cur.RefreshToken
				}
				return ep.refresh(rt)
			})
			if err != nil || tok.AccessToken != "at-2" || ep.revoked {
				t.Fatalf("the restart's refresh: %+v %v (revoked %v)", tok, err, ep.revoked)
			}
		})
	}
}

// TestRefreshNotStoredNotUsed: a token whose write to the store fails is
// not returned (the rotated refresh token would be lost with it).
func TestRefreshNotStoredNotUsed(t *testing.T) {
	for eng, vs := range engines(t, 1) {
		t.Run(eng, func(t *testing.T) {
			v := vault.New(failingPut{vs[0]}, key(t, "k"))
			tok, err := v.Refresh(bg, "mcp:linear", "s", func(vault.Token) bool { return true }, func(context.Context, *vault.Token) (vault.Token, error) {
				return vault.Token{AccessToken: "fresh-token-0123456789"}, nil
			})
			if err == nil || tok.AccessToken != "" || strings.Contains(err.Error(), "fresh-token") {
				t.Fatalf("Refresh with a failing write: %+v %v; want an error and no token", tok, err)
			}
			// The lease was given back: the next refresh need not wait
			// for it to run out.
			ctx, cancel := context.WithTimeout(bg, 2*time.Second)
			defer cancel()
			if _, err := vault.New(vs[0], key(t, "k")).Refresh(ctx, "mcp:linear", "s", func(vault.Token) bool { return true }, func(context.Context, *vault.Token) (vault.Token, error) {
				return vault.Token{AccessToken: "second-0123456789"}, nil
			}); err != nil {
				t.Fatalf("after the failed write: %v", err)
			}
		})
	}
}

type failingPut struct{ store.Vault }

func (failingPut) PutCredential(context.Context, string, []byte, int64) (int64, error) {
	return 0, errors.New("disk full")
}

// TestRefreshOtherSeed: an entry that began from another harness
// credential is replaced, never used.
func TestRefreshOtherSeed(t *testing.T) {
	for eng, vs := range engines(t, 1) {
		t.Run(eng, func(t *testing.T) {
			v := vault.New(vs[0], key(t, "k"))
			if _, err := v.Put(bg, "connection:x", vault.Token{AccessToken: "old-0123456789", Seed: "before"}, 0); err != nil {
				t.Fatal(err)
			}
			var saw *vault.Token
			tok, err := v.Refresh(bg, "connection:x", "after", func(vault.Token) bool { return true }, func(_ context.Context, cur *vault.Token) (vault.Token, error) {
				saw = cur
				return vault.Token{AccessToken: "new-0123456789"}, nil
			})
			if err != nil || tok.AccessToken != "new-0123456789" || saw != nil {
				t.Fatalf("Refresh over another seed: %+v %v (fetch saw %+v)", tok, err, saw)
			}
			if got, ver, _ := v.Get(bg, "connection:x"); got.Seed != "after" || ver != 2 {
				t.Fatalf("stored: %+v v%d", got, ver)
			}
		})
	}
}

// TestRefreshWaitsForTheHolder: while another process holds the lease,
// Refresh waits for its write; when ctx ends first it says so.
func TestRefreshWaitsForTheHolder(t *testing.T) {
	for eng, vs := range engines(t, 1) {
		t.Run(eng, func(t *testing.T) {
			now := time.Now()
			if ok, err := vs[0].LeaseCredential(bg, "mcp:y", "other", now, now.Add(time.Minute)); !ok || err != nil {
				t.Fatal(ok, err)
			}
			v := vault.New(vs[0], key(t, "k"))
			ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
			defer cancel()
			var fetched atomic.Int64
			_, err := v.Refresh(ctx, "mcp:y", "s", func(vault.Token) bool { return true }, func(context.Context, *vault.Token) (vault.Token, error) {
				fetched.Add(1)
				return vault.Token{AccessToken: "x-0123456789"}, nil
			})
			if err == nil || !strings.Contains(err.Error(), "another process") || fetched.Load() != 0 {
				t.Fatalf("with the lease held elsewhere: %v, %d fetches", err, fetched.Load())
			}
			// The holder writes; a waiter takes its token.
			go func() {
				time.Sleep(100 * time.Millisecond)
				vault.New(vs[0], key(t, "k")).Put(bg, "mcp:y", vault.Token{AccessToken: "holders-0123456789", Seed: "s"}, 0)
			}()
			tok, err := v.Refresh(bg, "mcp:y", "s", func(vault.Token) bool { return true }, func(context.Context, *vault.Token) (vault.Token, error) {
				fetched.Add(1)
				return vault.Token{}, errors.New("not expected")
			})
			if err != nil || tok.AccessToken != "holders-0123456789" || fetched.Load() != 0 {
				t.Fatalf("waiting for the holder: %+v %v", tok, err)
			}
		})
	}
}
