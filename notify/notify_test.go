package notify_test

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
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/notify"
)

// receiver is a webhook endpoint on loopback that answers 500 to the
// first `fail` requests, checks every signature as docs/console.md tells
// receivers to, and counts what it accepted per event id.
type receiver struct {
	*httptest.Server
	secret []byte
	fail   int

	mu       sync.Mutex
	requests int
	forged   int
	accepted map[string]int
	dups     int
	bodies   []string
	got      chan struct{}
	// onRequest, when set, is called with each request's number before
	// it is answered.
	onRequest func(n int)
}

func newReceiver(t *testing.T, secret string, fail int) *receiver {
	r := &receiver{secret: []byte(secret), fail: fail, accepted: map[string]int{}, got: make(chan struct{}, 100)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.requests++
		if r.onRequest != nil {
			r.onRequest(r.requests)
		}
		if err := notify.Verify(r.secret, req.Header.Get(notify.HeaderSignature), body, time.Now(), 0); err != nil {
			r.forged++
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if r.requests <= r.fail {
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		// Deduplicate on the event id, as the docs say: a repeat is
		// answered 200 and not acted on again.
		id := req.Header.Get(notify.HeaderEventID)
		if r.accepted[id] > 0 {
			r.dups++
			return
		}
		r.accepted[id]++
		r.bodies = append(r.bodies, string(body))
		r.got <- struct{}{}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) counts() (requests, forged int, accepted map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string]int{}
	for k, v := range r.accepted {
		m[k] = v
	}
	return r.requests, r.forged, m
}

func fast(int) time.Duration { return time.Millisecond }

// TestRetriedAcrossRestart: the receiver fails the first two deliveries;
// the notifier stops (a restart) while the second is under way; a new one
// over the same outbox delivers the event, and the receiver accepts it
// once; publishing it again (as a restart that reads the audit logs again
// does) adds nothing.
func TestRetriedAcrossRestart(t *testing.T) {
	rcv := newReceiver(t, "whsec_test_0123456789", 2)
	path := filepath.Join(t.TempDir(), "outbox.json")
	ep := notify.Endpoint{Name: "ops", URL: rcv.URL, Secret: []byte("whsec_test_0123456789")}
	ev := notify.Event{ID: "evt_run_1_7", Type: notify.ApprovalRequested, Created: time.Now().UTC(), Run: "run_1", Tool: "charge.refund",
		Summary: "call charge.refund in step refund needs approval", Arguments: jsontext.Value(`{"amount":1500}`)}

	// First process: one failed attempt, and the process stops while
	// the second is under way (the receiver answers it after the stop).
	ob, err := notify.OpenFileOutbox(path)
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	var lmu sync.Mutex
	n := &notify.Notifier{Outbox: ob, Endpoints: []notify.Endpoint{ep}, Backoff: fast, Log: func(s string) { lmu.Lock(); logs = append(logs, s); lmu.Unlock() }}
	if err := n.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rcv.onRequest = func(n int) {
		if n == 2 {
			cancel()
		}
	}
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	<-done
	if d := ob.Deliveries(); len(d) != 1 || d[0].Attempts != 1 || d[0].Done {
		t.Fatalf("after the stop the outbox holds %+v, want one delivery with 1 attempt recorded", d)
	}

	// Second process over the same file: the interrupted attempt is made
	// again, and accepted.
	ob2, err := notify.OpenFileOutbox(path)
	if err != nil {
		t.Fatal(err)
	}
	n2 := &notify.Notifier{Outbox: ob2, Endpoints: []notify.Endpoint{ep}, Backoff: fast}
	if err := n2.Publish(context.Background(), ev); err != nil { // again: adds nothing
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	go n2.Run(ctx2)
	select {
	case <-rcv.got:
	case <-time.After(20 * time.Second):
		t.Fatal("the event was not delivered after the restart")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if d := ob2.Deliveries(); len(d) == 1 && d[0].Done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delivery is not done: %+v", ob2.Deliveries())
		}
		time.Sleep(time.Millisecond)
	}
	requests, forged, accepted := rcv.counts()
	if accepted[ev.ID] != 1 || len(accepted) != 1 {
		t.Errorf("accepted %v, want event %s once", accepted, ev.ID)
	}
	if requests != 3 || forged != 0 {
		t.Errorf("%d requests (%d with a bad signature), want 3 (one failed, one failed and interrupted by the stop, one accepted) and none forged", requests, forged)
	}
	if d := ob2.Deliveries()[0]; d.Attempts != 2 {
		t.Errorf("the outbox counts %d attempts, want 2 (the interrupted one is not counted)", d.Attempts)
	}
	// No argument value unless the endpoint asks for it.
	rcv.mu.Lock()
	body := rcv.bodies[0]
	rcv.mu.Unlock()
	if strings.Contains(body, "1500") || strings.Contains(body, "arguments") {
		t.Errorf("the delivery carries the call's arguments: %s", body)
	}
	var got notify.Event
	if err := json.Unmarshal([]byte(body), &got); err != nil || got.ID != ev.ID || got.Type != ev.Type || got.Run != "run_1" {
		t.Errorf("the body %s: %v", body, err)
	}
	lmu.Lock()
	defer lmu.Unlock()
	if len(logs) != 1 || !strings.Contains(logs[0], "500") {
		t.Errorf("the failed attempts were logged as %q", logs)
	}
}

// TestVerify: what the docs teach receivers to reject.
func TestVerify(t *testing.T) {
	secret := []byte("whsec_test_0123456789")
	body := []byte(`{"id":"evt_run_1_7","type":"gate.waiting"}`)
	now := time.Unix(1764640000, 0)
	good := notify.Sign(secret, now, body)
	if err := notify.Verify(secret, good, body, now, 0); err != nil {
		t.Fatalf("a good signature: %v", err)
	}
	cases := []struct {
		name, header string
		body         []byte
		at           time.Time
		want         error
	}{
		{"another secret", notify.Sign([]byte("someone else"), now, body), body, now, notify.ErrBadSignature},
		{"a changed body", good, []byte(`{"id":"evt_run_1_7","type":"run.completed"}`), now, notify.ErrBadSignature},
		{"a replay 6 minutes later", good, body, now.Add(6 * time.Minute), notify.ErrStale},
		{"a timestamp moved", strings.Replace(good, "t=1764640000", "t=1764640100", 1), body, now, notify.ErrBadSignature},
		{"no header", "", body, now, notify.ErrNoSignature},
		{"no v1", "t=1764640000", body, now, notify.ErrNoSignature},
	}
	for _, c := range cases {
		err := notify.Verify(secret, c.header, c.body, c.at, 0)
		if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(c.want.Error(), "notify: ")) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Rotation: one matching v1 of several is enough.
	if err := notify.Verify(secret, good+",v1=00", body, now, 0); err != nil {
		t.Errorf("with a second v1: %v", err)
	}
}

// TestSlack: a Slack message says what waits and links the card; the
// webhook URL (a secret) is never in an error.
func TestSlack(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		n := len(got)
		mu.Unlock()
		if r.Header.Get(notify.HeaderSignature) != "" {
			t.Errorf("a Slack message was signed")
		}
		if n == 1 {
			http.Error(w, "no", http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	hook := srv.URL + "/services/T000/B000/XXXXSECRETXXXX"
	ob, err := notify.OpenFileOutbox(filepath.Join(t.TempDir(), "o.json"))
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	n := &notify.Notifier{Outbox: ob, Endpoints: []notify.Endpoint{{Name: "slack", URL: hook, Format: "slack", Events: []string{notify.GateWaiting}}}, Backoff: fast,
		Log: func(s string) { mu.Lock(); logs = append(logs, s); mu.Unlock() }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	_ = n.Publish(ctx, notify.Event{ID: "evt_run_2_3", Type: notify.RunCompleted, Run: "run_2", Summary: "completed"}) // not asked for
	_ = n.Publish(ctx, notify.Event{ID: "evt_run_2_4", Type: notify.GateWaiting, Run: "run_2", Playbook: "support-triage",
		Summary: "gate review waits for a person's decision <b>", URL: "https://console.example/runs/run_2#p-review"})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if d := ob.Deliveries(); len(d) == 1 && d[0].Done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not delivered: %+v", ob.Deliveries())
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d posts, want 2 (one failed, one accepted): %q", len(got), got)
	}
	var msg struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal([]byte(got[1]), &msg); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"A gate waits for a decision", "run_2", "support-triage", "&lt;b&gt;", "<https://console.example/runs/run_2#p-review|Open it>"} {
		if !strings.Contains(msg.Text, want) {
			t.Errorf("the Slack text %q lacks %q", msg.Text, want)
		}
	}
	for _, l := range logs {
		if strings.Contains(l, "SECRET") {
			t.Errorf("a log line shows the Slack webhook URL: %s", l)
		}
	}
}

// TestHostileReceiverAnswers: a JSON endpoint whose URL came from a
// secret (its path holds a token) answers 500 with a 1 MiB status line:
// the delivery's recorded error and the log lines name neither the
// secret path nor more than a short part of the receiver's status.
func TestHostileReceiverAnswers(t *testing.T) {
	ln := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		c, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		_, _ = buf.WriteString("HTTP/1.1 500 " + strings.Repeat("x", 1<<20) + "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		_ = buf.Flush()
	}))
	defer ln.Close()
	hook := ln.URL + "/hooks/TOKEN_abcdef0123456789"
	ob, err := notify.OpenFileOutbox(filepath.Join(t.TempDir(), "o.json"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs []string
	n := &notify.Notifier{Outbox: ob, Endpoints: []notify.Endpoint{{Name: "ops", URL: hook, URLSecret: true, Secret: []byte("whsec_test_0123456789")}},
		Backoff: func(int) time.Duration { return time.Hour }, Log: func(s string) { mu.Lock(); logs = append(logs, s); mu.Unlock() }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	_ = n.Publish(ctx, notify.Event{ID: "evt_run_3_1", Type: notify.RunCompleted, Run: "run_3", Summary: "completed"})
	deadline := time.Now().Add(20 * time.Second)
	var d []notify.Delivery
	for {
		if d = ob.Deliveries(); len(d) == 1 && d[0].Attempts == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no attempt recorded: %+v", d)
		}
		time.Sleep(time.Millisecond)
	}
	if strings.Contains(d[0].LastError, "TOKEN") || len(d[0].LastError) > 1024 {
		t.Errorf("the recorded error (%d bytes) shows the secret URL or the whole status: %.200s", len(d[0].LastError), d[0].LastError)
	}
	if !strings.Contains(d[0].LastError, "500") {
		t.Errorf("the recorded error %.200q does not give the status", d[0].LastError)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, l := range logs {
		if strings.Contains(l, "TOKEN") || len(l) > 1024 {
			t.Errorf("a log line (%d bytes) shows the secret URL or the whole status: %.200s", len(l), l)
		}
	}
}
