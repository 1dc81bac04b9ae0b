package sqlite

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/store"
)

func seed(t *testing.T, s *Store) {
	t.Helper()
	created := time.Date(2025, 6, 1, 9, 30, 0, 0, time.UTC)
	err := s.SeedCustomers(bg, []store.Customer{
		{ID: "cus_1", Name: "Ana Lima", Email: "ana@acme.test", Company: "Acme", Plan: "pro", Tags: []string{"vip"}, Created: created},
		{ID: "cus_2", Name: "Bo Ek", Email: "bo@example.test", Company: "Acme", Plan: "free"},
		{ID: "cus_3", Name: "Anabel Ng", Email: "anabel@globex.test", Company: "Globex"},
		{ID: "cus_4", Name: "Dan 100% Real", Email: "dan@under_score.test"},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func names(cs []store.Customer) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return fmt.Sprint(out)
}

func TestCustomers(t *testing.T) {
	s := openTest(t)
	seed(t, s)
	c, err := s.GetCustomer(bg, "cus_1")
	if err != nil || c.Name != "Ana Lima" || c.Plan != "pro" || fmt.Sprint(c.Tags) != "[vip]" || !c.Created.Equal(time.Date(2025, 6, 1, 9, 30, 0, 0, time.UTC)) {
		t.Errorf("GetCustomer = %+v, %v", c, err)
	}
	if _, err := s.GetCustomer(bg, "cus_9"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing customer: %v", err)
	}
	// Upsert.
	if err := s.SeedCustomers(bg, []store.Customer{{ID: "cus_2", Name: "Bo Ek", Email: "bo@new.test", Plan: "pro"}}); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.GetCustomer(bg, "cus_2"); c.Email != "bo@new.test" || c.Company != "" {
		t.Errorf("after upsert: %+v", c)
	}
	for _, tc := range []struct {
		q     string
		limit int
		want  string
	}{
		{"ana", 0, "[cus_1 cus_3]"},
		{"ANA", 0, "[cus_1 cus_3]"},
		{"anabel@globex.test", 0, "[cus_3]"},
		{"anabel", 0, "[cus_3]"},
		{"acme", 0, "[cus_1]"},
		{"ana acme", 0, "[cus_1]"},
		{"Anabel Ng", 0, "[cus_3]"},
		{"ng", 0, "[cus_3]"},
		{"", 2, "[cus_1 cus_3]"},
		{"a", 1, "[cus_1]"},
		{"%", 0, "[cus_4]"},
		{"_", 0, "[cus_4]"},
		{`\`, 0, "[]"},
		{"cus_2", 0, "[]"}, // ids are matched exactly only as a ranking, not searched
		{"nobody", 0, "[]"},
	} {
		cs, err := s.SearchCustomers(bg, tc.q, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(cs); got != tc.want {
			t.Errorf("SearchCustomers(%q, %d) = %s, want %s", tc.q, tc.limit, got, tc.want)
		}
	}
	// An exact email wins over a name that contains the query.
	if err := s.SeedCustomers(bg, []store.Customer{{ID: "cus_5", Name: "Aaron x@y.test fan", Email: "a@a.test"}, {ID: "cus_6", Name: "Zed", Email: "x@y.test"}}); err != nil {
		t.Fatal(err)
	}
	if cs, _ := s.SearchCustomers(bg, "x@y.test", 0); names(cs) != "[cus_6 cus_5]" {
		t.Errorf("exact email first: %s", names(cs))
	}
}

func TestNotes(t *testing.T) {
	s := openTest(t)
	run, _ := newRun(t, s)
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s.SetClock(func() time.Time { clock = clock.Add(time.Second); return clock })
	var first store.Note
	mustTx(t, s, func(tx store.Tx) error {
		var err error
		first, err = tx.(*Tx).AddNote(store.Note{CustomerID: "cus_1", Body: "called, no answer", Tags: []string{"churn"}, Author: "triage", Run: run, Step: "work"})
		if err != nil {
			return err
		}
		if _, err := tx.(*Tx).AddNote(store.Note{CustomerID: "cus_1", Body: "second"}); err != nil {
			return err
		}
		_, err = tx.(*Tx).AddNote(store.Note{Body: "general", Tags: []string{"churn", "q3"}})
		return err
	})
	if first.ID == "" || first.Created.IsZero() {
		t.Errorf("note = %+v", first)
	}
	body := func(ns []store.Note) string {
		var out []string
		for _, n := range ns {
			out = append(out, n.Body)
		}
		return fmt.Sprint(out)
	}
	for _, tc := range []struct {
		customer, tag string
		limit         int
		want          string
	}{
		{"", "", 0, "[general second called, no answer]"},
		{"cus_1", "", 0, "[second called, no answer]"},
		{"cus_1", "", 1, "[second]"},
		{"", "churn", 0, "[general called, no answer]"},
		{"cus_1", "churn", 0, "[called, no answer]"},
		{"", "q", 0, "[]"},
		{"cus_9", "", 0, "[]"},
	} {
		ns, err := s.ListNotes(bg, tc.customer, tc.tag, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if got := body(ns); got != tc.want {
			t.Errorf("ListNotes(%q, %q, %d) = %s, want %s", tc.customer, tc.tag, tc.limit, got, tc.want)
		}
	}
	ns, _ := s.ListNotes(bg, "", "", 0)
	if last := ns[2]; last.Author != "triage" || last.Run != run || last.Step != "work" || fmt.Sprint(last.Tags) != "[churn]" {
		t.Errorf("note = %+v", last)
	}
}

func TestToday(t *testing.T) {
	s := openTest(t)
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s.SetClock(func() time.Time { clock = clock.Add(time.Second); return clock })
	var low store.TodayItem
	mustTx(t, s, func(tx store.Tx) error {
		var err error
		if low, err = tx.(*Tx).SurfaceToday(store.TodayItem{Title: "low", Summary: "s", Priority: "low"}); err != nil {
			return err
		}
		if _, err := tx.(*Tx).SurfaceToday(store.TodayItem{Title: "normal", Summary: "s", CustomerID: "cus_1", Link: "https://x.test/1"}); err != nil {
			return err
		}
		if _, err := tx.(*Tx).SurfaceToday(store.TodayItem{Title: "high", Summary: "s", Priority: "high"}); err != nil {
			return err
		}
		_, err = tx.(*Tx).SurfaceToday(store.TodayItem{Title: "bad", Summary: "s", Priority: "urgent"})
		if err == nil {
			return errors.New("priority urgent accepted")
		}
		return nil
	})
	titles := func(its []store.TodayItem) string {
		var out []string
		for _, it := range its {
			out = append(out, it.Title)
		}
		return fmt.Sprint(out)
	}
	its, err := s.ListToday(bg, false)
	if err != nil || titles(its) != "[high normal low]" || its[1].Priority != "normal" || its[1].Link != "https://x.test/1" {
		t.Errorf("ListToday = %+v, %v", its, err)
	}
	mustTx(t, s, func(tx store.Tx) error { return tx.(*Tx).DismissToday(low.ID) })
	if err := s.Tx(bg, func(tx store.Tx) error { return tx.(*Tx).DismissToday(low.ID) }); !errors.Is(err, store.ErrState) {
		t.Errorf("dismissing twice: %v", err)
	}
	if err := s.Tx(bg, func(tx store.Tx) error { return tx.(*Tx).DismissToday("today_x") }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("dismissing a missing item: %v", err)
	}
	if its, _ := s.ListToday(bg, false); titles(its) != "[high normal]" {
		t.Errorf("after dismiss: %s", titles(its))
	}
	if its, _ := s.ListToday(bg, true); titles(its) != "[high normal low]" || its[2].Dismissed.IsZero() {
		t.Errorf("with dismissed: %+v", its)
	}
}
