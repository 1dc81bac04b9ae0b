package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/runtime"
)

// keepAlive is how often the event stream sends a comment when nothing
// happens, so that proxies and browsers keep the connection open.
const keepAlive = 25 * time.Second

// events streams the server's events of one run (query parameter run) or
// of every run as server-sent events (HTML Living Standard, "Server-sent
// events"): the event's type ("status" or "progress") is the SSE event
// name, the JSON object {"type", "run", "text"} its data. The console's
// script reloads the page on "status" and shows "progress" lines.
//
// Query parameter since is the state the page was rendered from
// ([Console.state]); when the state is another by the time the stream is
// subscribed, a "status" event is sent at once, so a change between the
// page's rendering and its stream is not missed.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	run := q.Get("run")
	ch, cancel := c.b.Subscribe(run)
	defer cancel()
	stale := q.Has("since") && c.state(r.Context(), q) != q.Get("since")
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, ": openplaybook console events\n\n"); err != nil {
		return
	}
	if stale {
		b, _ := json.Marshal(Event{Type: "status", Run: run})
		fmt.Fprintf(w, "event: status\ndata: %s\n\n", b)
	}
	if rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.b.Closing():
			return
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case ev := <-ch:
			if ev.Type != "status" && ev.Type != "progress" {
				continue
			}
			// For people only: redacted and escaped as the pages are.
			ev.Text = c.line(ev.Text)
			b, err := json.Marshal(ev)
			if err != nil {
				continue
			}
			// b is one line: JSON escapes every line break in a string.
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Type, b); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

// state is what a page was rendered from, as a short digest: for a run
// (q's run) its status, audit head and whether it executes here (every
// change of a run appends an audit record); for a page of runs, what the
// list shows of each run of the page that q's filters and cursor select
// ([listQuery]), one read of the store.
func (c *Console) state(ctx context.Context, q url.Values) string {
	if run := q.Get("run"); run != "" {
		rec, err := c.b.RunRecord(ctx, run)
		if err != nil {
			return "unknown"
		}
		return fmt.Sprintf("%s-%d-%t", rec.Status, rec.AuditSeq, c.b.Executing(run))
	}
	lq, err := listQueryOf(q)
	if err != nil {
		return "unknown"
	}
	runs, _, err := c.b.RunsPage(ctx, lq.filter, lq.cursor, lq.limit)
	if err != nil {
		return "unknown"
	}
	return c.runsState(runs)
}

func (c *Console) runsState(runs []runtime.RunStatus) string {
	h := sha256.New()
	for _, r := range runs {
		fmt.Fprintf(h, "%q %q %q %q %t", r.Run, r.Status, r.Step, r.Updated, c.b.Executing(r.Run))
		for _, p := range r.Waiting {
			fmt.Fprintf(h, " %q %q", p.Kind, p.ID)
		}
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
