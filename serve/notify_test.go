package serve_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/internal/teststore"
	"github.com/openplaybook/openplaybook/launch"
	"github.com/openplaybook/openplaybook/notify"
	"github.com/openplaybook/openplaybook/serve"
	"github.com/openplaybook/openplaybook/store"
)

// TestNotifyAcrossRestart: a run reaches its gate; the webhook of the
// harness's serve.webhooks (a receiver on loopback, checking every
// signature as docs/console.md teaches) fails the first two deliveries,
// and the server stops while the second is under way. A new server over
// the same store (its outbox table, on the engine under test) delivers
// the gate.waiting event, and the receiver accepts it exactly once.
func TestNotifyAcrossRestart(t *testing.T) {
	secret := []byte("whsec_serve_test_0123456789")
	var mu sync.Mutex
	var requests, forged int
	accepted := map[string]int{}
	var bodies []string
	second := make(chan struct{})
	released := make(chan struct{})
	got := make(chan struct{}, 10)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		mu.Lock()
		requests++
		n := requests
		mu.Unlock()
		if err := notify.Verify(secret, req.Header.Get(notify.HeaderSignature), body, time.Now(), 0); err != nil {
			mu.Lock()
			forged++
			mu.Unlock()
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		switch n {
		case 1:
			http.Error(w, "not now", http.StatusServiceUnavailable)
			return
		case 2:
			close(second)
			<-released
			http.Error(w, "not now", http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		id := req.Header.Get(notify.HeaderEventID)
		accepted[id]++
		if accepted[id] == 1 {
			bodies = append(bodies, string(body))
		}
		mu.Unlock()
		got <- struct{}{}
	}))
	t.Cleanup(rcv.Close)

	// The webhook as a user writes it in the harness; its key is a secret.
	t.Setenv("OPS_WEBHOOK_KEY", string(secret))
	r := newRig(t, `  webhooks:
    - name: ops
      url: `+rcv.URL+`/hook
      signingKeySecret: OPS_WEBHOOK_KEY
      events: [gate.waiting]
`)
	lh, err := launch.Load(filepath.Join(r.dir, "harness.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	start := func() (*serve.Server, *httptest.Server) {
		ts := httptest.NewUnstartedServer(nil)
		ts.Start()
		srv, err := serve.New(serve.Options{Harness: lh, Store: r.st, BaseURL: ts.URL, Version: "test", PublicURL: "https://console.example"})
		if err != nil {
			t.Fatal(err)
		}
		ts.Config.Handler = srv
		return srv, ts
	}
	srv1, ts1 := start()
	ctx := context.Background()
	run, ds, err := srv1.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	tok, err := srv1.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	a := r.connect(tok.MCPURL, tok.Token)
	a.tools(t, "customer__get", "note__add", "openplaybook_finish_step")
	if text, isErr := a.call(t, "openplaybook_finish_step", map[string]any{"output": map[string]any{"found": "Ada"}}); isErr {
		t.Fatalf("finish: %s", text)
	}
	select {
	case <-second:
	case <-time.After(30 * time.Second):
		t.Fatal("the gate's notification was not attempted twice")
	}
	a.cs.Close()
	srv1.Close() // while the second attempt waits for its answer
	ts1.Close()
	close(released)

	srv2, ts2 := start()
	t.Cleanup(func() {
		ts2.Close()
		srv2.Close()
	})
	select {
	case <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the new server did not deliver the notification")
	}
	// Anything else the new server would send arrives before its outbox
	// says done; then the counts are final.
	ob, ok := store.As[store.Outbox](r.st)
	if !ok {
		t.Fatalf("%T keeps no outbox", r.st)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		due, err := ob.DueDeliveries(ctx, time.Now().Add(24*time.Hour), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) == 0 {
			break // delivered (or dead: the counts below tell)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the outbox still owes: %+v", due)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if requests != 3 || forged != 0 || len(accepted) != 1 {
		t.Fatalf("%d requests, %d forged, accepted %v; want 3 requests (two failed), none forged, one event", requests, forged, accepted)
	}
	var ev notify.Event
	if err := json.Unmarshal([]byte(bodies[0]), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != notify.GateWaiting || ev.Run != run || ev.Step != "review" || ev.Playbook != "serve-agent" ||
		ev.URL != "https://console.example/runs/"+run+"#p-review" || !strings.HasPrefix(ev.ID, "evt_"+run+"_") || accepted[ev.ID] != 1 {
		t.Errorf("the event: %+v", ev)
	}
}

// TestWebhookEventsAreNotifyTypes: the harness accepts exactly the event
// types package notify sends.
func TestWebhookEventsAreNotifyTypes(t *testing.T) {
	if !slices.Equal(harness.WebhookEvents, notify.EventTypes) {
		t.Errorf("harness.WebhookEvents %v, notify.EventTypes %v", harness.WebhookEvents, notify.EventTypes)
	}
}

// TestWebhookSecretsAtStart: a server whose webhook names a key secret
// that is not set, or too short, or a URL secret that is not a URL, does
// not start, and says which secret; the value itself is never printed.
func TestWebhookSecretsAtStart(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, env, val, want string }{
		"key unset": {"    - {name: ops, url: \"http://127.0.0.1:1/h\", signingKeySecret: OPS_HOOK_KEY_UNSET}\n", "", "", "OPS_HOOK_KEY_UNSET"},
		"key short": {"    - {name: ops, url: \"http://127.0.0.1:1/h\", signingKeySecret: OPS_HOOK_KEY}\n", "OPS_HOOK_KEY", "short-k3y", "only 9 bytes"},
		"url bad":   {"    - {name: chat, format: slack, urlSecret: CHAT_HOOK_URL}\n", "CHAT_HOOK_URL", "xoxb-not-a-url-0123456789", "not an http or https URL"},
		// A URL from a secret obeys what "url" does: https, or http on
		// loopback, with no user or fragment.
		"url cleartext": {"    - {name: chat, format: slack, urlSecret: OPS_HOOK_URL}\n", "OPS_HOOK_URL", "http://hooks.example.com/T0/B0/SECRETX0123", "https"},
		"url user":      {"    - {name: chat, format: slack, urlSecret: OPS_HOOK_URL}\n", "OPS_HOOK_URL", "https://me:pw0123456789@hooks.example.com/h", "no user"},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(tc.env, tc.val)
			}
			t.Setenv("OPENPLAYBOOK_OPERATOR_TOKEN", operatorToken)
			lh, st := loadHarness(t, t.TempDir(), teststore.YAML(t, "store.db", "")+"serve:\n  webhooks:\n"+tc.yaml)
			defer st.Close()
			_, err := serve.New(serve.Options{Harness: lh, Store: st, BaseURL: "http://127.0.0.1:1", Version: "test"})
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.val != "" && strings.Contains(err.Error(), tc.val)) {
				t.Errorf("serve.New: %v; want an error with %q and without the value", err, tc.want)
			}
		})
	}
}
