package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/replica"
)

// ReplicaOptions configure the server as one of several replicas on one
// shared store (PostgreSQL); see docs/serve.md, "Running several
// replicas".
type ReplicaOptions struct {
	// AdvertiseURL is where the other replicas reach this one
	// (serve --advertise-url); "" means the server's BaseURL.
	AdvertiseURL string
	// Liveness is how long the replica's liveness may go unconfirmed
	// before the others adopt its runs; zero means the engine's default
	// (5 s).
	Liveness time.Duration
	// MaxAdopt bounds the runs this replica executes that it adopted or
	// claimed and must resume, per adoption round; zero means 50.
	MaxAdopt int
	// AdoptEvery is the interval of adoption rounds; zero means 1 s.
	AdoptEvery time.Duration
}

// replicas is the server's membership: the current registration (a new
// one, under a new id, after each loss) and the adoption loop.
type replicas struct {
	c   replica.Cluster
	opt ReplicaOptions
	log io.Writer

	mu  sync.Mutex
	mem replica.Member

	refused map[string]time.Time // runs whose resume was refused, until when not to try again
	stop    chan struct{}
	done    chan struct{}

	stopListen context.CancelFunc
	listening  sync.WaitGroup
}

// member returns the current registration.
func (rs *replicas) member() replica.Member {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.mem
}

// owned returns st as an execution of this replica sees it: claims in
// the name of its current id, writes fenced (store/replica.Owned).
func (rs *replicas) owned(st store.Store) store.Store {
	m := rs.member()
	if m == nil {
		return st
	}
	return replica.Owned(st, m.ID(), m.Alive)
}

// startReplicas joins the cluster and starts the loop that watches the
// liveness and adopts runs; nil (and nothing started) when the store is
// not shared (SQLite).
func (s *Server) startReplicas(ctx context.Context, o ReplicaOptions) error {
	c, ok := replica.Find(s.st)
	if !ok {
		return nil
	}
	if o.AdvertiseURL == "" {
		o.AdvertiseURL = s.opt.BaseURL
	}
	if o.MaxAdopt <= 0 {
		o.MaxAdopt = 50
	}
	if o.AdoptEvery <= 0 {
		o.AdoptEvery = time.Second
	}
	m, err := c.JoinReplica(ctx, o.AdvertiseURL, o.Liveness)
	if err != nil {
		return fmt.Errorf("joining the replicas: %w", err)
	}
	rs := &replicas{c: c, opt: o, log: s.opt.Log, mem: m, refused: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	fmt.Fprintf(rs.log, "serve: joined the replicas as %s, advertised at %s\n", m.ID(), o.AdvertiseURL)
	s.replicas = rs
	s.runner.replicas = rs
	s.events.setRemote(func(run string) { c.Wake(run) })
	lctx, cancel := context.WithCancel(context.Background())
	rs.stopListen = cancel
	rs.listening.Add(1)
	go func() {
		defer rs.listening.Done()
		_ = c.Listen(lctx, func(run string) {
			s.events.publish(run, Event{Type: "status"})
		}, func() {
			s.events.Nudge()
		})
	}()
	go s.replicaLoop(rs)
	return nil
}

// replicaLoop adopts runs every AdoptEvery; when the liveness is lost it
// stops every execution here (fail-stop: they may be adopted already)
// and joins again under a new id.
func (s *Server) replicaLoop(rs *replicas) {
	defer close(rs.done)
	t := time.NewTicker(rs.opt.AdoptEvery)
	defer t.Stop()
	for {
		m := rs.member()
		select {
		case <-rs.stop:
			return
		case <-m.Lost():
			fmt.Fprintf(rs.log, "serve: replica %s lost its liveness: stopping its executions and joining again\n", m.ID())
			s.runner.StopAll()
			rs.rejoin(s.runner.ctx)
			continue
		case <-t.C:
		}
		s.adopt(rs, m)
	}
}

// rejoin registers again, under a new id, retrying every AdoptEvery
// until it succeeds or the server stops.
func (rs *replicas) rejoin(ctx context.Context) {
	for {
		m, err := rs.c.JoinReplica(ctx, rs.opt.AdvertiseURL, rs.opt.Liveness)
		if err == nil {
			rs.mu.Lock()
			rs.mem = m
			rs.mu.Unlock()
			fmt.Fprintf(rs.log, "serve: joined the replicas again as %s\n", m.ID())
			return
		}
		fmt.Fprintf(rs.log, "serve: joining the replicas again: %v\n", err)
		select {
		case <-rs.stop:
			return
		case <-time.After(rs.opt.AdoptEvery):
		}
	}
}

// adopt claims runs of dead replicas (at most MaxAdopt less what
// executes here) and resumes every run this replica owns that is
// running but not executing here (adopted now, or earlier and refused
// with ErrRunBusy while the dead owner's run lock lapsed).
func (s *Server) adopt(rs *replicas, m replica.Member) {
	if m.Alive() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.runner.ctx, 10*time.Second)
	defer cancel()
	if room := rs.opt.MaxAdopt - s.runner.Count(); room > 0 {
		claims, err := rs.c.AdoptRuns(ctx, m.ID(), room)
		if err != nil {
			fmt.Fprintf(rs.log, "serve: adopting runs: %v\n", err)
		}
		for _, c := range claims {
			fmt.Fprintf(rs.log, "serve: replica %s adopted run %s from %s (epoch %d)\n", m.ID(), c.Run, c.From, c.Epoch)
			s.events.Publish(c.Run, Event{Type: "status"})
		}
	}
	runs, err := rs.c.OwnedRunning(ctx, m.ID())
	if err != nil {
		return
	}
	now := time.Now()
	for _, run := range runs {
		if s.runner.Executing(run) || now.Before(rs.refused[run]) {
			continue
		}
		_, err := s.runner.Resume(ctx, run)
		switch {
		case err == nil, errors.Is(err, ErrExecuting), errors.Is(err, store.ErrRunBusy):
		default:
			// A run this replica cannot resume (its harness changed, its
			// log does not verify) is tried again a minute later.
			rs.refused[run] = now.Add(time.Minute)
			s.events.Publish(run, Event{Type: "progress", Text: "resume after adoption: " + s.runner.redact(err.Error())})
		}
	}
	for run, until := range rs.refused {
		if now.After(until) {
			delete(rs.refused, run)
		}
	}
}

