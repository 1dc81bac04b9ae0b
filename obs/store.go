package obs

import (
	"context"
	"time"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/store"
)

// Store wraps st so that every audit record a transaction appends is
// reported (logged, counted, traced) once the transaction has committed,
// and each transaction's latency is measured. The wrapper keeps the
// built-in primitives' tables ([builtin.Data], [builtin.DataTx]) when st
// has them. A nil o returns st.
func (o *Obs) Store(st store.Store) store.Store {
	if o == nil || st == nil {
		return st
	}
	w := &obsStore{Store: st, o: o}
	if d, ok := st.(builtin.Data); ok {
		return &obsDataStore{obsStore: w, Data: d}
	}
	return w
}

type obsStore struct {
	store.Store
	o *Obs
}

type obsDataStore struct {
	*obsStore
	builtin.Data
}

// Unwrap returns the wrapped store.
func (s *obsStore) Unwrap() store.Store { return s.Store }

// entry is one transaction's records, reported once its outcome is
// known (done closed; ok says it committed).
type entry struct {
	ctx  context.Context
	recs []audit.Record
	done chan struct{}
	ok   bool
}

// collector gathers the records a transaction's function appended; the
// first time the function succeeds it puts the transaction in the
// delivery order (the store runs functions in its commit order).
type collector struct {
	o   *Obs
	ctx context.Context
	e   *entry
}

func (s *obsStore) wrapFn(c *collector, fn func(store.Tx) error) func(store.Tx) error {
	return func(tx store.Tx) error {
		var recs []audit.Record
		err := fn(wrapTx(tx, &recs))
		if err == nil && len(recs) > 0 {
			if c.e == nil {
				c.e = &entry{ctx: c.ctx, done: make(chan struct{})}
				c.o.enqueue(c.e)
			}
			c.e.recs = recs // a function run again replaces what it appended
		}
		return err
	}
}

func (s *obsStore) Tx(ctx context.Context, fn func(store.Tx) error) error {
	c := &collector{o: s.o, ctx: ctx}
	t0 := time.Now()
	err := s.Store.Tx(ctx, s.wrapFn(c, fn))
	if s.o.metering {
		opt := s.o.m.txOK
		if err != nil {
			opt = s.o.m.txFailed
		}
		s.o.m.txLatency.Record(ctx, time.Since(t0).Seconds(), opt)
	}
	if c.e != nil {
		c.e.ok = err == nil
		close(c.e.done)
	}
	return err
}

func (s *obsStore) Queue(ctx context.Context, fn func(store.Tx) error) store.Queued {
	c := &collector{o: s.o, ctx: ctx}
	t0 := time.Now()
	q := s.Store.Queue(ctx, s.wrapFn(c, fn))
	go func() {
		<-q.Done()
		// Wait is not called here (it would take the outcome from a
		// later Flush): the records of a function that succeeded are
		// reported once its outcome is known.
		if s.o.metering {
			s.o.m.txLatency.Record(context.Background(), time.Since(t0).Seconds(), s.o.m.txQueued)
		}
		if c.e != nil {
			c.e.ok = true
			close(c.e.done)
		}
	}()
	return q
}

// enqueue puts e last in the delivery order.
func (o *Obs) enqueue(e *entry) {
	o.dmu.Lock()
	o.pending = append(o.pending, e)
	start := !o.delivering
	o.delivering = true
	o.dmu.Unlock()
	if start {
		go o.deliver()
	}
}

// deliver reports the transactions in order, each once its outcome is
// known, until none is left.
func (o *Obs) deliver() {
	for {
		o.dmu.Lock()
		if len(o.pending) == 0 {
			o.delivering = false
			o.dcond.Broadcast()
			o.dmu.Unlock()
			return
		}
		e := o.pending[0]
		o.dmu.Unlock()
		<-e.done
		if e.ok {
			o.observe(e.ctx, e.recs)
		}
		o.dmu.Lock()
		o.pending = o.pending[1:]
		if o.waiters > 0 {
			o.dcond.Broadcast()
		}
		o.dmu.Unlock()
	}
}

// Flush returns once every committed record handed to the wrapped store
// before it has been reported.
func (o *Obs) Flush() {
	if o == nil {
		return
	}
	o.dmu.Lock()
	for o.delivering {
		o.dcond.Wait()
	}
	o.dmu.Unlock()
}

func wrapTx(tx store.Tx, recs *[]audit.Record) store.Tx {
	w := &obsTx{Tx: tx, recs: recs}
	if d, ok := tx.(builtin.DataTx); ok {
		return &obsDataTx{obsTx: w, DataTx: d}
	}
	return w
}

type obsTx struct {
	store.Tx
	recs *[]audit.Record
}

type obsDataTx struct {
	*obsTx
	builtin.DataTx
}

func (t *obsTx) Append(rec audit.Record) (audit.Record, error) {
	r, err := t.Tx.Append(rec)
	if err == nil {
		*t.recs = append(*t.recs, r)
	}
	return r, err
}

func (t *obsTx) AppendAll(recs ...audit.Record) ([]audit.Record, error) {
	rs, err := t.Tx.AppendAll(recs...)
	if err == nil {
		*t.recs = append(*t.recs, rs...)
	}
	return rs, err
}
