package serve_test

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// seedRuns writes n runs straight into the rig's store (none executes):
// run i is of playbook "pb-even" or "pb-odd", completed unless it is one
// of every seventh, which waits at a gate. It returns the IDs as the
// store lists them, newest first.
func seedRuns(t *testing.T, r *rig, n int) []string {
	t.Helper()
	for i := range n {
		err := r.st.Tx(context.Background(), func(tx store.Tx) error {
			pb := "pb-even"
			if i%2 == 1 {
				pb = "pb-odd"
			}
			run, err := tx.CreateRun(store.Run{PlaybookID: pb, PlaybookVersion: "1.0.0", Document: []byte(`{}`), HarnessPath: "h.yaml"})
			if err != nil {
				return err
			}
			if _, err := tx.Append(audit.Record{Run: run.ID, Kind: "run.created"}); err != nil {
				return err
			}
			attempt, err := tx.StartStep(run.ID, "review")
			if err != nil {
				return err
			}
			if i%7 == 0 {
				if err := tx.SetStepWaiting(run.ID, "review", attempt); err != nil {
					return err
				}
				if _, err := tx.OpenGate(run.ID, "review", attempt); err != nil {
					return err
				}
				return tx.SetRunStatus(run.ID, store.RunWaiting, "gate review waits for a person's decision")
			}
			return tx.SetRunStatus(run.ID, store.RunCompleted, "")
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // distinct created times, mostly; ties are ordered by ID
	}
	runs, err := r.st.ListRuns(context.Background())
	if err != nil || len(runs) != n {
		t.Fatalf("ListRuns: %d runs, %v", len(runs), err)
	}
	ids := make([]string, len(runs))
	for i, run := range runs {
		ids[i] = run.ID
	}
	return ids
}

type runList struct {
	Runs []struct {
		Run, Status, Playbook string
		Waiting               []struct{ Kind, ID, Step, Tool string }
	}
	Next string
}

// listAll walks GET /api/v1/runs?query from the first page through each
// next cursor and returns the runs' IDs and how many pages it took.
func listAll(t *testing.T, c *apiClient, query string) (ids []string, pages int) {
	t.Helper()
	cursor := ""
	for {
		path := "/api/v1/runs?" + query
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		res := c.do("GET", path, nil)
		want(t, "GET "+path, res, 200)
		page := decode[runList](t, res)
		pages++
		for _, r := range page.Runs {
			ids = append(ids, r.Run)
		}
		if page.Next == "" {
			return ids, pages
		}
		if pages > 100 {
			t.Fatalf("GET /api/v1/runs?%s: more than 100 pages", query)
		}
		cursor = page.Next
	}
}

// TestAPIRunsPages: GET /api/v1/runs lists the runs a page at a time,
// newest first, in the store's order, with the filters, and refuses a
// bad limit, status or cursor.
func TestAPIRunsPages(t *testing.T) {
	r := newRig(t, "")
	c := r.api(operatorToken)
	ids := seedRuns(t, r, 23)

	first := decode[runList](t, c.do("GET", "/api/v1/runs", nil))
	if len(first.Runs) != 23 || first.Next != "" {
		t.Fatalf("the default page lists %d runs, next %q; want all 23 and no next", len(first.Runs), first.Next)
	}
	got, pages := listAll(t, c, "limit=5")
	if strings.Join(got, " ") != strings.Join(ids, " ") || pages != 5 {
		t.Errorf("pages of 5 list (in %d pages) %v, want %v", pages, got, ids)
	}
	for _, rs := range first.Runs {
		if rs.Status == "waiting" && (len(rs.Waiting) != 1 || rs.Waiting[0].Kind != "gate" || rs.Waiting[0].ID != "review") {
			t.Errorf("run %s waits for %+v, want the gate review", rs.Run, rs.Waiting)
		}
	}

	// Filters: what the store's own list keeps, in its order.
	keep := func(f func(i int, run store.Run) bool) []string {
		runs, _ := r.st.ListRuns(context.Background())
		var out []string
		for i, run := range runs {
			if f(i, run) {
				out = append(out, run.ID)
			}
		}
		return out
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"status=waiting&limit=2", keep(func(_ int, run store.Run) bool { return run.Status == store.RunWaiting })},
		{"status=completed,waiting&limit=7", ids},
		{"status=failed", nil},
		{"playbook=pb-odd&limit=3", keep(func(_ int, run store.Run) bool { return run.PlaybookID == "pb-odd" })},
		{"decide=true&limit=1", keep(func(_ int, run store.Run) bool { return run.Status == store.RunWaiting })},
		{"decide=true&playbook=pb-even", keep(func(_ int, run store.Run) bool { return run.Status == store.RunWaiting && run.PlaybookID == "pb-even" })},
	} {
		if got, _ := listAll(t, c, tc.query); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s lists %v, want %v", tc.query, got, tc.want)
		}
	}
	// Time filters, at the created time of the store's 6th and 16th
	// newest runs: since keeps the bound, until leaves it out.
	all, _ := r.st.ListRuns(context.Background())
	hi, lo := all[5].Created, all[15].Created
	stamp := func(t time.Time) string { return url.QueryEscape(t.UTC().Format(time.RFC3339Nano)) }
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"since=" + stamp(lo) + "&limit=4", keep(func(_ int, run store.Run) bool { return !run.Created.Before(lo) })},
		{"until=" + stamp(hi) + "&limit=4", keep(func(_ int, run store.Run) bool { return run.Created.Before(hi) })},
		{"since=" + stamp(lo) + "&until=" + stamp(hi) + "&playbook=pb-odd",
			keep(func(_ int, run store.Run) bool {
				return !run.Created.Before(lo) && run.Created.Before(hi) && run.PlaybookID == "pb-odd"
			})},
	} {
		got, _ := listAll(t, c, tc.query)
		if strings.Join(got, " ") != strings.Join(tc.want, " ") || len(tc.want) == 0 || len(tc.want) == len(ids) {
			t.Errorf("%s lists %v, want %v (a part of the runs)", tc.query, got, tc.want)
		}
	}
	want(t, "since not a time", c.do("GET", "/api/v1/runs?since=yesterday", nil), 400, "RFC 3339")
	want(t, "until without a zone", c.do("GET", "/api/v1/runs?until=2026-12-01T00:00:00", nil), 400, "until")
	want(t, "until past the year 9999 in UTC", c.do("GET", "/api/v1/runs?until="+url.QueryEscape("9999-12-31T23:00:00-05:00"), nil), 400, "year 10000")
	want(t, "until at the zero time", c.do("GET", "/api/v1/runs?until=0001-01-01T00:00:00Z", nil), 400, "after 0001-01-01")
	want(t, "since after until", c.do("GET", "/api/v1/runs?since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z", nil), 400, "before until")

	// Refusals.
	want(t, "limit 0", c.do("GET", "/api/v1/runs?limit=0", nil), 400, "from 1 to 500")
	want(t, "limit 501", c.do("GET", "/api/v1/runs?limit=501", nil), 400, "from 1 to 500")
	want(t, "limit text", c.do("GET", "/api/v1/runs?limit=ten", nil), 400, "limit")
	want(t, "unknown status", c.do("GET", "/api/v1/runs?status=done", nil), 400, `\"done\"`)
	want(t, "decide not a boolean", c.do("GET", "/api/v1/runs?decide=maybe", nil), 400, "decide")
	for _, bad := range []string{"nope", "r1.", "r1.!!!", "r1." + "MjAyNi0xMi0wMlQwMDowMDowMFogcnVuX3g", fmt.Sprintf("r1.%s", strings.Repeat("A", 300))} {
		want(t, "cursor "+bad, c.do("GET", "/api/v1/runs?cursor="+url.QueryEscape(bad), nil), 400, "cursor")
	}
	want(t, "status twice", c.do("GET", "/api/v1/runs?status=waiting&status=completed", nil), 400, "2 times")
}

