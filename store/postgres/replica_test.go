package postgres_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/internal/pgtest"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/postgres"
	"github.com/openplaybook/openplaybook/store/replica"
)

func join(t *testing.T, s *postgres.Store) *postgres.Replica {
	t.Helper()
	r, err := s.Join(bg, postgres.JoinOptions{Address: "http://127.0.0.1:1", Liveness: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Leave() })
	return r
}

// killLiveness ends the server session holding the replica's liveness
// lock, as a crash of its process or a network cut would.
func killLiveness(t *testing.T, url, id string) {
	t.Helper()
	conn, err := pgx.Connect(bg, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(bg)
	var ok bool
	if err := conn.QueryRow(bg, `SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN replicas p
		ON l.locktype = 'advisory' AND l.objsubid = 1 AND ((l.classid::bigint << 32) | l.objid::bigint) = p.lock_key
		WHERE p.id = $1 AND l.granted`, id).Scan(&ok); err != nil || !ok {
		t.Fatalf("terminating the liveness session of %s: %v %v", id, ok, err)
	}
}

// TestReplicaAdoptionFences: a run claimed by replica A is not adopted
// while A is alive; once A's liveness session ends, A learns it (Lost)
// and B adopts the run with a higher epoch, after which A's fenced
// writes fail with ErrFenced and leave nothing in the database.
func TestReplicaAdoptionFences(t *testing.T) {
	url := pgtest.Schema(t)
	sa, sb := openURL(t, url, nil), openURL(t, url, nil)
	ra, rb := join(t, sa), join(t, sb)
	run, _ := newRun(t, sa)
	va := replica.Owned(sa, ra.ID(), nil)
	unlock, err := va.LockRun(run)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	write := func(s store.Store) error {
		return s.Tx(bg, func(tx store.Tx) error {
			_, err := tx.Append(audit.Record{Run: run, Kind: "step.note", Step: "work"})
			return err
		})
	}
	if err := write(va); err != nil {
		t.Fatalf("owner's write: %v", err)
	}
	if got, err := sb.Adopt(bg, rb.ID(), 10); err != nil || len(got) != 0 {
		t.Fatalf("adopting while the owner lives: %v %v, want nothing", got, err)
	}
	infos, err := sb.Replicas(bg)
	if err != nil || len(infos) != 2 || !infos[0].Alive || !infos[1].Alive {
		t.Fatalf("replicas: %+v %v, want two alive", infos, err)
	}
	killLiveness(t, url, ra.ID())
	select {
	case <-ra.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("the replica did not notice its liveness session ended")
	}
	if ra.Alive() == nil {
		t.Error("Alive after Lost: nil, want an error")
	}
	got, err := sb.Adopt(bg, rb.ID(), 10)
	if err != nil || len(got) != 1 || got[0].Run != run || got[0].From != ra.ID() || got[0].Epoch != 2 {
		t.Fatalf("adopting after the owner died: %+v %v, want %s from %s at epoch 2", got, err, run, ra.ID())
	}
	seq, _, _ := sb.AuditHead(bg, run)
	if err := write(va); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("old owner's write after adoption: %v, want ErrFenced", err)
	}
	if q := va.Queue(bg, func(tx store.Tx) error {
		_, err := tx.Append(audit.Record{Run: run, Kind: "step.note", Step: "work"})
		return err
	}); !errors.Is(q.Wait(), store.ErrFenced) {
		t.Fatalf("old owner's queued write after adoption: %v, want ErrFenced", q.Wait())
	}
	if now, _, _ := sb.AuditHead(bg, run); now != seq {
		t.Errorf("audit head moved from %d to %d by fenced writes", seq, now)
	}
	// A view whose replica lost its liveness fails before the server.
	dead := replica.Owned(sa, ra.ID(), ra.Alive)
	if err := write(dead); !errors.Is(err, store.ErrFenced) {
		t.Errorf("write through a view of a lost replica: %v, want ErrFenced", err)
	}
	r, err := sb.GetRun(bg, run)
	if err != nil || r.Owner != rb.ID() || r.OwnerEpoch != 2 {
		t.Errorf("run owner %q epoch %d (%v), want %s at 2", r.Owner, r.OwnerEpoch, err, rb.ID())
	}
}

// TestAdoptSkipsLocked: replicas adopting at once take different runs,
// each at most its bound.
func TestAdoptSkipsLocked(t *testing.T) {
	url := pgtest.Schema(t)
	sa := openURL(t, url, nil)
	ra := join(t, sa)
	var runs []string
	for range 6 {
		run, _ := newRun(t, sa)
		mustTx(t, sa, func(tx store.Tx) error { _, err := tx.ClaimRun(run, ra.ID()); return err })
		runs = append(runs, run)
	}
	killLiveness(t, url, ra.ID())
	<-ra.Lost()
	var mu sync.Mutex
	var all []string
	var wg sync.WaitGroup
	for range 3 {
		s := openURL(t, url, nil)
		r := join(t, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := s.Adopt(context.Background(), r.ID(), 2)
			if err != nil || len(got) > 2 {
				t.Errorf("adopt: %v %v", got, err)
			}
			mu.Lock()
			for _, a := range got {
				all = append(all, a.Run)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	// Whatever SKIP LOCKED left, a later round takes.
	s := openURL(t, url, nil)
	r := join(t, s)
	got, err := s.Adopt(bg, r.ID(), 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range got {
		all = append(all, a.Run)
	}
	sort.Strings(all)
	sort.Strings(runs)
	if len(all) != len(runs) {
		t.Fatalf("adopted %v, want each of %v once", all, runs)
	}
	for i := range all {
		if all[i] != runs[i] {
			t.Fatalf("adopted %v, want each of %v once", all, runs)
		}
	}
	if infos, _ := s.Replicas(bg); len(infos) != 4 {
		t.Errorf("replicas after adoption: %+v, want the dead one removed (4 left)", infos)
	}
}
