package anthropic_test

import (
	"context"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/anthropic"
	"github.com/openplaybook/openplaybook/driver/drivertest"
)

// Requests stream (stream: true), so a maxTokens the SDK refuses without
// streaming goes through; the system block and the last tool carry
// prompt-caching breakpoints; each turn's usage reaches the Caller.
func TestStreamingCachingUsage(t *testing.T) {
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(t *testing.T, req messagesRequest, raw map[string]jsontext.Value) (int, string) {
			if !req.Stream || req.MaxTokens != 128000 {
				t.Errorf("stream %v, max_tokens %d; want a streamed request of 128000", req.Stream, req.MaxTokens)
			}
			if len(req.System) != 1 || req.System[0].CacheControl == nil || req.System[0].CacheControl.Type != "ephemeral" {
				t.Errorf("system %+v, want one block with cache_control ephemeral", req.System)
			}
			if len(req.Tools) != 2 || req.Tools[0].CacheControl != nil || req.Tools[1].CacheControl == nil || req.Tools[1].CacheControl.Type != "ephemeral" {
				t.Errorf("tools %+v, want cache_control ephemeral on the last only", req.Tools)
			}
			return 200, response("tool_use", text("Looking é"), toolUse("toolu_1", "customer__get", `{"id":"cus_1","note":"ünïcode"}`))
		},
		func(t *testing.T, req messagesRequest, raw map[string]jsontext.Value) (int, string) {
			asst := req.Messages[1].Content
			if len(asst) != 2 || asst[0].Text != "Looking é" || string(asst[1].Input) != `{"id":"cus_1","note":"ünïcode"}` {
				t.Errorf("assistant message %+v: the stream was not accumulated", asst)
			}
			return 200, response("end_turn", text("All "), text("done."))
		},
	)
	srv := api.Start()
	caller := &drivertest.Caller{Allowed: []string{"customer.get"}}
	out, err := newDriver(t, srv, func(c *anthropic.Config) { c.MaxTokens = 128000 }).RunStep(context.Background(), stepInput(), caller)
	if err != nil || string(out) != `"All done."` {
		t.Fatalf("RunStep = %s, %v", out, err)
	}
	if calls := caller.Calls(); len(calls) != 1 || string(calls[0].Arguments) != `{"id":"cus_1","note":"ünïcode"}` {
		t.Errorf("calls %+v", calls)
	}
	want := driver.Usage{Provider: "anthropic", Model: "claude-test", InputTokens: 130, OutputTokens: 5, CachedInputTokens: 100, CacheWriteTokens: 20}
	us := caller.Usages()
	if len(us) != 2 {
		t.Fatalf("usage %+v, want one per turn", us)
	}
	for i, u := range us {
		want.Turn = i + 1
		if u != want {
			t.Errorf("usage of turn %d: %+v, want %+v", i+1, u, want)
		}
	}
}

// A stream that ends before message_stop is a cut-off reply: none of its
// calls runs, and the runtime gets them to record as refused.
func TestStreamCutOff(t *testing.T) {
	api := newAPI(t)
	api.Turns = append(api.Turns, func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) {
		return 200, sse(messageJSON("tool_use", toolUse("a", "customer__get", `{"id":"1"}`)), false)
	})
	srv := api.Start()
	caller := &counting{}
	_, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller)
	var re *driver.ReplyError
	if !errors.As(err, &re) || re.Code != driver.ReplyTruncated || len(re.Calls) != 1 || !strings.Contains(err.Error(), "ended before its message_stop event") {
		t.Fatalf("err = %v, want a reply-truncated ReplyError with the call", err)
	}
	if caller.n != 0 {
		t.Errorf("%d calls ran", caller.n)
	}
}

// A tool_use block whose streamed input is not JSON makes the reply
// malformed (the SDK's accumulation would have made it {}); it never runs
// and is reported with the input as streamed.
func TestStreamBadInput(t *testing.T) {
	body := response("tool_use", toolUse("a", "customer__get", `{"id":"1"}`))
	bad := strings.Replace(body, `"partial_json":":\"1\"}"`, `"partial_json":":"`, 1)
	if bad == body {
		t.Fatal("the stream has no second input piece to cut")
	}
	api := newAPI(t)
	api.Turns = append(api.Turns, func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) { return 200, bad })
	srv := api.Start()
	caller := &counting{}
	_, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller)
	var re *driver.ReplyError
	if !errors.As(err, &re) || re.Code != driver.ReplyMalformed || len(re.Calls) != 1 || string(re.Calls[0].Arguments) != `{"id":` ||
		!strings.Contains(err.Error(), "the input of tool_use block 1, as its input_json_delta events spell it, is not JSON") {
		t.Fatalf("err = %v (%+v)", err, re)
	}
	if caller.n != 0 {
		t.Errorf("%d calls ran", caller.n)
	}
}

