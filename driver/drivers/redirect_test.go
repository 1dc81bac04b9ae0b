package drivers_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/drivers"
	"github.com/openplaybook/openplaybook/driver/internal/llm"
)

const redirectKey = "sk-redirect-0123456789SECRET"

// modelDrivers are the drivers that talk to a model API, with the path
// under the test server that is their base URL.
var modelDrivers = []struct{ name, base string }{
	{"anthropic", ""},
	{"openai", "/v1"},
	{"openai-responses", "/v1"},
}

// No model driver follows a redirect: whatever 3xx the base URL answers
// (300 and 304 included, and even when it asks for a retry), not one
// request reaches where it points, so neither the key nor the
// conversation does; the step fails naming the status, the base got one
// request, and no tool ran. The probe is held to the same.
func TestNoDriverFollowsARedirect(t *testing.T) {
	var elsewhere atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		if strings.Contains(fmt.Sprint(r.Header), redirectKey) {
			t.Errorf("the key reached the redirect's target: %s %s", r.Method, r.URL)
		}
		http.Error(w, "gotcha", http.StatusTeapot)
	}))
	defer target.Close()

	for _, d := range modelDrivers {
		for _, status := range []int{300, 301, 302, 303, 304, 307, 308} {
			t.Run(fmt.Sprintf("%s/%d", d.name, status), func(t *testing.T) {
				var asked atomic.Int64
				base := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					asked.Add(1)
					w.Header().Set("Location", target.URL+r.URL.RequestURI())
					w.Header().Set("X-Should-Retry", "true")
					w.WriteHeader(status)
				}))
				defer base.Close()
				dr, err := drivers.New(d.name, map[string]any{"model": "m", "baseURL": base.URL + d.base, "apiKeySecret": "KEY"},
					&driver.Setup{Secret: func(string) (string, error) { return redirectKey, nil }})
				if err != nil {
					t.Fatal(err)
				}
				tool := &countingCaller{}
				_, err = dr.RunStep(context.Background(), driver.StepInput{StepID: "s", Agent: "a", Purpose: "p",
					Tools: []driver.Tool{{Name: "charge.refund", InputSchema: jsontext.Value(`{"type":"object"}`)}}}, tool)
				checkRedirectErr(t, err, status, target.URL)
				if n := asked.Load(); n != 1 {
					t.Errorf("the base got %d requests, want 1 (a redirect is not retried)", n)
				}
				if tool.n.Load() != 0 {
					t.Errorf("%d tool calls ran", tool.n.Load())
				}
				if p, ok := dr.(driver.Prober); ok {
					checkRedirectErr(t, p.Probe(context.Background()), status, target.URL)
				}
			})
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("%d requests reached the redirect's target, want 0", n)
	}
}

func checkRedirectErr(t *testing.T, err error, status int, to string) {
	t.Helper()
	var re *llm.RedirectError
	if !errors.As(err, &re) || re.StatusCode != status || driver.Transient(err) {
		t.Fatalf("err = %v, want a RedirectError for %d, not transient", err, status)
	}
	for _, w := range []string{fmt.Sprintf("answered %d %s to %s", status, http.StatusText(status), to), "redirects are not followed"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if strings.Contains(err.Error(), redirectKey) {
		t.Errorf("the error holds the key: %v", err)
	}
}

// countingCaller counts the calls that reach the tool.
type countingCaller struct{ n atomic.Int64 }

func (c *countingCaller) Call(context.Context, driver.Call) (driver.Result, error) {
	c.n.Add(1)
	return driver.Result{Content: jsontext.Value(`{"ok":true}`)}, nil
}
