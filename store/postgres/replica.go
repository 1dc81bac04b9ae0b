package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/replica"
)

// DefaultLiveness is a replica's liveness timeout when
// [JoinOptions.Liveness] is zero.
const DefaultLiveness = 5 * time.Second

// JoinOptions configure [Store.Join].
type JoinOptions struct {
	// Address is the URL peers reach the replica at (serve
	// --advertise-url); "" when it has none.
	Address string
	// Liveness bounds how long a replica that stopped (a crash, SIGSTOP,
	// a network cut) keeps its claim on its runs: its liveness
	// connection, and every run lock the store takes after Join, is
	// pinged every Liveness/5 and the server ends it after Liveness idle
	// (idle_session_timeout), which releases its advisory lock. Zero
	// means [DefaultLiveness]; less than a second is an error.
	Liveness time.Duration
}

// Replica is this process's registration as one replica of serve: a row
// of the replicas table (id, address, started) and a connection of its
// own holding the replica's advisory lock, which other replicas test to
// tell whether it is alive (see docs/store.md, "Replicas").
type Replica struct {
	s        *Store
	id       string
	key      int64
	liveness time.Duration

	mu   sync.Mutex // serializes the use of conn
	conn *pgx.Conn

	lastOK   atomic.Int64 // unix nanoseconds of the last successful ping
	lost     chan struct{}
	lostOnce sync.Once
	lostErr  error
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// Join registers a new replica with a random id ("rep_" and 16 hex
// digits): it inserts its row and takes its advisory lock on a
// connection of its own, then pings that connection until
// [Replica.Leave] or until a ping fails; then [Replica.Lost] is closed
// and the replica is gone for good (join again, under a new id). After
// Join, the store's run locks expire as the liveness connection does.
func (s *Store) Join(ctx context.Context, o JoinOptions) (*Replica, error) {
	if o.Liveness == 0 {
		o.Liveness = DefaultLiveness
	}
	if o.Liveness < time.Second {
		return nil, fmt.Errorf("store: replica liveness %s: want at least 1s", o.Liveness)
	}
	cf := s.lockCf.Copy()
	cf.RuntimeParams["idle_session_timeout"] = fmt.Sprint(o.Liveness.Milliseconds())
	conn, err := pgx.ConnectConfig(ctx, cf)
	if err != nil {
		return nil, fmt.Errorf("store: joining as a replica: connecting: %w", redactErr(err))
	}
	r := &Replica{s: s, id: newID("rep_"), liveness: o.Liveness, conn: conn,
		lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	r.key = lockKey("replica", s.schema+"\x00"+r.id)
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, r.key).Scan(&ok); err != nil || !ok {
		conn.Close(context.Background())
		return nil, fmt.Errorf("store: joining as a replica: taking its lock: %v (taken: %v)", err, ok)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO replicas (id, address, lock_key, started_at) VALUES ($1, $2, $3, $4)`,
		r.id, o.Address, r.key, formatTime(s.Now())); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("store: joining as a replica: %w", err)
	}
	r.lastOK.Store(time.Now().UnixNano())
	s.lockIdle.Store(int64(o.Liveness))
	go r.ping()
	return r, nil
}

// ID returns the replica's id.
func (r *Replica) ID() string { return r.id }

// Lost is closed once the replica's liveness connection failed (or
// Leave was called): from then on other replicas may adopt its runs.
func (r *Replica) Lost() <-chan struct{} { return r.lost }

// Alive returns nil while the replica's liveness holds: its last
// successful ping is less than the liveness timeout old (a process that
// was stopped longer may have lost its lock without knowing yet), and
// Lost is not closed. It is what a replica checks before each write of
// its executions ([replica.Owned]).
func (r *Replica) Alive() error {
	select {
	case <-r.lost:
		return fmt.Errorf("replica %s lost its liveness: %v", r.id, r.lostErr)
	default:
	}
	if age := time.Since(time.Unix(0, r.lastOK.Load())); age >= r.liveness-r.liveness/5 {
		return fmt.Errorf("replica %s has not confirmed its liveness for %s", r.id, age.Round(time.Millisecond))
	}
	return nil
}

func (r *Replica) ping() {
	defer close(r.done)
	t := time.NewTicker(r.liveness / 5)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			r.fail(errors.New("the replica left"))
			return
		case <-t.C:
		}
		// A process stopped past the timeout finds its lease expired
		// before it asks the server.
		if time.Since(time.Unix(0, r.lastOK.Load())) >= r.liveness {
			r.fail(errors.New("liveness not confirmed within the timeout"))
			return
		}
		r.mu.Lock()
		ctx, cancel := context.WithTimeout(context.Background(), r.liveness/2)
		var held bool
		err := r.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
			AND granted AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = $1)`, r.key).Scan(&held)
		cancel()
		r.mu.Unlock()
		if err == nil && !held {
			err = errors.New("the liveness lock is no longer held")
		}
		if err != nil {
			r.fail(err)
			return
		}
		r.lastOK.Store(time.Now().UnixNano())
	}
}

func (r *Replica) fail(err error) {
	r.lostOnce.Do(func() {
		r.lostErr = err
		close(r.lost)
		r.mu.Lock()
		r.conn.Close(context.Background())
		r.mu.Unlock()
	})
}

