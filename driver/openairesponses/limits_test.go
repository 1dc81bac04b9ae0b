package openairesponses_test

import (
	"context"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/drivertest"
	"github.com/openplaybook/openplaybook/driver/openairesponses"
)

// Each turn's usage reaches the Caller, cached input tokens included; a
// response without usage (a gateway that reports none) records nothing.
func TestUsage(t *testing.T) {
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
			body := strings.Replace(completed(fnCall("c1", "customer__get", `{"id":"1"}`)),
				`"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}`,
				`"usage":{"input_tokens":1200,"input_tokens_details":{"cached_tokens":1024},"output_tokens":7,"output_tokens_details":{"reasoning_tokens":3},"total_tokens":1207}`, 1)
			return 200, body
		},
		func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
			return 200, `{"id":"resp_2","object":"response","created_at":1,"model":"m","status":"completed","output":[` + text("done") + `]}`
		},
	)
	srv := api.Start()
	caller := &drivertest.Caller{Allowed: []string{"customer.get"}}
	if _, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller); err != nil {
		t.Fatal(err)
	}
	want := driver.Usage{Provider: "openai-responses", Model: "gpt-test", Turn: 1, InputTokens: 1200, OutputTokens: 7, CachedInputTokens: 1024}
	if got := caller.Usages(); len(got) != 1 || got[0] != want {
		t.Errorf("usage %+v, want [%+v]", got, want)
	}
}

// The SDK retries 429 and 5xx, honouring Retry-After; when it gives up,
// the error names the full URL, how often it tried and the binding.
func TestRetries(t *testing.T) {
	unavailable := func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
		return 503, `{"error":{"message":"try later","type":"server_error"}}`
	}
	now := http.Header{"Retry-After": {"0"}}
	t.Run("recovers", func(t *testing.T) {
		api := newAPI(t)
		api.Header = map[int]http.Header{0: now}
		api.Turns = append(api.Turns, unavailable, func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
			return 200, completed(text("ok"))
		})
		srv := api.Start()
		out, err := newDriver(t, srv, func(c *openairesponses.Config) { c.MaxRetries = 1 }).RunStep(context.Background(), stepInput(), &drivertest.Caller{})
		if err != nil || string(out) != `"ok"` || len(api.Requests()) != 2 {
			t.Fatalf("RunStep = %s, %v after %d requests", out, err, len(api.Requests()))
		}
	})
	t.Run("gives up", func(t *testing.T) {
		api := newAPI(t)
		api.Header = map[int]http.Header{0: now, 1: now}
		api.Turns = append(api.Turns, unavailable, unavailable)
		srv := api.Start()
		_, err := newDriver(t, srv, func(c *openairesponses.Config) { c.MaxRetries = 1; c.Binding = "harness.yaml:4" }).RunStep(context.Background(), stepInput(), &drivertest.Caller{})
		want := fmt.Sprintf(`openai-responses: model "gpt-test" at %s/v1/responses: the API answered 503 Service Unavailable (server_error): try later (gave up after 2 attempts; agent binding harness.yaml:4)`, srv.URL)
		var pe *driver.ProviderError
		if !errors.As(err, &pe) || pe.Attempts != 2 || pe.Binding != "harness.yaml:4" || err.Error() != want {
			t.Errorf("err = %v\nwant %s", err, want)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		_, err := newDriver(t, srv, func(c *openairesponses.Config) { c.MaxRetries = 1; c.Binding = "harness.yaml:4" }).RunStep(context.Background(), stepInput(), &drivertest.Caller{})
		if err == nil || !strings.Contains(err.Error(), "openai-responses: Post "+srv.URL+"/v1/responses: ") || !strings.HasSuffix(err.Error(), "(gave up after 2 attempts; agent binding harness.yaml:4)") {
			t.Errorf("err = %v", err)
		}
	})
}

// stepTimeout bounds the whole step: a request still running at the
// deadline is cut, and no tool call starts after it.
func TestStepTimeout(t *testing.T) {
	t.Run("during a request", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		defer srv.Close()
		defer close(release)
		_, err := newDriver(t, srv, func(c *openairesponses.Config) { c.StepTimeout = 50 * time.Millisecond; c.Binding = "harness.yaml:4" }).RunStep(context.Background(), stepInput(), &drivertest.Caller{})
		want := `openai-responses: step "triage": the step ran out of its stepTimeout of 50ms (setting "stepTimeout"; agent binding harness.yaml:4)`
		if !errors.Is(err, driver.ErrStepTimeout) || err.Error() != want {
			t.Errorf("err = %v, want %s", err, want)
		}
	})
	t.Run("between calls", func(t *testing.T) {
		api := newAPI(t)
		api.Turns = append(api.Turns, func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
			return 200, completed(fnCall("a", "customer__get", `{}`), fnCall("b", "customer__get", `{}`))
		})
		srv := api.Start()
		var mu sync.Mutex
		now := time.Now()
		caller := &drivertest.Caller{Allowed: []string{"customer.get"}, OnCall: func(driver.Call) {
			mu.Lock()
			now = now.Add(time.Hour)
			mu.Unlock()
		}}
		d := newDriver(t, srv, func(c *openairesponses.Config) { c.StepTimeout = time.Minute })
		openairesponses.SetClock(d, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
		_, err := d.RunStep(context.Background(), stepInput(), caller)
		if !errors.Is(err, driver.ErrStepTimeout) || len(caller.Calls()) != 1 || len(api.Requests()) != 1 {
			t.Errorf("err = %v after %d calls and %d requests; want the step timeout after 1 of each", err, len(caller.Calls()), len(api.Requests()))
		}
	})
}