// An error event in the stream, a body that is no stream and a stream
// whose events contradict each other fail the step with an error naming
// the URL and the binding; nothing runs.
func TestStreamErrors(t *testing.T) {
	start := strings.SplitAfter(response("tool_use", toolUse("a", "customer__get", `{}`)), "\n\n")[0]
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"error event", start + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
			[]string{`model "claude-test" at `, "/v1/messages: the response stream ended with an error event (overloaded_error): Overloaded (agent binding harness.yaml:9)"}},
		{"not a stream", messageJSON("end_turn", text("hi")),
			[]string{"/v1/messages holds no stream events (Content-Type \"application/json\"); the Messages API answers a streaming request with text/event-stream (agent binding harness.yaml:9)"}},
		{"delta before start", start + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n",
			[]string{"/v1/messages is malformed: received event of type content_block_delta for content block at index 3"}},
		{"no message_start", "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			[]string{`begins with a "message_stop" event, not message_start`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newAPI(t)
			api.Turns = append(api.Turns, func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) { return 200, tc.body })
			srv := api.Start()
			caller := &counting{}
			_, err := newDriver(t, srv, func(c *anthropic.Config) { c.Binding = "harness.yaml:9" }).RunStep(context.Background(), stepInput(), caller)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if caller.n != 0 {
				t.Errorf("%d calls ran", caller.n)
			}
		})
	}
}

