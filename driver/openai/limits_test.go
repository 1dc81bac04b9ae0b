package openai_test

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
	"github.com/openplaybook/openplaybook/driver/openai"
)

func usageCompletion(finish, msg string) string {
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-test",`+
		`"choices":[{"index":0,"finish_reason":%q,"logprobs":null,"message":%s}],`+
		`"usage":{"prompt_tokens":1200,"completion_tokens":7,"total_tokens":1207,"prompt_tokens_details":{"cached_tokens":1024}}}`, finish, msg)
}

// Each turn's usage reaches the Caller; a response without usage (a
// server that reports none) records nothing.
func TestUsage(t *testing.T) {
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
			return 200, usageCompletion("tool_calls", toolCallsMessage([3]string{"c1", "customer__get", `{"id":"1"}`}))
		},
		func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
			return 200, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"done"}}]}`
		},
	)
	srv := api.Start()
	caller := &drivertest.Caller{Allowed: []string{"customer.get"}}
	if _, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller); err != nil {
		t.Fatal(err)
	}
	want := []driver.Usage{{Provider: "openai", Model: "gpt-test", Turn: 1, InputTokens: 1200, OutputTokens: 7, CachedInputTokens: 1024}}
	if got := caller.Usages(); len(got) != 1 || got[0] != want[0] {
		t.Errorf("usage %+v, want %+v", got, want)
	}
}

// The SDK retries 429 and 5xx, honouring Retry-After; when it gives up,
// the error names the full URL, how often it tried and the binding.
func TestRetries(t *testing.T) {
	unavailable := func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
		return 503, `{"error":{"message":"try later","type":"server_error"}}`
	}
	now := http.Header{"Retry-After": {"0"}}
	t.Run("recovers", func(t *testing.T) {
		api := newAPI(t)
		api.Header = map[int]http.Header{0: now}
		api.Turns = append(api.Turns, unavailable, func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
			return 200, completion("stop", textMessage("ok"))
		})
		srv := api.Start()
		out, err := newDriver(t, srv, func(c *openai.Config) { c.MaxRetries = 1 }).RunStep(context.Background(), stepInput(), &drivertest.Caller{})
		if err != nil || string(out) != `"ok"` || len(api.Requests()) != 2 {
			t.Fatalf("RunStep = %s, %v after %d requests", out, err, len(api.Requests()))
		}
	})
	t.Run("gives up", func(t *testing.T) {
		api := newAPI(t)
		api.Header = map[int]http.Header{0: now, 1: now}
		api.Turns = append(api.Turns, unavailable, unavailable)
		srv := api.Start()
		_, err := newDriver(t, srv, func(c *openai.Config) { c.MaxRetries = 1; c.Binding = "harness.yaml:4" }).RunStep(context.Background(), stepInput(), &drivertest.Caller{})
		want := fmt.Sprintf(`openai: model "gpt-test" at %s/v1/chat/completions: the API answered 503 Service Unavailable (server_error): try later (gave up after 2 attempts; agent binding harness.yaml:4)`, srv.URL)
		var pe *driver.ProviderError
		if !errors.As(err, &pe) || pe.Attempts != 2 || err.Error() != want {
			t.Errorf("err = %v\nwant %s", err, want)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		_, err := newDriver(t, srv, func(c *openai.Config) { c.MaxRetries = 1; c.Binding = "harness.yaml:4" }).RunStep(context.Background(), stepInput(), &drivertest.Caller{})
		if err == nil || !strings.Contains(err.Error(), "openai: Post "+srv.URL+"/v1/chat/completions: ") || !strings.HasSuffix(err.Error(), "(gave up after 2 attempts; agent binding harness.yaml:4)") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("Retry-After", func(t *testing.T) {
		// The server asks for an hour (the SDK waits at most 8s): the
		// step's deadline ends the wait with one request sent.
		api := newAPI(t)
		api.Header = map[int]http.Header{0: {"Retry-After": {"3600"}}}
		api.Turns = append(api.Turns, func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
			return 429, `{"error":{"message":"slow down","type":"rate_limit_exceeded"}}`
		})
		srv := api.Start()
		_, err := newDriver(t, srv, func(c *openai.Config) { c.MaxRetries = 2; c.StepTimeout = time.Second }).RunStep(context.Background(), stepInput(), &drivertest.Caller{})
		if !errors.Is(err, driver.ErrStepTimeout) || len(api.Requests()) != 1 {
			t.Errorf("err = %v after %d requests; want the step timeout after 1", err, len(api.Requests()))
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
		_, err := newDriver(t, srv, func(c *openai.Config) { c.StepTimeout = 50 * time.Millisecond }).RunStep(context.Background(), stepInput(), &drivertest.Caller{})
		want := `openai: step "triage": the step ran out of its stepTimeout of 50ms (setting "stepTimeout")`
		if !errors.Is(err, driver.ErrStepTimeout) || err.Error() != want {
			t.Errorf("err = %v, want %s", err, want)
		}
	})
	t.Run("between calls", func(t *testing.T) {
		api := newAPI(t)
		api.Turns = append(api.Turns, func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
			return 200, completion("tool_calls", toolCallsMessage([3]string{"a", "customer__get", `{}`}, [3]string{"b", "customer__get", `{}`}))
		})
		srv := api.Start()
		var mu sync.Mutex
		now := time.Now()
		caller := &drivertest.Caller{Allowed: []string{"customer.get"}, OnCall: func(driver.Call) {
			mu.Lock()
			now = now.Add(time.Hour)
			mu.Unlock()
		}}
		d := newDriver(t, srv, func(c *openai.Config) { c.StepTimeout = time.Minute })
		openai.SetClock(d, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
		_, err := d.RunStep(context.Background(), stepInput(), caller)
		if !errors.Is(err, driver.ErrStepTimeout) || len(caller.Calls()) != 1 {
			t.Errorf("err = %v after %d calls; want the step timeout after 1", err, len(caller.Calls()))
		}
	})
}

// A result over maxResultBytes reaches the model as a notice and a
// preview; the images of MCP content follow the tool messages in a user
// message (a tool message takes text only), and with images: false are
// notices.
func TestResultLimitAndImages(t *testing.T) {
	const png = "iVBORw0KGgo="
	big := strings.Repeat("ü", 2000) // 4000 bytes
	rich := `{"content":[{"type":"text","text":"see"},{"type":"image","mimeType":"image/png","data":"` + png + `"}]}`
	results := map[string]driver.Result{
		"customer.get":            {Content: jsontext.Value(`"` + big + `"`)},
		"mcp.memory.search_nodes": {Content: jsontext.Value(rich)},
	}
	turn1 := func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
		return 200, completion("tool_calls", toolCallsMessage([3]string{"a", "customer__get", `{}`}, [3]string{"b", "mcp__memory__search_nodes", `{}`}))
	}
	for _, images := range []bool{true, false} {
		t.Run(fmt.Sprint("images ", images), func(t *testing.T) {
			api := newAPI(t)
			api.Turns = append(api.Turns, turn1, func(t *testing.T, req chatRequest, _ map[string]jsontext.Value) (int, string) {
				msgs := req.Messages
				big, _ := msgs[3].Content.(string)
				head, preview, _ := strings.Cut(big, "\n")
				if !strings.Contains(head, "This result is 4002 bytes, over the 1000 bytes") || !strings.Contains(head, "its first 999 bytes follow and 3003 bytes were cut") || !utf8.ValidString(preview) || len(preview) != 999 {
					t.Errorf("tool message a: %q", big)
				}
				text, _ := msgs[4].Content.(string)
				if !images {
					if len(msgs) != 5 || text != `see`+"\n"+`[an image (image/png, 8 bytes) the tool returned is not shown: this agent is not shown images]` {
						t.Errorf("messages %+v", msgs[4:])
					}
					return 200, completion("stop", textMessage("done"))
				}
				if text != "see\n[image 1 of this result (image/png, 8 bytes): shown after the tool results]" {
					t.Errorf("tool message b: %q", text)
				}
				if len(msgs) != 6 || msgs[5].Role != "user" {
					t.Fatalf("messages %+v, want a user message after the tool messages", msgs)
				}
				parts, _ := msgs[5].Content.([]any)
				b, _ := stdjson.Marshal(parts)
				want := `[{"text":"Image 1 of the result of tool call b (mcp.memory.search_nodes):","type":"text"},{"image_url":{"url":"data:image/png;base64,` + png + `"},"type":"image_url"}]`
				if string(b) != want {
					t.Errorf("user message %s\nwant %s", b, want)
				}
				return 200, completion("stop", textMessage("done"))
			})
			srv := api.Start()
			caller := &drivertest.Caller{Allowed: []string{"customer.get", "mcp.memory.search_nodes"}, Results: results}
			d, err := openai.FromSettings(map[string]any{"model": "gpt-test", "baseURL": srv.URL + "/v1", "maxResultBytes": stdjson.Number("1000"), "images": images, "maxRetries": stdjson.Number("0")}, &driver.Setup{HTTPClient: srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.RunStep(context.Background(), stepInput(), caller); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := openai.FromSettings(map[string]any{"model": "m", "baseURL": "http://127.0.0.1:1/v1", "images": "yes"}, nil); err == nil || !strings.Contains(err.Error(), `setting "images" must be true or false, not a string`) {
		t.Errorf("images yes: %v", err)
	}
}
