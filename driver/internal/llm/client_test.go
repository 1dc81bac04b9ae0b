package llm_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/internal/llm"
)

func TestBaseURL(t *testing.T) {
	for _, tc := range []struct{ raw, shown, err string }{
		{"https://api.example.com/v1?tenant=t#frag", "https://api.example.com/v1", ""},
		{"http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1", ""},
		{"ftp://h", "", `p: the base URL "ftp://h" is not an http(s) URL`},
		{"https://", "", `p: the base URL "https://" is not an http(s) URL`},
		{"https://u:pw@h/v1", "", "p: the base URL holds user information; pass the API key as APIKey"},
	} {
		shown, err := llm.BaseURL("p", tc.raw)
		if shown != tc.shown || (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("BaseURL(%q) = %q, %v; want %q, %s", tc.raw, shown, err, tc.shown, tc.err)
		}
	}
}

func TestKeyShown(t *testing.T) {
	if got := llm.KeyShown(""); got != "unset" {
		t.Errorf(`KeyShown("") = %q`, got)
	}
	if got := llm.KeyShown("sk-secret-key"); got != "[redacted]" {
		t.Errorf("KeyShown(key) = %q", got)
	}
}

func TestRequestError(t *testing.T) {
	const key = "k3y-value"
	ue := &url.Error{Op: "Post", URL: "https://h/v1/x?token=" + key, Err: errors.New("refused with " + key)}
	err := llm.RequestError(context.Background(), "p", "https://h/v1", key, ue)
	if want := "p: Post https://h/v1: refused with [redacted]"; err.Error() != want || !errors.Is(err, ue) || !driver.Transient(err) {
		t.Errorf("url error: got %v, want %s wrapping the original", err, want)
	}
	other := errors.New("boom " + key)
	err = llm.RequestError(context.Background(), "p", "https://h/v1", key, other)
	if want := "p: request to https://h/v1: boom [redacted]"; err.Error() != want || !errors.Is(err, other) || driver.Transient(err) {
		t.Errorf("other error: got %v, want %s", err, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = llm.RequestError(ctx, "p", "https://h/v1", key, ue)
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), key) || driver.Transient(err) {
		t.Errorf("done ctx: got %v, want p: context canceled", err)
	}
}
