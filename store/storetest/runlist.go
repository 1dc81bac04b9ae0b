package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// testRunPages: RunPage lists the runs newest first (ties by ID), the
// same order as ListRuns, a page at a time from a cursor, with the
// filters, and with the gates and pending approvals read from their
// rows; a run's list entry is its row without the document.
func testRunPages(t *testing.T, open Opener) {
	s := open(t)
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := start
	setClock(t, s, func() time.Time { return clock })
	mk := func(playbook string, doc []byte) string {
		var id string
		mustTx(t, s, func(tx store.Tx) error {
			r, err := tx.CreateRun(store.Run{PlaybookID: playbook, PlaybookVersion: "2.0.0", Document: doc, HarnessPath: "h.json"})
			if err != nil {
				return err
			}
			id = r.ID
			if _, err := tx.Append(audit.Record{Run: id, Kind: "run.started"}); err != nil {
				return err
			}
			_, err = tx.StartStep(id, "work")
			return err
		})
		return id
	}
	// Three runs created at the same instant (ordered by ID), then one a
	// second for the rest.
	var ids []string
	for i := range 9 {
		if i >= 3 {
			clock = clock.Add(time.Second)
		}
		pb := "alpha"
		if i%3 == 2 {
			pb = "beta"
		}
		doc := []byte(testDoc)
		if i == 4 {
			doc = []byte(`{"big":"` + strings.Repeat("x", 1<<20) + `"}`)
		}
		ids = append(ids, mk(pb, doc))
	}
	gated, approval, expired, done := ids[1], ids[4], ids[6], ids[7]
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.SetStepWaiting(gated, "work", 1); err != nil {
			return err
		}
		if _, err := tx.OpenGate(gated, "work", 1); err != nil {
			return err
		}
		if err := tx.SetRunStatus(gated, store.RunWaiting, "gate work"); err != nil {
			return err
		}
		for _, a := range []store.Approval{
			{Run: approval, Step: "work", Tool: "t.first", DefDigest: digest("d"), ArgsDigest: digest("{}"), Reason: "requiresApproval"},
			{Run: approval, Step: "work", Tool: "t.second", DefDigest: digest("d"), ArgsDigest: digest("[]"), Reason: "requiresApproval"},
			{Run: expired, Step: "work", Tool: "t", DefDigest: digest("d"), ArgsDigest: digest("{}"), Reason: "requiresApproval", Expires: clock.Add(time.Minute)},
		} {
			if _, err := tx.CreateApproval(a); err != nil {
				return err
			}
		}
		return tx.SetRunStatus(done, store.RunCompleted, "")
	})
	clock = clock.Add(time.Hour) // the approval of run expired is past its expiry, still pending

	all, err := s.ListRuns(bg)
	if err != nil || len(all) != len(ids) {
		t.Fatalf("ListRuns = %d runs, %v", len(all), err)
	}
	page, err := s.RunPage(bg, store.RunFilter{}, store.RunCursor{}, 100)
	if err != nil || len(page) != len(all) {
		t.Fatalf("RunPage = %d runs, %v; want %d", len(page), err, len(all))
	}
	for i, r := range page {
		want, err := s.GetRun(bg, all[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if r.ID != want.ID || r.PlaybookID != want.PlaybookID || r.PlaybookVersion != want.PlaybookVersion || r.Status != want.Status ||
			r.CurrentStep != want.CurrentStep || r.Reason != want.Reason || !r.Created.Equal(want.Created) || !r.Updated.Equal(want.Updated) {
			t.Errorf("RunPage[%d] = %+v, want the row %+v", i, r.Run, want)
		}
		if r.Document != nil || r.Input != nil {
			t.Errorf("RunPage[%d] has a document or input", i)
		}
		if i > 0 && (r.Created.After(page[i-1].Created) || r.Created.Equal(page[i-1].Created) && r.ID < page[i-1].ID) {
			t.Errorf("RunPage[%d] (%s %s) is out of order after %s %s", i, r.Created, r.ID, page[i-1].Created, page[i-1].ID)
		}
	}
	by := map[string]store.ListedRun{}
	for _, r := range page {
		by[r.ID] = r
	}
	if g := by[gated]; len(g.Gates) != 1 || g.Gates[0] != "work" || len(g.Approvals) != 0 || !g.Waits() {
		t.Errorf("the gated run lists gates %q, approvals %+v", g.Gates, g.Approvals)
	}
	if a := by[approval]; len(a.Gates) != 0 || len(a.Approvals) != 2 || a.Approvals[0].Kind != store.KindCall || a.Approvals[0].Step != "work" ||
		!strings.HasPrefix(a.Approvals[0].ID, "apr_") || a.Approvals[0].ID == a.Approvals[1].ID {
		t.Errorf("the run with approvals lists gates %q, approvals %+v", a.Gates, a.Approvals)
	}
	if e := by[expired]; e.Waits() {
		t.Errorf("the run whose approval expired lists gates %q, approvals %+v", e.Gates, e.Approvals)
	}

	// A page at a time, from each page's last run.
	for _, n := range []int{1, 2, 4} {
		var got []string
		var after store.RunCursor
		for pages := 0; ; pages++ {
			p, err := s.RunPage(bg, store.RunFilter{}, after, n)
			if err != nil || len(p) > n || pages > len(ids) {
				t.Fatalf("page %d of %d: %d runs, %v", pages, n, len(p), err)
			}
			for _, r := range p {
				got = append(got, r.ID)
			}
			if len(p) < n {
				break
			}
			last := p[len(p)-1]
			after = store.RunCursor{Created: last.Created, ID: last.ID}
		}
		if strings.Join(got, " ") != strings.Join(listedIDs(page), " ") {
			t.Errorf("pages of %d list %v, want %v", n, got, listedIDs(page))
		}
	}
	if p, err := s.RunPage(bg, store.RunFilter{}, store.RunCursor{}, 0); err != nil || len(p) != 1 || p[0].ID != page[0].ID {
		t.Errorf("limit 0 lists %d runs, %v; want the newest", len(p), err)
	}

	// Filters.
	for _, tc := range []struct {
		name string
		f    store.RunFilter
		keep func(store.ListedRun) bool
	}{
		{"waiting", store.RunFilter{Statuses: []store.RunStatus{store.RunWaiting}}, func(r store.ListedRun) bool { return r.Status == store.RunWaiting }},
		{"ended or waiting", store.RunFilter{Statuses: []store.RunStatus{store.RunCompleted, store.RunWaiting}},
			func(r store.ListedRun) bool { return r.Status == store.RunCompleted || r.Status == store.RunWaiting }},
		{"beta", store.RunFilter{Playbook: "beta"}, func(r store.ListedRun) bool { return r.PlaybookID == "beta" }},
		{"decide", store.RunFilter{Decide: true}, store.ListedRun.Waits},
		{"alpha, running, decide", store.RunFilter{Playbook: "alpha", Statuses: []store.RunStatus{store.RunRunning}, Decide: true},
			func(r store.ListedRun) bool {
				return r.PlaybookID == "alpha" && r.Status == store.RunRunning && r.Waits()
			}},
		{"no such playbook", store.RunFilter{Playbook: "alpha%"}, func(store.ListedRun) bool { return false }},
		{"created from", store.RunFilter{CreatedFrom: start.Add(2 * time.Second)}, func(r store.ListedRun) bool { return !r.Created.Before(start.Add(2 * time.Second)) }},
		{"created before", store.RunFilter{CreatedBefore: start.Add(2 * time.Second)}, func(r store.ListedRun) bool { return r.Created.Before(start.Add(2 * time.Second)) }},
		{"created in a second, beta", store.RunFilter{CreatedFrom: start.Add(time.Second), CreatedBefore: start.Add(6 * time.Second), Playbook: "beta"},
			func(r store.ListedRun) bool {
				return r.PlaybookID == "beta" && !r.Created.Before(start.Add(time.Second)) && r.Created.Before(start.Add(6*time.Second))
			}},
		{"created between the instants of two runs", store.RunFilter{CreatedFrom: start.Add(1500 * time.Millisecond), CreatedBefore: start.Add(1900 * time.Millisecond)},
			func(store.ListedRun) bool { return false }},
	} {
		var want []string
		for _, r := range page {
			if tc.keep(r) {
				want = append(want, r.ID)
			}
		}
		var got []string
		var after store.RunCursor
		for {
			p, err := s.RunPage(bg, tc.f, after, 2)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			got = append(got, listedIDs(p)...)
			if len(p) < 2 {
				break
			}
			after = store.RunCursor{Created: p[1].Created, ID: p[1].ID}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s lists %v, want %v", tc.name, got, want)
		}
	}
	if p, _ := s.RunPage(bg, store.RunFilter{Decide: true}, store.RunCursor{}, 10); len(p) != 2 {
		t.Errorf("decide lists %v, want the gated run and the run with approvals", listedIDs(p))
	}

	// A change shows on the next page read: the gate decided, the run
	// no longer waits.
	mustTx(t, s, func(tx store.Tx) error {
		_, err := tx.DecideGate(gated, "work", 1, true, "ok", "ana")
		return err
	})
	if p, _ := s.RunPage(bg, store.RunFilter{Decide: true}, store.RunCursor{}, 10); len(p) != 1 || p[0].ID != approval {
		t.Errorf("after the gate's decision, decide lists %v, want %s", listedIDs(p), approval)
	}
}

func listedIDs(rs []store.ListedRun) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}
