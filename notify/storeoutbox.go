package notify

import (
	"context"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/store"
)

// StoreOutbox is an [Outbox] kept in the run store's outbox table
// ([store.Outbox]: both engines have one): every server over one store,
// SQLite or PostgreSQL, shares it, and a delivery added by one is added
// by no other. The event is kept as its JSON.
func StoreOutbox(ob store.Outbox) Outbox { return storeOutbox{ob} }

type storeOutbox struct{ ob store.Outbox }

func (o storeOutbox) Add(ctx context.Context, d Delivery) (bool, error) {
	b, err := json.Marshal(d.Event)
	if err != nil {
		return false, fmt.Errorf("notify: encoding event %s: %w", d.Event.ID, err)
	}
	return o.ob.AddDelivery(ctx, store.Delivery{Endpoint: d.Endpoint, EventID: d.Event.ID, Event: b, Attempts: d.Attempts,
		Next: d.Next, LastError: d.LastError, Done: d.Done, Dead: d.Dead})
}

func (o storeOutbox) Due(ctx context.Context, now time.Time, limit int) ([]Delivery, error) {
	ds, err := o.ob.DueDeliveries(ctx, now, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Delivery, 0, len(ds))
	for _, sd := range ds {
		d := Delivery{Endpoint: sd.Endpoint, Attempts: sd.Attempts, Next: sd.Next, LastError: sd.LastError, Done: sd.Done, Dead: sd.Dead}
		if err := json.Unmarshal(sd.Event, &d.Event); err != nil || d.Event.ID != sd.EventID {
			// A row that is not the event it names is never sent: it is
			// marked dead, with why, and stays for an operator to read;
			// the others go on.
			why := "it names another event"
			if err != nil {
				why = err.Error()
			}
			sd.Dead, sd.LastError = true, "the stored event is not valid: "+why
			if err := o.ob.UpdateDelivery(ctx, sd); err != nil {
				return nil, err
			}
			continue
		}
		out = append(out, d)
	}
	return out, nil
}

func (o storeOutbox) Update(ctx context.Context, d Delivery) error {
	return o.ob.UpdateDelivery(ctx, store.Delivery{Endpoint: d.Endpoint, EventID: d.Event.ID, Attempts: d.Attempts,
		Next: d.Next, LastError: d.LastError, Done: d.Done, Dead: d.Dead})
}

func (o storeOutbox) NextDue(ctx context.Context) (time.Time, error) { return o.ob.NextDelivery(ctx) }
