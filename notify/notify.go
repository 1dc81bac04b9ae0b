package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Event types.
const (
	ApprovalRequested = "approval.requested"
	GateWaiting       = "gate.waiting"
	RunFailed         = "run.failed"
	RunCompleted      = "run.completed"
)

// EventTypes are the types an endpoint can ask for.
var EventTypes = []string{ApprovalRequested, GateWaiting, RunFailed, RunCompleted}

// Event is the JSON body of a webhook delivery. It carries no secret and,
// unless the endpoint's IncludeArguments is set, no argument value: the
// approver reads those on the card at URL.
type Event struct {
	// ID identifies the event (the same on every retry and after a
	// restart): "evt_<run>_<audit seq>".
	ID   string `json:"id"`
	Type string `json:"type"`
	// Created is when the event happened (its audit record's time), UTC.
	Created  time.Time `json:"created"`
	Run      string    `json:"run"`
	Playbook string    `json:"playbook,omitempty"`
	Step     string    `json:"step,omitempty"`
	Tool     string    `json:"tool,omitempty"`
	Approval string    `json:"approval,omitempty"`
	// Summary is one line of what happened or waits.
	Summary string `json:"summary"`
	// URL is the card or run page at the console's public URL ("" when
	// none is configured).
	URL string `json:"url,omitempty"`
	// Arguments are the call's arguments: only for an endpoint with
	// IncludeArguments.
	Arguments jsontext.Value `json:"arguments,omitempty"`
}

// Endpoint is one receiver.
type Endpoint struct {
	// Name identifies the endpoint in the outbox and in messages.
	Name string
	URL  string
	// Secret keys the signature (Format "json"); a Slack incoming
	// webhook's URL is its own secret and is not signed.
	Secret []byte
	// Events are the types it receives; empty for all of EventTypes.
	Events []string
	// Format is "json" (the signed Event, the default) or "slack" (a
	// Slack message {"text": ...} for an incoming webhook).
	Format string
	// IncludeArguments sends a call's argument values (off by default).
	IncludeArguments bool
	// URLSecret says URL is a credential (read from a secret, as
	// serve.webhooks' urlSecret is): errors and logs name only its
	// scheme and host, as for a Slack webhook.
	URLSecret bool
}

func (e Endpoint) wants(typ string) bool { return len(e.Events) == 0 || slices.Contains(e.Events, typ) }

// Delivery is one event owed to one endpoint.
type Delivery struct {
	Endpoint  string    `json:"endpoint"`
	Event     Event     `json:"event"`
	Attempts  int       `json:"attempts"`
	Next      time.Time `json:"next"`
	LastError string    `json:"lastError,omitempty"`
	// Done is set once the endpoint answered 2xx; Dead once MaxAttempts
	// failed.
	Done bool `json:"done,omitempty"`
	Dead bool `json:"dead,omitempty"`
}

// Outbox keeps deliveries until they are done, so that a restart does not
// drop one. Implementations must be safe for concurrent use.
type Outbox interface {
	// Add records d unless the outbox has one for the same endpoint and
	// event id (done or not); it reports whether it added d.
	Add(ctx context.Context, d Delivery) (bool, error)
	// Due returns the deliveries neither done nor dead whose Next is not
	// after now, the earliest first, at most limit.
	Due(ctx context.Context, now time.Time, limit int) ([]Delivery, error)
	// Update stores d's Attempts, Next, LastError, Done and Dead.
	Update(ctx context.Context, d Delivery) error
	// NextDue is the earliest Next of a delivery neither done nor dead
	// (zero when there is none).
	NextDue(ctx context.Context) (time.Time, error)
}

// Notifier delivers events to endpoints through an outbox.
type Notifier struct {
	Outbox    Outbox
	Endpoints []Endpoint
	// Client sends the deliveries (default: 10 s timeout, no redirects
	// followed).
	Client *http.Client
	// Backoff is the wait before attempt n+1 after n failed ones
	// (default [Backoff]).
	Backoff func(n int) time.Duration
	// MaxAttempts bounds the attempts of one delivery (default 12: about
	// an hour with the default backoff); then it is dead and logged.
	MaxAttempts int
	// Log receives one line per failed attempt (default: nothing).
	Log func(string)

	once sync.Once
	wake chan struct{}
}

// Backoff is the default wait after n failed attempts: 2^(n-1) seconds,
// at most 10 minutes, with full jitter in [d/2, d).
func Backoff(n int) time.Duration {
	d := time.Second << min(max(n-1, 0), 10)
	d = min(d, 10*time.Minute)
	return d/2 + rand.N(d/2+1)
}

func (n *Notifier) init() {
	n.once.Do(func() { n.wake = make(chan struct{}, 1) })
}