// Leave ends the replica: it deletes its row (when its runs are claimed
// by others or none is running) and closes its liveness connection.
func (r *Replica) Leave() error {
	r.stopOnce.Do(func() { close(r.stop) })
	<-r.done
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	defer cancel()
	_, err := r.s.pool.Exec(ctx, `DELETE FROM replicas WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM runs WHERE owner = $1 AND status = 'running')`, r.id)
	return err
}

// ReplicaInfo is one row of the replicas table.
type ReplicaInfo struct {
	ID      string
	Address string
	Started time.Time
	Alive   bool // its liveness lock is held
}

// Replicas returns the registered replicas, whether alive or not.
func (s *Store) Replicas(ctx context.Context) ([]ReplicaInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, address, started_at,
		EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = lock_key)
		FROM replicas ORDER BY started_at, id`)
	if err != nil {
		return nil, fmt.Errorf("store: reading replicas: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ReplicaInfo, error) {
		var ri ReplicaInfo
		var started *string
		err := row.Scan(&ri.ID, &ri.Address, &started, &ri.Alive)
		ri.Started = parseTime(started)
		return ri, err
	})
}

// Adopted is a run [Store.Adopt] claimed.
type Adopted struct {
	Run   string
	From  string // the dead owner
	Epoch int64  // the epoch of the claim
}

// Adopt claims for the replica owner at most max runs that are running
// under an owner that is dead (no replica holds its liveness lock, or
// its row is gone), oldest update first, with FOR UPDATE SKIP LOCKED so
// that replicas adopting at once take different runs; each claim moves
// the run's owner epoch up, which fences the dead owner's writes should
// it come back. It also deletes the rows of dead replicas that own no
// running run. The adopter resumes each run as any resume does.
func (s *Store) Adopt(ctx context.Context, owner string, max int) ([]Adopted, error) {
	if max <= 0 {
		return nil, nil
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: adopting runs: %w", err)
	}
	defer tx.Rollback(context.Background())
	// pg_try_advisory_xact_lock succeeds only on a dead replica's key
	// (a live one holds it) and holds it to the end of this transaction.
	rows, err := tx.Query(ctx, `WITH dead AS (
		SELECT r.id, r.owner FROM runs r LEFT JOIN replicas p ON p.id = r.owner
		WHERE r.status = 'running' AND r.owner <> '' AND r.owner <> $1
			AND (p.id IS NULL OR pg_try_advisory_xact_lock(p.lock_key))
		ORDER BY r.updated_at, r.id LIMIT $2
		FOR UPDATE OF r SKIP LOCKED)
	UPDATE runs SET owner = $1, owner_epoch = runs.owner_epoch + 1 FROM dead WHERE runs.id = dead.id
	RETURNING runs.id, dead.owner, runs.owner_epoch`, owner, max)
	if err != nil {
		return nil, fmt.Errorf("store: adopting runs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Adopted, error) {
		var a Adopted
		err := row.Scan(&a.Run, &a.From, &a.Epoch)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: adopting runs: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM replicas p WHERE p.id <> $1
		AND NOT EXISTS (SELECT 1 FROM runs WHERE owner = p.id AND status = 'running')
		AND pg_try_advisory_xact_lock(p.lock_key)`, owner); err != nil {
		return nil, fmt.Errorf("store: removing dead replicas: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("store: adopting runs: %w", err)
	}
	return out, nil
}

// OwnedRunning returns the runs running under owner, oldest update
// first: those a replica claimed and must execute.
func (s *Store) OwnedRunning(ctx context.Context, owner string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM runs WHERE status = 'running' AND owner = $1 ORDER BY updated_at, id`, owner)
	if err != nil {
		return nil, fmt.Errorf("store: reading owned runs: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// JoinReplica is [Store.Join] for [replica.Cluster].
func (s *Store) JoinReplica(ctx context.Context, address string, liveness time.Duration) (replica.Member, error) {
	r, err := s.Join(ctx, JoinOptions{Address: address, Liveness: liveness})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// AdoptRuns is [Store.Adopt] for [replica.Cluster].
func (s *Store) AdoptRuns(ctx context.Context, owner string, max int) ([]replica.Claim, error) {
	got, err := s.Adopt(ctx, owner, max)
	out := make([]replica.Claim, len(got))
	for i, a := range got {
		out[i] = replica.Claim{Run: a.Run, From: a.From, Epoch: a.Epoch}
	}
	return out, err
}

var _ replica.Cluster = (*Store)(nil)

// RunOwner returns the run's owner, the address it registered and
// whether it is alive (its liveness lock is held); "" and false when the
// run has no owner or the owner's row is gone, [store.ErrNotFound] when
// there is no such run.
func (s *Store) RunOwner(ctx context.Context, run string) (owner, address string, alive bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT r.owner, coalesce(p.address, ''), coalesce(EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted
			AND l.objsubid = 1 AND ((l.classid::bigint << 32) | l.objid::bigint) = p.lock_key), false)
		FROM runs r LEFT JOIN replicas p ON p.id = r.owner WHERE r.id = $1`, run).Scan(&owner, &address, &alive)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", false, fmt.Errorf("%w: run %q", store.ErrNotFound, run)
	}
	if err != nil {
		return "", "", false, fmt.Errorf("store: reading the run's owner: %w", err)
	}
	return owner, address, alive, nil
}
