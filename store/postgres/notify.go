package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Wake-ups between replicas. A replica that changed what a run waits for
// (a decision, a cancel, a new wait, an end, an adoption) calls
// [Store.Wake] after the change committed; a goroutine coalesces the
// runs woken meanwhile into one pg_notify on the store's channel (one
// per schema), sent on a pooled connection outside any data transaction.
// [Store.Listen] holds a connection of its own that LISTENs on the
// channel and hands each run to its function; notifications from the
// same store are skipped (its replica published them locally already).
// A notification is a hint: a lost one (a listener reconnecting, a
// server restart) costs only the reader's polling interval.

// maxPayload keeps a notification under PostgreSQL's 8000-byte limit.
const maxPayload = 7000

// notifyChannel is the schema's channel name: an identifier, the same
// for every store on the schema.
func (s *Store) notifyChannel() string {
	return "openplaybook_" + strconv.FormatUint(uint64(lockKey("notify", s.schema)), 36)
}

type waker struct {
	mu      sync.Mutex
	pending map[string]struct{}
	kick    chan struct{}
	once    sync.Once
	sender  string
}

// Wake tells every listening replica (but this store's own listener)
// that runs changed. It returns at once; the notification follows, with
// those of other Wake calls made before it is sent.
func (s *Store) Wake(runs ...string) {
	w := &s.waker
	w.once.Do(func() {
		w.pending = map[string]struct{}{}
		w.kick = make(chan struct{}, 1)
		w.sender = newID("")
		go s.sendWakes()
	})
	w.mu.Lock()
	for _, r := range runs {
		if r != "" && !strings.ContainsAny(r, " \x00") {
			w.pending[r] = struct{}{}
		}
	}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (s *Store) sendWakes() {
	w := &s.waker
	for {
		select {
		case <-w.kick:
		case <-s.done: // the store closed
			return
		}
		w.mu.Lock()
		runs := make([]string, 0, len(w.pending))
		for r := range w.pending {
			runs = append(runs, r)
		}
		clear(w.pending)
		w.mu.Unlock()
		for len(runs) > 0 {
			payload := w.sender
			n := 0
			for n < len(runs) && len(payload)+1+len(runs[n]) <= maxPayload {
				payload += " " + runs[n]
				n++
			}
			if n == 0 { // a run id longer than a payload: skipped
				runs = runs[1:]
				continue
			}
			runs = runs[n:]
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, s.notifyChannel(), payload)
			cancel()
		}
	}
}

// Listen LISTENs on the store's channel on a connection of its own until
// ctx ends, calling woke with each run another store woke; after every
// reconnection (the first connection too) it calls reconnected, so that
// the caller reads again what it may have missed. It retries a lost
// connection every second. It returns ctx's error.
func (s *Store) Listen(ctx context.Context, woke func(run string), reconnected func()) error {
	for {
		err := s.listenOnce(ctx, woke, reconnected)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		_ = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (s *Store) listenOnce(ctx context.Context, woke func(string), reconnected func()) error {
	cf := s.lockCf.Copy()
	cf.RuntimeParams["application_name"] = "openplaybook-listen"
	conn, err := pgx.ConnectConfig(ctx, cf)
	if err != nil {
		return fmt.Errorf("store: listening: connecting: %w", redactErr(err))
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{s.notifyChannel()}.Sanitize()); err != nil {
		return fmt.Errorf("store: listening: %w", err)
	}
	s.Wake() // starts the sender, so that its id is known before the first notification
	s.waker.mu.Lock()
	self := s.waker.sender
	s.waker.mu.Unlock()
	if reconnected != nil {
		reconnected()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return fmt.Errorf("store: listening: %w", err)
		}
		f := strings.Fields(n.Payload)
		if len(f) == 0 || f[0] == self {
			continue
		}
		for _, run := range f[1:] {
			woke(run)
		}
	}
}
