package serve

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
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
//
// On a run's stream each "status" event carries an id: the run's audit
// sequence when it was written (its head, the number of records), so
// that a client that reconnects sends it back as Last-Event-ID (the
// EventSource does so by itself) and is sent a "status" event at once
// when the run has moved since; an id that is not a number, or one of
// the same head, gets nothing extra. Progress lines carry no id (they are
// not in the audit log).
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
	// statusEvent writes a status event of the run, with its head as id.
	statusEvent := func(ev Event) bool {
		data, err := json.Marshal(ev)
		if err != nil {
			return true
		}
		id := ""
		if run != "" {
			if rec, err := s.st.GetRun(r.Context(), run); err == nil {
				id = "id: " + strconv.FormatInt(rec.AuditSeq, 10) + "\n"
			}
		}
		return write(fmt.Sprintf("event: status\n%sdata: %s\n\n", id, data))
	}
	if last := r.Header.Get("Last-Event-ID"); run != "" && last != "" {
		seen, err := strconv.ParseInt(last, 10, 64)
		if rec, rerr := s.st.GetRun(r.Context(), run); err == nil && rerr == nil && rec.AuditSeq != seen {
			if !statusEvent(Event{Type: "status", Run: run}) {
				return
			}
		}
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
			if ev.Type == "status" {
				ev.Text = s.redact(ev.Text)
				if !statusEvent(ev) {
					return
				}
				continue
			}
			if frame := s.progressFrame(ev); frame != "" && !write(frame) {
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

// progressFrame is the event stream frame of progress event ev, its text
// redacted: made once for every stream of this process when the broker
// published ev ([Event.frame]); "" when ev cannot be encoded.
func (s *Server) progressFrame(ev Event) string {
	frame := ev.frame
	ev.frame = nil
	encode := func() string {
		ev.Text = s.redact(ev.Text)
		data, err := json.Marshal(ev)
		if err != nil {
			return ""
		}
		// Encoded JSON has no raw line break (a string's are escaped),
		// so the data is one field line.
		return "event: " + ev.Type + "\ndata: " + string(data) + "\n\n"
	}
	if frame == nil {
		return encode()
	}
	frame.once.Do(func() { frame.text = encode() })
	return frame.text
}