// Publish owes ev to every endpoint that wants its type. Publishing the
// same event again (same ID) adds nothing: a restart may publish again
// everything its audit logs hold.
func (n *Notifier) Publish(ctx context.Context, ev Event) error {
	n.init()
	added := false
	for _, ep := range n.Endpoints {
		if !ep.wants(ev.Type) {
			continue
		}
		ok, err := n.Outbox.Add(ctx, Delivery{Endpoint: ep.Name, Event: ev, Next: time.Now()})
		if err != nil {
			return fmt.Errorf("notify: recording event %s for %s: %w", ev.ID, ep.Name, err)
		}
		added = added || ok
	}
	if added {
		select {
		case n.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// Run delivers what is due until ctx ends.
func (n *Notifier) Run(ctx context.Context) {
	n.init()
	for ctx.Err() == nil {
		due, err := n.Outbox.Due(ctx, time.Now(), 100)
		if err != nil {
			n.log(fmt.Sprintf("notify: reading the outbox: %v", err))
		}
		for _, d := range due {
			if ctx.Err() != nil {
				return
			}
			n.attempt(ctx, d)
		}
		if len(due) == 100 {
			continue
		}
		wait := time.Minute
		if next, err := n.Outbox.NextDue(ctx); err == nil && !next.IsZero() {
			wait = min(wait, max(time.Until(next), 0))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-n.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

func (n *Notifier) endpoint(name string) (Endpoint, bool) {
	for _, ep := range n.Endpoints {
		if ep.Name == name {
			return ep, true
		}
	}
	return Endpoint{}, false
}

func (n *Notifier) attempt(ctx context.Context, d Delivery) {
	ep, ok := n.endpoint(d.Endpoint)
	if !ok {
		// The endpoint was removed from the configuration.
		d.Dead, d.LastError = true, "the endpoint is no longer configured"
		_ = n.Outbox.Update(ctx, d)
		return
	}
	err := n.send(ctx, ep, d.Event)
	if ctx.Err() != nil {
		// Stopping: the delivery is given back as it was, due at once
		// for the next server (an outbox that claims what it hands out
		// would otherwise hold it until the claim runs out).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = n.Outbox.Update(rctx, d)
		return
	}
	d.Attempts++
	if err == nil {
		d.Done, d.LastError = true, ""
	} else {
		d.LastError = err.Error()
		maxAttempts := n.MaxAttempts
		if maxAttempts <= 0 {
			maxAttempts = 12
		}
		backoff := n.Backoff
		if backoff == nil {
			backoff = Backoff
		}
		if d.Attempts >= maxAttempts {
			d.Dead = true
			n.log(fmt.Sprintf("notify: giving up on event %s for %s after %d attempts: %v", d.Event.ID, ep.Name, d.Attempts, err))
		} else {
			d.Next = time.Now().Add(backoff(d.Attempts))
			n.log(fmt.Sprintf("notify: event %s for %s, attempt %d: %v; again in %s", d.Event.ID, ep.Name, d.Attempts, err, time.Until(d.Next).Round(time.Millisecond)))
		}
	}
	if err := n.Outbox.Update(ctx, d); err != nil {
		n.log(fmt.Sprintf("notify: recording the delivery of %s to %s: %v", d.Event.ID, ep.Name, err))
	}
}

func (n *Notifier) log(s string) {
	if n.Log != nil {
		n.Log(s)
	}
}

var defaultClient = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// Body is the request body an endpoint is sent for ev.
func Body(ep Endpoint, ev Event) ([]byte, error) {
	if !ep.IncludeArguments {
		ev.Arguments = nil
	}
	if ep.Format == "slack" {
		return json.Marshal(map[string]string{"text": SlackText(ev)})
	}
	return json.Marshal(ev)
}

// SlackText is the message an event makes in Slack (mrkdwn): what waits
// or happened, and a link to it.
func SlackText(ev Event) string {
	var b strings.Builder
	switch ev.Type {
	case ApprovalRequested:
		b.WriteString(":hourglass: A call waits for approval")
	case GateWaiting:
		b.WriteString(":hourglass: A gate waits for a decision")
	case RunFailed:
		b.WriteString(":x: A run failed")
	case RunCompleted:
		b.WriteString(":white_check_mark: A run completed")
	default:
		b.WriteString(ev.Type)
	}
	fmt.Fprintf(&b, ": %s (run %s", slackEscape(ev.Summary), slackEscape(ev.Run))
	if ev.Playbook != "" {
		fmt.Fprintf(&b, ", playbook %s", slackEscape(ev.Playbook))
	}
	b.WriteString(")")
	if ev.URL != "" {
		fmt.Fprintf(&b, " <%s|Open it>", strings.NewReplacer("|", "%7C", ">", "%3E", "<", "%3C").Replace(ev.URL))
	}
	return b.String()
}

// slackEscape escapes what Slack's mrkdwn reads as control: &, < and >.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func (n *Notifier) send(ctx context.Context, ep Endpoint, ev Event) error {
	body, err := Body(ep, ev)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "openplaybook-notify/1")
	if ep.Format != "slack" {
		req.Header.Set(HeaderEventID, ev.ID)
		req.Header.Set(HeaderEvent, ev.Type)
		req.Header.Set(HeaderSignature, Sign(ep.Secret, time.Now(), body))
	}
	c := n.Client
	if c == nil {
		c = defaultClient
	}
	res, err := c.Do(req)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) {
			return fmt.Errorf("POST %s: %w", redactURL(ep), ue.Unwrap())
		}
		return fmt.Errorf("POST %s: %v", redactURL(ep), err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return fmt.Errorf("POST %s: %s", redactURL(ep), clipStatus(res.Status))
	}
	return nil
}

// maxStatus bounds how much of a receiver's status line an error keeps
// (the line is the receiver's to choose, up to the client's header limit).
const maxStatus = 200

// clipStatus is status cut to maxStatus bytes, "…" marking a cut.
func clipStatus(status string) string {
	if len(status) <= maxStatus {
		return status
	}
	return strings.ToValidUTF8(status[:maxStatus], "") + "…"
}

// redactURL is how an endpoint is named in errors: a Slack webhook's URL,
// and any URL read from a secret, is a credential, so only its scheme
// and host are shown.
func redactURL(ep Endpoint) string {
	if ep.Format == "slack" || ep.URLSecret {
		if i := strings.Index(ep.URL, "://"); i >= 0 {
			rest := ep.URL[i+3:]
			if j := strings.IndexByte(rest, '/'); j >= 0 {
				rest = rest[:j]
			}
			return ep.URL[:i+3] + rest + "/…"
		}
		return "(the endpoint's secret URL)"
	}
	return ep.URL
}
