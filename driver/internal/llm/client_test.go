package llm_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

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

func TestStep(t *testing.T) {
	now := time.Unix(1000, 0)
	step, ctx, cancel := llm.StartStep(context.Background(), "p", "s", time.Minute, "h.yaml:2", func() time.Time { return now })
	defer cancel()
	if err := step.Check(); err != nil || step.Ended(ctx) != nil {
		t.Fatalf("Check = %v before the deadline", err)
	}
	now = now.Add(time.Minute)
	err := step.Check()
	if want := `p: step "s": the step ran out of its stepTimeout of 1m0s (setting "stepTimeout"; agent binding h.yaml:2)`; err == nil || err.Error() != want || !errors.Is(err, driver.ErrStepTimeout) {
		t.Errorf("Check = %v, want %s", err, want)
	}
	none, ctx2, cancel2 := llm.StartStep(context.Background(), "p", "s", 0, "", nil)
	cancel2()
	if none.Check() != nil || none.Ended(ctx2) != nil {
		t.Errorf("a step without a timeout timed out")
	}
}

func TestNoted(t *testing.T) {
	base := errors.New("boom")
	if got := llm.Noted(base, 1, ""); got != base {
		t.Errorf("Noted without a note = %v", got)
	}
	got := llm.Noted(base, 3, "h.yaml:7")
	if got.Error() != "boom (gave up after 3 attempts; agent binding h.yaml:7)" || !errors.Is(got, base) {
		t.Errorf("Noted = %v", got)
	}
}