// heldLock is a run lock taken before an execution starts and handed to
// it: the first LockRun of the run through its store returns it.
type heldLock struct {
	store.Store
	run string

	mu     sync.Mutex
	unlock func() // nil once handed over or released
}

// holdLock takes run's lock through st (store.ErrRunBusy when another
// process or replica holds it).
func holdLock(st store.Store, run string) (*heldLock, error) {
	unlock, err := st.LockRun(run)
	if err != nil {
		return nil, err
	}
	return &heldLock{Store: st, run: run, unlock: unlock}, nil
}

func (h *heldLock) LockRun(run string) (func(), error) {
	if run == h.run {
		h.mu.Lock()
		u := h.unlock
		h.unlock = nil
		h.mu.Unlock()
		if u != nil {
			return u, nil
		}
	}
	return h.Store.LockRun(run)
}

// TraceCall is the wrapped store's [runtime.CallTracer] (obs's, with
// tracing on), or returns ctx: the execution a held lock is handed to
// sends its tool calls' trace context as any other.
func (h *heldLock) TraceCall(ctx context.Context, call registry.CallInfo, tool, argsDigest string) context.Context {
	if t, ok := store.As[runtime.CallTracer](h.Store); ok {
		return t.TraceCall(ctx, call, tool, argsDigest)
	}
	return ctx
}

// release unlocks the run when the lock was not handed over.
func (h *heldLock) release() {
	h.mu.Lock()
	u := h.unlock
	h.unlock = nil
	h.mu.Unlock()
	if u != nil {
		u()
	}
}

// store returns h as a store, keeping the built-in tools' data of the
// store it wraps.
func (h *heldLock) store() store.Store {
	if d, ok := h.Store.(builtin.Data); ok {
		return struct {
			*heldLock
			builtin.Data
		}{h, d}
	}
	return h
}

// executingSoon reports whether run executes here or is about to: this
// replica adopted it (it is running, owned by this replica's id) and
// resumes it in its adoption round, within [ReplicaOptions.AdoptEvery]
// (a resume refused because the dead owner's run lock has not lapsed yet
// is tried again the round after). Without replicas, whether it executes
// here. A store error counts as not.
func (s *Server) executingSoon(ctx context.Context, run string) bool {
	if s.runner.Executing(run) {
		return true
	}
	rs := s.replicas
	if rs == nil {
		return false
	}
	m := rs.member()
	if m == nil {
		return false
	}
	owner, _, _, err := rs.c.RunOwner(ctx, run)
	if err != nil || owner != m.ID() {
		return false
	}
	r, err := s.st.GetRun(ctx, run)
	return err == nil && r.Status == store.RunRunning && m.Alive() == nil
}
