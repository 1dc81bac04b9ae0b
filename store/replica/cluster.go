// Package replica is what a replica of serve needs from a store that
// several processes share: run ownership ([Owned]: claims and fenced
// writes) and, from an engine that supports it ([Cluster], today
// store/postgres), a liveness registration and the adoption of a dead
// replica's runs. See docs/store.md and docs/serve.md, "Replicas".
package replica

import (
	"context"
	"time"

	"github.com/openplaybook/openplaybook/store"
)

// Member is one process's registration as a replica.
type Member interface {
	// ID is the replica's id, the owner its claims record.
	ID() string
	// Lost is closed once the replica lost its liveness: it must stop
	// every execution and join again under a new id.
	Lost() <-chan struct{}
	// Alive returns nil while the replica's liveness holds.
	Alive() error
	// Leave ends the registration.
	Leave() error
}

// Claim is a run adopted from a dead owner.
type Claim struct {
	Run   string
	From  string // the dead owner's id
	Epoch int64
}

// Cluster is a store that several replicas share.
type Cluster interface {
	// JoinReplica registers a new replica reachable at address, whose
	// liveness lapses after liveness without confirmation (0: the
	// engine's default).
	JoinReplica(ctx context.Context, address string, liveness time.Duration) (Member, error)
	// AdoptRuns claims for owner at most max runs running under a dead
	// owner.
	AdoptRuns(ctx context.Context, owner string, max int) ([]Claim, error)
	// OwnedRunning lists the runs running under owner.
	OwnedRunning(ctx context.Context, owner string) ([]string, error)
	// RunOwner returns the run's owner, the address it registered and
	// whether it is alive.
	RunOwner(ctx context.Context, run string) (owner, address string, alive bool, err error)
	// Wake tells the other replicas, after a commit, that what runs
	// wait for changed; it returns at once (coalesced, sent outside any
	// transaction).
	Wake(runs ...string)
	// Listen calls woke with each run another replica woke until ctx
	// ends, and reconnected after each (re)connection of its listener.
	Listen(ctx context.Context, woke func(run string), reconnected func()) error
}

// Find returns the Cluster s is, or wraps (through Unwrap() store.Store
// methods); false when its engine has none (SQLite: one process).
func Find(s store.Store) (Cluster, bool) { return store.As[Cluster](s) }
