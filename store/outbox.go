package store

import (
	"context"
	"time"
)

// Delivery is one notification owed to one endpoint: package notify's
// outbox, kept in the store so that a restart, or another server over the
// same database, neither drops nor repeats one it finished (docs/console.md,
// "Notifications"). Endpoint and EventID identify it; Event is the event's
// JSON as notify encodes it, kept verbatim.
type Delivery struct {
	Endpoint  string
	EventID   string
	Event     []byte
	Attempts  int
	Next      time.Time // when it is due, UTC
	LastError string
	Done      bool // the endpoint answered 2xx
	Dead      bool // the attempts ran out
}

// DeliveryLease is how long a delivery [Outbox.DueDeliveries] handed
// out stays claimed: more than one attempt takes (package notify gives up
// on an answer after 10 s).
const DeliveryLease = time.Minute

// Outbox is what an engine that keeps notification deliveries offers (both
// engines here do; it is optional to the contract). Each method is one
// transaction of its own; none takes a run's lock.
type Outbox interface {
	// AddDelivery records d unless a delivery with its Endpoint and
	// EventID exists (done or not); it reports whether it added d.
	AddDelivery(ctx context.Context, d Delivery) (bool, error)
	// DueDeliveries returns at most limit deliveries neither done nor dead
	// whose Next is not after now, the earliest first, as they were, and
	// claims them: in the store their Next becomes now + [DeliveryLease],
	// so that no other caller (another server over the store) is handed
	// them until the claimer records the attempt ([UpdateDelivery]) or
	// the lease runs out (the claimer died: at least once, not at most).
	DueDeliveries(ctx context.Context, now time.Time, limit int) ([]Delivery, error)
	// UpdateDelivery stores d's Attempts, Next, LastError, Done and Dead;
	// [ErrNotFound] when there is no such delivery.
	UpdateDelivery(ctx context.Context, d Delivery) error
	// NextDelivery is the earliest Next of a delivery neither done nor
	// dead, zero when there is none.
	NextDelivery(ctx context.Context) (time.Time, error)
}
