package serve_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/launch"
	"github.com/openplaybook/openplaybook/notify"
	"github.com/openplaybook/openplaybook/serve"
)

// TestNotifyAcrossRestart: a run reaches its gate; the webhook receiver
// (on loopback, checking every signature as docs/console.md teaches)
// fails the first two deliveries, and the server stops while the second
// is under way. A new server over the same store and outbox delivers the
// gate.waiting event, and the receiver accepts it exactly once.
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

	r := newRig(t, "")
	lh, err := launch.Load(filepath.Join(r.dir, "harness.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	outbox := filepath.Join(r.dir, "outbox.json")
	ep := notify.Endpoint{Name: "ops", URL: rcv.URL, Secret: secret, Events: []string{notify.GateWaiting}}
	start := func() (*serve.Server, *httptest.Server) {
		ob, err := notify.OpenFileOutbox(outbox)
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewUnstartedServer(nil)
		ts.Start()
		srv, err := serve.New(serve.Options{Harness: lh, Store: r.st, BaseURL: ts.URL, Version: "test", PublicURL: "https://console.example",
			Notify: &notify.Notifier{Outbox: ob, Endpoints: []notify.Endpoint{ep}, Backoff: func(int) time.Duration { return time.Millisecond }}})
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		ob, err := notify.OpenFileOutbox(outbox)
		if err != nil {
			t.Fatal(err)
		}
		if d := ob.Deliveries(); len(d) == 1 && d[0].Done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the outbox: %+v", ob.Deliveries())
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