// The SDK retries 429 and 5xx, honouring Retry-After; when it gives up,
// the error names the full URL, how often it tried and the binding.
func TestRetries(t *testing.T) {
	overloaded := func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) {
		return 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	}
	now := http.Header{"Retry-After": {"0"}}
	t.Run("recovers", func(t *testing.T) {
		api := newAPI(t)
		api.Header = map[int]http.Header{0: now, 1: now}
		api.Turns = append(api.Turns, overloaded, overloaded, func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) {
			return 200, response("end_turn", text("ok"))
		})
		srv := api.Start()
		out, err := newDriver(t, srv, func(c *anthropic.Config) { c.MaxRetries = 2 }).RunStep(context.Background(), stepInput(), &drivertest.Caller{})
		if err != nil || string(out) != `"ok"` {
			t.Fatalf("RunStep = %s, %v", out, err)
		}
		for i, h := range api.Headers() {
			if got := h.Get("X-Stainless-Retry-Count"); got != strconv.Itoa(i) {
				t.Errorf("request %d: retry count %q", i, got)
			}
		}
	})
	t.Run("gives up", func(t *testing.T) {
		api := newAPI(t)
		api.Header = map[int]http.Header{0: now, 1: now, 2: now}
		api.Turns = append(api.Turns, overloaded, overloaded, overloaded)
		srv := api.Start()
		_, err := newDriver(t, srv, func(c *anthropic.Config) { c.MaxRetries = 2; c.Binding = "harness.yaml:12" }).RunStep(context.Background(), stepInput(), &drivertest.Caller{})
		var pe *driver.ProviderError
		if !errors.As(err, &pe) || pe.StatusCode != 529 || pe.Attempts != 3 || pe.URL != srv.URL+"/v1/messages" {
			t.Fatalf("err = %#v", err)
		}
		want := fmt.Sprintf(`anthropic: model "claude-test" at %s/v1/messages: the API answered 529 (overloaded_error): Overloaded (gave up after 3 attempts; agent binding harness.yaml:12)`, srv.URL)
		if err.Error() != want {
			t.Errorf("error\n%s\nwant\n%s", err, want)
		}
	})
	t.Run("Retry-After", func(t *testing.T) {
		// The server asks for an hour: the SDK waits (its own backoff
		// would retry within a second), and the step's deadline ends it
		// with one request sent.
		api := newAPI(t)
		api.Header = map[int]http.Header{0: {"Retry-After": {"3600"}}}
		api.Turns = append(api.Turns, func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) {
			return 429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`
		})
		srv := api.Start()
		_, err := newDriver(t, srv, func(c *anthropic.Config) { c.MaxRetries = 2; c.StepTimeout = time.Second }).RunStep(context.Background(), stepInput(), &drivertest.Caller{})
		if !errors.Is(err, driver.ErrStepTimeout) {
			t.Fatalf("err = %v, want the step timeout", err)
		}
		if n := len(api.Requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
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
		caller := &counting{}
		_, err := newDriver(t, srv, func(c *anthropic.Config) { c.StepTimeout = 50 * time.Millisecond; c.Binding = "h.yaml:3" }).RunStep(context.Background(), stepInput(), caller)
		want := `anthropic: step "triage": the step ran out of its stepTimeout of 50ms (setting "stepTimeout"; agent binding h.yaml:3)`
		if !errors.Is(err, driver.ErrStepTimeout) || err.Error() != want {
			t.Errorf("err = %v, want %s", err, want)
		}
	})
	t.Run("between calls", func(t *testing.T) {
		api := newAPI(t)
		api.Turns = append(api.Turns, func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) {
			return 200, response("tool_use", toolUse("a", "customer__get", `{"id":"1"}`), toolUse("b", "customer__get", `{"id":"2"}`))
		})
		srv := api.Start()
		var mu sync.Mutex
		now := time.Now()
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		caller := &drivertest.Caller{Allowed: []string{"customer.get"}, OnCall: func(driver.Call) {
			mu.Lock()
			now = now.Add(time.Hour) // the first call takes an hour
			mu.Unlock()
		}}
		d := newDriver(t, srv, func(c *anthropic.Config) { c.StepTimeout = time.Minute })
		anthropic.SetClock(d, clock)
		_, err := d.RunStep(context.Background(), stepInput(), caller)
		if !errors.Is(err, driver.ErrStepTimeout) {
			t.Fatalf("err = %v", err)
		}
		if calls := caller.Calls(); len(calls) != 1 || calls[0].ID != "a" {
			t.Errorf("calls %+v, want only the first", calls)
		}
	})
	t.Run("settings", func(t *testing.T) {
		for _, bad := range []any{"soon", "0s", stdjson.Number("5")} {
			if _, err := anthropic.FromSettings(map[string]any{"model": "m", "baseURL": "http://127.0.0.1:1", "stepTimeout": bad}, nil); err == nil || !strings.Contains(err.Error(), `setting "stepTimeout" must be a duration`) {
				t.Errorf("stepTimeout %v: err = %v", bad, err)
			}
		}
	})
}

// A result over maxResultBytes reaches the model as a notice and a
// preview that is valid UTF-8 (cut before a character the limit would
// split); the Caller's result is whole.
func TestResultLimit(t *testing.T) {
	big := `{"rows":"` + strings.Repeat("é", 3000) + `"}` // 6011 bytes
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) {
			return 200, response("tool_use", toolUse("a", "customer__get", `{"id":"1"}`))
		},
		func(t *testing.T, req messagesRequest, _ map[string]jsontext.Value) (int, string) {
			res := req.Messages[2].Content[0]
			if len(res.Content) != 1 {
				t.Fatalf("tool_result %+v", res)
			}
			got := res.Content[0].Text
			head, preview, _ := strings.Cut(got, "\n")
			for _, w := range []string{"This result is 6011 bytes, over the 1000 bytes", `(setting "maxResultBytes")`, "its first 999 bytes follow and 5012 bytes were cut", "The whole result is kept in the run's store."} {
				if !strings.Contains(head, w) {
					t.Errorf("notice %q lacks %q", head, w)
				}
			}
			if !utf8.ValidString(preview) || len(preview) != 999 || !strings.HasPrefix(big, preview) {
				t.Errorf("preview of %d bytes, valid UTF-8 %v", len(preview), utf8.ValidString(preview))
			}
			return 200, response("end_turn", text("done"))
		},
	)
	srv := api.Start()
	caller := &drivertest.Caller{Allowed: []string{"customer.get"}, Results: map[string]driver.Result{"customer.get": {Content: jsontext.Value(big)}}}
	d, err := anthropic.FromSettings(map[string]any{"model": "claude-test", "baseURL": srv.URL, "maxResultBytes": stdjson.Number("1000"), "maxRetries": stdjson.Number("0")}, &driver.Setup{HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.RunStep(context.Background(), stepInput(), caller); err != nil {
		t.Fatal(err)
	}
	if _, err := anthropic.FromSettings(map[string]any{"model": "m", "baseURL": srv.URL, "maxResultBytes": stdjson.Number("0")}, nil); err == nil || !strings.Contains(err.Error(), `setting "maxResultBytes" must be a whole number of at least 1`) {
		t.Errorf("maxResultBytes 0: %v", err)
	}
}

// MCP content (docs/drivers.md, "Rich results") reaches the model as
// blocks: text, an image block, a resource link as text; an image of a
// type the API does not take is a notice.
func TestRichResult(t *testing.T) {
	const png = "iVBORw0KGgo=" // the PNG signature
	rich := `{"content":[{"type":"text","text":"the chart"},{"type":"image","mimeType":"image/png","data":"` + png + `"},` +
		`{"type":"resource_link","uri":"file:///r.csv","name":"r.csv"},{"type":"image","mimeType":"image/tiff","data":"AAAA"}]}`
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) {
			return 200, response("tool_use", toolUse("a", "customer__get", `{"id":"1"}`))
		},
		func(t *testing.T, req messagesRequest, _ map[string]jsontext.Value) (int, string) {
			c := req.Messages[2].Content[0].Content
			if len(c) != 3 || c[0].Type != "text" || c[0].Text != "the chart" || c[1].Type != "image" || c[1].Source == nil ||
				c[1].Source.Type != "base64" || c[1].Source.MediaType != "image/png" || c[1].Source.Data != png || c[2].Type != "text" {
				t.Fatalf("tool_result content %+v", c)
			}
			want := `[resource link] {"type":"resource_link","uri":"file:///r.csv","name":"r.csv"}` + "\n" +
				`[an image ("image/tiff", 3 bytes) the tool returned is not shown: a model is shown PNG, JPEG, GIF and WebP images]`
			if c[2].Text != want {
				t.Errorf("text %q\nwant %q", c[2].Text, want)
			}
			return 200, response("end_turn", text("done"))
		},
	)
	srv := api.Start()
	caller := &drivertest.Caller{Allowed: []string{"customer.get"}, Results: map[string]driver.Result{"customer.get": {Content: jsontext.Value(rich)}}}
	if _, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller); err != nil {
		t.Fatal(err)
	}
}