// A result over maxResultBytes reaches the model as a notice and a
// preview; the images of MCP content follow the function_call_output
// items in a user message of input_image parts, and with images: false
// are notices.
func TestResultLimitAndImages(t *testing.T) {
	const png = "iVBORw0KGgo="
	big := strings.Repeat("ü", 2000) // 4000 bytes
	rich := `{"content":[{"type":"text","text":"see"},{"type":"image","mimeType":"image/png","data":"` + png + `"}]}`
	results := map[string]driver.Result{
		"customer.get":            {Content: jsontext.Value(`"` + big + `"`)},
		"mcp.memory.search_nodes": {Content: jsontext.Value(rich)},
	}
	turn1 := func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
		return 200, completed(fnCall("a", "customer__get", `{}`), fnCall("b", "mcp__memory__search_nodes", `{}`))
	}
	for _, images := range []bool{true, false} {
		t.Run(fmt.Sprint("images ", images), func(t *testing.T) {
			api := newAPI(t)
			api.Turns = append(api.Turns, turn1, func(t *testing.T, req responsesRequest, _ map[string]jsontext.Value) (int, string) {
				in := req.Input // user message, 2 function calls, 2 outputs[, user message]
				if len(in) < 5 || in[3].Type != "function_call_output" || in[4].Type != "function_call_output" {
					t.Fatalf("input %+v", in)
				}
				big, _ := in[3].Output.(string)
				head, preview, _ := strings.Cut(big, "\n")
				if !strings.Contains(head, "This result is 4002 bytes, over the 1000 bytes") || !strings.Contains(head, "its first 999 bytes follow and 3003 bytes were cut") || !utf8.ValidString(preview) || len(preview) != 999 {
					t.Errorf("output a: %q", big)
				}
				out, _ := in[4].Output.(string)
				if !images {
					if len(in) != 5 || out != `see`+"\n"+`[an image (image/png, 8 bytes) the tool returned is not shown: this agent is not shown images]` {
						t.Errorf("output b %q, input %+v", out, in[4:])
					}
					return 200, completed(text("done"))
				}
				if out != "see\n[image 1 of this result (image/png, 8 bytes): shown after the tool results]" {
					t.Errorf("output b: %q", out)
				}
				if len(in) != 6 || in[5].Type != "message" || in[5].Role != "user" {
					t.Fatalf("input %+v, want a user message after the outputs", in)
				}
				b, _ := stdjson.Marshal(in[5].Content)
				want := `[{"text":"Image 1 of the result of function call b (mcp.memory.search_nodes):","type":"input_text"},{"detail":"auto","image_url":"data:image/png;base64,` + png + `","type":"input_image"}]`
				if string(b) != want {
					t.Errorf("user message %s\nwant %s", b, want)
				}
				return 200, completed(text("done"))
			})
			srv := api.Start()
			caller := &drivertest.Caller{Allowed: []string{"customer.get", "mcp.memory.search_nodes"}, Results: results}
			d, err := openairesponses.FromSettings(map[string]any{"model": "gpt-test", "baseURL": srv.URL + "/v1", "maxResultBytes": stdjson.Number("1000"), "images": images, "maxRetries": stdjson.Number("0")}, &driver.Setup{HTTPClient: srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.RunStep(context.Background(), stepInput(), caller); err != nil {
				t.Fatal(err)
			}
			if n := len(api.Requests()); n != 2 {
				t.Errorf("%d requests, want 2", n)
			}
		})
	}
	for _, tc := range []struct {
		settings map[string]any
		want     string
	}{
		{map[string]any{"images": "yes"}, `setting "images" must be true or false, not a string`},
		{map[string]any{"maxResultBytes": stdjson.Number("0")}, `setting "maxResultBytes"`},
		{map[string]any{"stepTimeout": "soon"}, `setting "stepTimeout" must be a duration`},
	} {
		tc.settings["model"], tc.settings["baseURL"] = "m", "http://127.0.0.1:1/v1"
		if _, err := openairesponses.FromSettings(tc.settings, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromSettings(%v) = %v, want %s", tc.settings, err, tc.want)
		}
	}
}