// TestConsoleRunsPages: the console's runs page shows 50 runs at a time,
// newest first, with a link to the older ones, and filters by status,
// playbook and decision.
func TestConsoleRunsPages(t *testing.T) {
	r := newRig(t, "")
	ids := seedRuns(t, r, 57)
	b := r.browser()
	b.login()
	rows := func(p page) []string {
		var out []string
		for _, id := range ids {
			if strings.Contains(p.body, `href="/runs/`+id+`"`) {
				out = append(out, id)
			}
		}
		return out
	}
	p := b.get("/")
	if p.status != 200 || strings.Join(rows(p), " ") != strings.Join(ids[:50], " ") || !strings.Contains(p.body, "Runs 1–50, newest first") {
		t.Fatalf("the first page (%d) shows %d runs: %s", p.status, len(rows(p)), p.body)
	}
	older := regexpFind(t, p.body, `<a href="/(\?[^"]+)" rel="next">Older</a>`)
	p = b.get("/" + strings.ReplaceAll(older, "&amp;", "&"))
	if strings.Join(rows(p), " ") != strings.Join(ids[50:], " ") || !strings.Contains(p.body, "Runs 51–57 of 57.") || strings.Contains(p.body, `rel="next"`) {
		t.Errorf("the second page shows %v: %s", rows(p), p.body)
	}
	var waiting []string
	for i := len(ids) - 1; i >= 0; i -= 7 { // seedRuns gated every seventh run from the oldest
		waiting = append([]string{ids[i]}, waiting...)
	}
	for _, q := range []string{"?status=waiting", "?decide=1"} {
		if p := b.get("/" + q); strings.Join(rows(p), " ") != strings.Join(waiting, " ") {
			t.Errorf("%s shows %v, want %v", q, rows(p), waiting)
		}
	}
	if p := b.get("/?playbook=no-such"); len(rows(p)) != 0 || !strings.Contains(p.body, "No run matches.") {
		t.Errorf("an unknown playbook shows %v", rows(p))
	}
	if p := b.get("/?status=done"); p.status != 400 {
		t.Errorf("an unknown status: %d", p.status)
	}
}

// regexpFind returns the first submatch of pattern in s.
func regexpFind(t *testing.T, s, pattern string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no %s in %s", pattern, s)
	}
	return m[1]
}
