package serve

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/notify"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// notifySweep is how often the notifier reads the audit logs of the runs
// that have not ended, besides whenever the event broker says a run
// changed: an approval asked by an external agent's call is seen within
// it.
const notifySweep = time.Second

// notifier turns the audit records of runs into notify events: each
// approval.requested, gate.waiting, run.failed and run.completed record
// is published once per process under the id evt_<run>_<seq>; the outbox
// drops what it already holds, so reading every log again after a
// restart publishes only what the last process missed.
type notifier struct {
	s      *Server
	n      *notify.Notifier
	public string

	mu     sync.Mutex
	cursor map[string]int64 // by run: the last seq read
	ended  map[string]bool  // runs read to their end
	swept  bool             // the first sweep (of every run) is done; only the sweeping goroutine uses it

	cancel context.CancelFunc
	done   sync.WaitGroup
}

// startNotify starts delivering the server's notifications with n, until
// Close.
func (s *Server) startNotify(n *notify.Notifier, public string) {
	ctx, cancel := context.WithCancel(context.Background())
	nt := &notifier{s: s, n: n, public: strings.TrimSuffix(public, "/"), cursor: map[string]int64{}, ended: map[string]bool{}, cancel: cancel}
	s.notify = nt
	sub, unsub := s.events.Subscribe("")
	nt.done.Add(2)
	go func() {
		defer nt.done.Done()
		n.Run(ctx)
	}()
	go func() {
		defer nt.done.Done()
		defer unsub()
		tick := time.NewTicker(notifySweep)
		defer tick.Stop()
		nt.sweep(ctx)
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-sub:
				nt.scan(ctx, ev.Run)
			case <-tick.C:
				nt.sweep(ctx)
			}
		}
	}()
}

func (nt *notifier) stop() {
	nt.cancel()
	nt.done.Wait()
}

// sweep reads the runs not yet read to their end: on the first sweep
// every run (what ended while no server ran is published then), after
// it the runs that are running or waiting and those it has read but not
// to their end, so that its cost follows the open runs, not every run
// the store holds.
func (nt *notifier) sweep(ctx context.Context) {
	var statuses []store.RunStatus
	if nt.swept {
		statuses = []store.RunStatus{store.RunRunning, store.RunWaiting}
	}
	runs, err := nt.s.st.ListRuns(ctx, statuses...)
	if err != nil {
		nt.s.logf("notify: listing runs: %v", err)
		return
	}
	nt.swept = true
	ids := make(map[string]bool, len(runs))
	for _, r := range runs {
		ids[r.ID] = true
	}
	nt.mu.Lock()
	for id := range nt.cursor {
		ids[id] = true
	}
	var todo []string
	for id := range ids {
		if !nt.ended[id] {
			todo = append(todo, id)
		}
	}
	nt.mu.Unlock()
	for _, id := range todo {
		nt.scan(ctx, id)
	}
}

// scan publishes the run's records after its cursor.
func (nt *notifier) scan(ctx context.Context, run string) {
	if run == "" || ctx.Err() != nil {
		return
	}
	rec, err := nt.s.st.GetRun(ctx, run)
	if err != nil {
		return
	}
	nt.mu.Lock()
	seen := nt.cursor[run]
	if rec.AuditSeq != 0 && rec.AuditSeq <= seen {
		// Nothing new since the last read.
		nt.ended[run] = nt.ended[run] || rec.Status.Ended()
		nt.mu.Unlock()
		return
	}
	nt.mu.Unlock()
	// Only the records after the cursor are read.
	last := seen
	err = store.EachAuditAfter(ctx, nt.s.st, run, seen, func(r audit.Record) error {
		if ev, ok := nt.event(ctx, rec, r); ok {
			if err := nt.n.Publish(ctx, ev); err != nil {
				return err // read again from here next time
			}
		}
		last = r.Seq
		return nil
	})
	if err != nil {
		nt.s.logf("notify: %s: %v", run, err)
	}
	nt.mu.Lock()
	nt.cursor[run] = last
	if rec.Status.Ended() && last >= rec.AuditSeq {
		nt.ended[run] = true
	}
	nt.mu.Unlock()
}

