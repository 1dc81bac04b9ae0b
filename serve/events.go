package serve

import "sync"

// Event is what the server tells watchers of a run: a progress line, or
// that the run's status may have changed (read it again). The same
// events are sent to /api/v1/runs/{run}/events as server-sent events
// (the event's type is the SSE event name, the JSON object its data).
type Event struct {
	// Type is "progress" (Text is the line) or "status" (Text, when set,
	// is the status the run's execution here ended with).
	Type string `json:"type"`
	Run  string `json:"run"`
	Text string `json:"text,omitempty"`

	// frame is the event as an event stream sends it, encoded once for
	// all of this process's streams (set by [Broker.Publish] for progress
	// events; nil: each stream encodes it).
	frame *sseFrame
}

// sseFrame is an event's server-sent-event frame, made once.
type sseFrame struct {
	once sync.Once
	text string // "" when the event could not be encoded
}

// Broker fans events out to subscribers. A subscriber that does not keep
// up loses events (it is sent a "status" event so it reads the run again);
// publishing never blocks.
type Broker struct {
	mu     sync.Mutex
	subs   map[string]map[chan Event]struct{} // by run; "" is every run
	remote func(run string)                   // tells the other replicas of a status event; nil: none
}

// NewBroker returns a Broker with no subscribers.
func NewBroker() *Broker { return &Broker{subs: map[string]map[chan Event]struct{}{}} }

// Publish sends ev about run to its subscribers and to those of every
// run; a "status" event also wakes the other replicas (see
// docs/serve.md, "Running several replicas"), whose listeners publish
// it to their own subscribers.
func (b *Broker) Publish(run string, ev Event) {
	b.publish(run, ev)
	b.mu.Lock()
	remote := b.remote
	b.mu.Unlock()
	if remote != nil && ev.Type == "status" && run != "" {
		remote(run)
	}
}

// setRemote makes status events wake the other replicas through fn.
func (b *Broker) setRemote(fn func(run string)) {
	b.mu.Lock()
	b.remote = fn
	b.mu.Unlock()
}

// Nudge sends every subscriber a "status" event (its run's; "" to those
// of every run): what it waits for may have changed unseen (the listener
// for the other replicas' wake-ups reconnected).
func (b *Broker) Nudge() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for run, subs := range b.subs {
		for ch := range subs {
			select {
			case ch <- Event{Type: "status", Run: run}:
			default: // full: it reads the run again anyway
			}
		}
	}
}

// publish is Publish to this process's subscribers only.
func (b *Broker) publish(run string, ev Event) {
	ev.Run = run
	if ev.Type == "progress" {
		ev.frame = &sseFrame{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, key := range []string{run, ""} {
		for ch := range b.subs[key] {
			select {
			case ch <- ev:
			default:
				// Full: drop the oldest so the newest (and a status
				// nudge) gets through.
				select {
				case <-ch:
				default:
				}
				select {
				case ch <- Event{Type: "status", Run: run}:
				default:
				}
			}
		}
	}
}

// Subscribe returns a channel of the events of run ("" for every run) and
// what ends the subscription.
func (b *Broker) Subscribe(run string) (<-chan Event, func()) {
	ch := make(chan Event, 64)
	b.mu.Lock()
	if b.subs[run] == nil {
		b.subs[run] = map[chan Event]struct{}{}
	}
	b.subs[run][ch] = struct{}{}
	b.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.subs[run], ch)
			if len(b.subs[run]) == 0 {
				delete(b.subs, run)
			}
			b.mu.Unlock()
		})
	}
}
