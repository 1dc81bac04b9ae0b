package serve

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-json-experiment/json"
)

// sseHeartbeat is how often an event stream with nothing to say gets a
// comment line, so that the client and any proxy between see it alive.
const sseHeartbeat = 15 * time.Second

// streamEvents answers with the events of run ("" for every run) as
// server-sent events (WHATWG HTML, "Server-sent events"): it opens with
// a comment, then writes each [Event] as
//
//	event: status
//	data: {"type":"status","run":"run_..."}
//
// (the data one line of JSON) and a comment every [sseHeartbeat],
// flushing after each, until the client goes away or the server closes.
// A client that falls behind loses events but is sent a "status" one:
// it should read the run again on every "status".
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, run string) {
	events, cancel := s.events.Subscribe(run)
	defer cancel()
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives any write timeout
	write := func(s string) bool {
		if _, err := io.WriteString(w, s); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	what := "every run"
	if run != "" {
		what = "run " + run
	}
	if !write(": openplaybook events of " + oneLine(s.redact(what)) + "\n\n") {
		return
	}
	tick := time.NewTicker(sseHeartbeat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.runner.ctx.Done(): // the server is closing
			return
		case <-tick.C:
			if !write(": heartbeat\n\n") {
				return
			}
		case ev := <-events:
			if ev.Type != "progress" && ev.Type != "status" {
				continue // not a name this stream documents
			}
			ev.Text = s.redact(ev.Text)
			data, err := json.Marshal(ev)
			if err != nil {
				continue
			}
			// Encoded JSON has no raw line break (a string's are
			// escaped), so the data is one field line.
			if !write(fmt.Sprintf("event: %s\ndata: %s\n\n", ev.Type, data)) {
				return
			}
		}
	}
}

// oneLine replaces line breaks, which would end an SSE comment line.
func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}