// event is the notification of one audit record, if it makes one.
func (nt *notifier) event(ctx context.Context, run store.Run, r audit.Record) (notify.Event, bool) {
	ev := notify.Event{ID: fmt.Sprintf("evt_%s_%d", run.ID, r.Seq), Run: run.ID, Playbook: nt.s.redact(run.PlaybookID), Step: nt.s.redact(r.Step), Tool: nt.s.redact(r.Tool)}
	if t, err := time.Parse(time.RFC3339Nano, r.Time); err == nil {
		ev.Created = t.UTC()
	}
	link := func(frag string) string {
		if nt.public == "" {
			return ""
		}
		u := nt.public + "/runs/" + url.PathEscape(run.ID)
		if frag != "" {
			u += "#p-" + url.PathEscape(frag)
		}
		return u
	}
	switch r.Kind {
	case string(runtime.KindApprovalRequested):
		var ar runtime.ApprovalRequested
		if json.Unmarshal(r.Data, &ar) != nil {
			return ev, false
		}
		ev.Type, ev.Approval, ev.URL = notify.ApprovalRequested, ar.Approval, link(ar.Approval)
		ev.Summary = fmt.Sprintf("call %q in step %s needs approval", ev.Tool, ev.Step)
		// The arguments go only to endpoints that ask for them (the
		// notifier leaves them out for the others).
		if ps, err := nt.s.Pending(ctx, run.ID); err == nil {
			for _, p := range ps {
				if p.ID == ar.Approval && p.Altered == "" {
					ev.Arguments = p.Arguments
				}
			}
		}
	case string(runtime.KindGateWaiting):
		ev.Type, ev.URL = notify.GateWaiting, link(r.Step)
		ev.Summary = fmt.Sprintf("gate %s waits for a person's decision", ev.Step)
	case string(runtime.KindRunFailed):
		ev.Type, ev.URL = notify.RunFailed, link("")
		ev.Summary = "the run failed"
		if run.Reason != "" {
			ev.Summary += ": " + nt.s.redact(run.Reason)
		}
	case string(runtime.KindRunCompleted):
		ev.Type, ev.URL = notify.RunCompleted, link("")
		ev.Summary = "the run completed"
	default:
		return ev, false
	}
	return ev, true
}

// logf writes one line to the server's log, secret values redacted.
func (s *Server) logf(format string, args ...any) {
	fmt.Fprintln(s.opt.Log, "openplaybook serve: "+s.redact(fmt.Sprintf(format, args...)))
}

// webhookNotifier is the notifier serve.webhooks asks for: each webhook
// an endpoint, its URL and signing key read from the secrets it names
// (a secret that is not set fails the server's start, as the operator
// token's does), and the store's outbox ([store.Outbox]) so that
// every server over the store shares the deliveries.
func webhookNotifier(hooks []harness.Webhook, sec *harness.Secrets, st store.Store, logf func(string, ...any)) (*notify.Notifier, error) {
	ob, ok := store.As[store.Outbox](st)
	if !ok {
		return nil, fmt.Errorf("serve: serve.webhooks needs a store with an outbox; %T has none", st)
	}
	n := &notify.Notifier{Outbox: notify.StoreOutbox(ob), Log: func(line string) { logf("%s", line) }}
	for _, w := range hooks {
		ep := notify.Endpoint{Name: w.Name, URL: w.URL, Events: w.Events, Format: w.Format, IncludeArguments: w.IncludeArguments}
		if w.URLSecret != "" {
			v, err := sec.Resolve(w.URLSecret)
			if err != nil {
				return nil, fmt.Errorf("serve: webhook %q: its URL: %v (set %s, the secret its urlSecret names; docs/console.md)", w.Name, err, w.URLSecret)
			}
			if !harness.WebhookURL(v) {
				return nil, fmt.Errorf("serve: webhook %q: the secret %s is not an http or https URL a webhook may use (as \"url\": https, or http only on a loopback host, with no user or fragment)", w.Name, w.URLSecret)
			}
			ep.URL, ep.URLSecret = v, true
		}
		if w.SigningKeySecret != "" {
			v, err := sec.Resolve(w.SigningKeySecret)
			if err != nil {
				return nil, fmt.Errorf("serve: webhook %q: its signing key: %v (set %s, the secret its signingKeySecret names; docs/console.md)", w.Name, err, w.SigningKeySecret)
			}
			if len(v) < 16 {
				return nil, fmt.Errorf("serve: webhook %q: the signing key in %s is only %d bytes; use at least 16 (openssl rand -hex 32 makes one)", w.Name, w.SigningKeySecret, len(v))
			}
			ep.Secret = []byte(v)
		}
		n.Endpoints = append(n.Endpoints, ep)
	}
	return n, nil
}
