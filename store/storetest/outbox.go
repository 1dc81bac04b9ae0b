package storetest

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/store"
)

// testOutbox: an engine's notification outbox ([store.Outbox]) adds an
// event once per endpoint (also when two callers race), keeps the event's
// bytes verbatim, hands out what is due earliest first, and forgets
// nothing that is not done or dead.
func testOutbox(t *testing.T, openTest Opener) {
	s := openTest(t)
	ob, ok := s.(store.Outbox)
	if !ok {
		t.Fatalf("%T does not keep an outbox (store.Outbox)", s)
	}
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	body := []byte("{\"id\":\"evt_1\",\"summary\":\"caf\u00e9 \\u2028 \x00\"}")
	d1 := store.Delivery{Endpoint: "ops", EventID: "evt_1", Event: body, Next: t0}
	if next, err := ob.NextDelivery(bg); err != nil || !next.IsZero() {
		t.Fatalf("an empty outbox's next delivery: %v, %v; want zero", next, err)
	}
	// Eight racing adds of one delivery add it once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	added := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := ob.AddDelivery(bg, d1)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				added++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if added != 1 {
		t.Fatalf("8 racing adds of one delivery added %d, want 1", added)
	}
	// The same event for another endpoint is another delivery; a later one
	// is not due yet.
	mustAdd := func(d store.Delivery) {
		t.Helper()
		if ok, err := ob.AddDelivery(bg, d); err != nil || !ok {
			t.Fatalf("adding %s/%s: %v, %v", d.Endpoint, d.EventID, ok, err)
		}
	}
	mustAdd(store.Delivery{Endpoint: "slack", EventID: "evt_1", Event: body, Next: t0.Add(-time.Second)})
	mustAdd(store.Delivery{Endpoint: "ops", EventID: "evt_2", Event: []byte(`{}`), Next: t0.Add(time.Hour)})

	due, err := ob.DueDeliveries(bg, t0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 2 || due[0].Endpoint != "slack" || due[1].Endpoint != "ops" || due[1].EventID != "evt_1" {
		t.Fatalf("due at t0: %+v; want slack/evt_1 then ops/evt_1", due)
	}
	if string(due[1].Event) != string(body) || !due[1].Next.Equal(t0) {
		t.Errorf("the delivery read back: event %q next %v; want %q and %v", due[1].Event, due[1].Next, body, t0)
	}
	// Handed out, they are claimed for store.DeliveryLease: no other
	// caller gets them before that.
	if again, err := ob.DueDeliveries(bg, t0, 10); err != nil || len(again) != 0 {
		t.Errorf("due at t0 once more: %+v, %v; want none (claimed)", again, err)
	}
	if one, err := ob.DueDeliveries(bg, t0.Add(store.DeliveryLease), 1); err != nil || len(one) != 1 {
		t.Errorf("due with limit 1 once the lease ran out: %+v, %v; want one", one, err)
	}
	// A failed attempt moves it later; done and dead ones are never due.
	d := due[1]
	d.Attempts, d.Next, d.LastError = 1, t0.Add(30*time.Minute), "HTTP 500"
	if err := ob.UpdateDelivery(bg, d); err != nil {
		t.Fatal(err)
	}
	s2 := due[0]
	s2.Attempts, s2.Done = 1, true
	if err := ob.UpdateDelivery(bg, s2); err != nil {
		t.Fatal(err)
	}
	if due, err := ob.DueDeliveries(bg, t0, 10); err != nil || len(due) != 0 {
		t.Errorf("due at t0 after the updates: %+v, %v; want none", due, err)
	}
	if next, err := ob.NextDelivery(bg); err != nil || !next.Equal(t0.Add(30*time.Minute)) {
		t.Errorf("next delivery: %v, %v; want %v", next, err, t0.Add(30*time.Minute))
	}
	due, err = ob.DueDeliveries(bg, t0.Add(2*time.Hour), 10)
	if err != nil || len(due) != 2 || due[0].EventID != "evt_1" || due[0].Attempts != 1 || due[0].LastError != "HTTP 500" || due[1].EventID != "evt_2" {
		t.Fatalf("due two hours later: %+v, %v", due, err)
	}
	if ok, err := ob.AddDelivery(bg, s2); err != nil || ok {
		t.Errorf("adding a done delivery again: %v, %v; want not added", ok, err)
	}
	due[1].Dead = true
	if err := ob.UpdateDelivery(bg, due[1]); err != nil {
		t.Fatal(err)
	}
	if err := ob.UpdateDelivery(bg, store.Delivery{Endpoint: "ops", EventID: "evt_none"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("updating a delivery that does not exist: %v; want ErrNotFound", err)
	}
	if due, err := ob.DueDeliveries(bg, t0.Add(2*time.Hour+store.DeliveryLease), 10); err != nil || len(due) != 1 || due[0].EventID != "evt_1" {
		t.Errorf("due after evt_2 died: %+v, %v; want evt_1 alone", due, err)
	}
	// Servers racing for due deliveries get each one once.
	for i := range 20 {
		mustAdd(store.Delivery{Endpoint: "race", EventID: "evt_r" + strconv.Itoa(i), Event: []byte(`{}`), Next: t0.Add(3 * time.Hour)})
	}
	got := map[string]int{}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds, err := ob.DueDeliveries(bg, t0.Add(3*time.Hour), 10)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			for _, d := range ds {
				got[d.Endpoint+"/"+d.EventID]++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	for k, n := range got {
		if n != 1 {
			t.Errorf("%s was handed out %d times to racing callers", k, n)
		}
	}
	for i := range 20 {
		if got["race/evt_r"+strconv.Itoa(i)] != 1 {
			t.Errorf("race/evt_r%d was handed out %d times; want once", i, got["race/evt_r"+strconv.Itoa(i)])
		}
	}
}
