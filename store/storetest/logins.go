package storetest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/store"
)

// testConsoleLogins: an engine keeps console logins ([store.ConsoleLogins])
// by hash, answers ErrNotFound for an unknown, expired or ended one, ends
// one without touching another, refuses a hash twice, and drops expired
// logins when a new one is recorded.
func testConsoleLogins(t *testing.T, openTest Opener) {
	s := openTest(t)
	cl, ok := s.(store.ConsoleLogins)
	if !ok {
		t.Fatalf("%T does not keep console logins (store.ConsoleLogins)", s)
	}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	a := store.ConsoleLogin{Hash: "aa", CSRFHash: "ca", Who: []byte(`{"subject":"ada","via":"oidc"}`), Created: now, Expires: now.Add(time.Hour)}
	b := store.ConsoleLogin{Hash: "bb", CSRFHash: "cb", Created: now, Expires: now.Add(2 * time.Hour)}
	for _, l := range []store.ConsoleLogin{a, b} {
		if err := cl.CreateConsoleLogin(bg, l); err != nil {
			t.Fatalf("create %s: %v", l.Hash, err)
		}
	}
	if err := cl.CreateConsoleLogin(bg, a); err == nil {
		t.Fatal("a login recorded twice under one hash")
	}
	if err := cl.CreateConsoleLogin(bg, store.ConsoleLogin{Hash: "cc", Created: now, Expires: now.Add(time.Hour)}); err == nil {
		t.Fatal("a login without a CSRF hash was recorded")
	}
	got, err := cl.ConsoleLogin(bg, "aa", now.Add(time.Minute))
	if err != nil || got.CSRFHash != "ca" || !bytes.Equal(got.Who, a.Who) || !got.Expires.Equal(a.Expires) || !got.Created.Equal(a.Created) {
		t.Fatalf("read back: %+v, %v", got, err)
	}
	for _, h := range []string{"a", "aa ", "AA", ""} {
		if _, err := cl.ConsoleLogin(bg, h, now); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("login %q: %v; want ErrNotFound", h, err)
		}
	}
	if _, err := cl.ConsoleLogin(bg, "aa", a.Expires); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a login at its expiry: %v; want ErrNotFound", err)
	}
	if err := cl.DeleteConsoleLogin(bg, "aa"); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteConsoleLogin(bg, "aa"); err != nil {
		t.Fatalf("ending an ended login: %v", err)
	}
	if _, err := cl.ConsoleLogin(bg, "aa", now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an ended login: %v; want ErrNotFound", err)
	}
	if _, err := cl.ConsoleLogin(bg, "bb", now); err != nil {
		t.Errorf("ending one login ended another: %v", err)
	}
	// A login recorded after b expired removes it: asked as of before its
	// expiry, it is gone.
	later := now.Add(3 * time.Hour)
	if err := cl.CreateConsoleLogin(bg, store.ConsoleLogin{Hash: "dd", CSRFHash: "cd", Created: later, Expires: later.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ConsoleLogin(bg, "bb", now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an expired login was kept after a later login: %v", err)
	}
}
