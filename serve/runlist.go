package serve

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// DefaultRunsLimit is how many runs GET /api/v1/runs lists without a
// limit; [store.MaxRunPage] is the most it lists.
const DefaultRunsLimit = 50

// RunsPage lists at most limit runs that f keeps, after cursor (""
// for the newest), newest first, as a list shows them
// ([runtime.ListedStatus]: one read of the store, no document read).
// next is the cursor of the following page, "" when this one is the
// last. A cursor that is not one RunsPage returned is an error wrapping
// [ErrCursor].
func (s *Server) RunsPage(ctx context.Context, f store.RunFilter, cursor string, limit int) (runs []runtime.RunStatus, next string, err error) {
	after, err := decodeRunCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	limit = store.ClampRunPage(limit)
	// One more than asked: whether a next page exists is known without a
	// second read.
	page, err := s.st.RunPage(ctx, f, after, limit+1)
	if err != nil {
		return nil, "", err
	}
	if len(page) > limit {
		page = page[:limit]
		last := page[limit-1]
		next = encodeRunCursor(store.RunCursor{Created: last.Created, ID: last.ID})
	}
	runs = make([]runtime.RunStatus, 0, len(page))
	for _, r := range page {
		runs = append(runs, s.live(runtime.ListedStatus(r)))
	}
	return runs, next, nil
}

// ErrCursor is a page cursor this server did not issue.
var ErrCursor = errors.New("the cursor is not one this server issued (pass the \"next\" of the previous page, or none for the first page)")

// A run cursor is "r1." then the base64url (unpadded) of the last listed
// run's created time (RFC 3339, nanoseconds, UTC), a space and its ID.
// Clients treat it as opaque.
const runCursorPrefix = "r1."

func encodeRunCursor(c store.RunCursor) string {
	return runCursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(c.Created.UTC().Format(time.RFC3339Nano)+" "+c.ID))
}

func decodeRunCursor(s string) (store.RunCursor, error) {
	if s == "" {
		return store.RunCursor{}, nil
	}
	rest, ok := strings.CutPrefix(s, runCursorPrefix)
	if !ok || len(rest) > 200 {
		return store.RunCursor{}, ErrCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return store.RunCursor{}, ErrCursor
	}
	ts, id, ok := strings.Cut(string(b), " ")
	t, err := time.Parse(time.RFC3339Nano, ts)
	if !ok || err != nil || !validRunID(id) {
		return store.RunCursor{}, ErrCursor
	}
	return store.RunCursor{Created: t.UTC(), ID: id}, nil
}

// validRunID reports whether id has the shape of a run ID: "run_" and 16
// lowercase hex digits.
func validRunID(id string) bool {
	hex, ok := strings.CutPrefix(id, "run_")
	if !ok || len(hex) != 16 {
		return false
	}
	for _, c := range hex {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// runFilterOf reads the list filters of a request: status (one of the
// five statuses, or several comma-separated), playbook (a manifest.id),
// decide (a boolean), since and until (RFC 3339 times: runs created at
// or after since, and before until) and limit (1 to [store.MaxRunPage]).
func runFilterOf(r *http.Request) (f store.RunFilter, limit int, err error) {
	q := r.URL.Query()
	for _, v := range q["status"] {
		for _, st := range strings.Split(v, ",") {
			if !store.RunStatus(st).Valid() {
				return f, 0, apiErrorf(http.StatusBadRequest, "query parameter status is %q; each status must be running, waiting, completed, rejected or failed", st)
			}
			f.Statuses = append(f.Statuses, store.RunStatus(st))
		}
	}
	f.Playbook = q.Get("playbook")
	if q.Has("decide") {
		if f.Decide, err = strconv.ParseBool(q.Get("decide")); err != nil {
			return f, 0, apiErrorf(http.StatusBadRequest, "query parameter decide is %q; it must be true or false", q.Get("decide"))
		}
	}
	for _, b := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.CreatedFrom}, {"until", &f.CreatedBefore}} {
		if !q.Has(b.name) {
			continue
		}
		t, perr := time.Parse(time.RFC3339Nano, q.Get(b.name))
		if perr != nil {
			return f, 0, apiErrorf(http.StatusBadRequest, "query parameter %s is %q; it must be an RFC 3339 time, such as 2026-12-01T00:00:00Z", b.name, q.Get(b.name))
		}
		// The store compares times as text of four-digit years; the
		// zero time means no bound.
		if t = t.UTC(); t.Year() > 9999 || !t.After(time.Time{}) {
			return f, 0, apiErrorf(http.StatusBadRequest, "query parameter %s is %q; it must be after 0001-01-01T00:00:00Z and before the year 10000 (UTC)", b.name, q.Get(b.name))
		}
		*b.dst = t
	}
	if !f.CreatedFrom.IsZero() && !f.CreatedBefore.IsZero() && !f.CreatedFrom.Before(f.CreatedBefore) {
		return f, 0, apiErrorf(http.StatusBadRequest, "query parameter since (%s) must be before until (%s)", q.Get("since"), q.Get("until"))
	}
	limit = DefaultRunsLimit
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > store.MaxRunPage {
			return f, 0, apiErrorf(http.StatusBadRequest, "query parameter limit is %q; it must be a whole number from 1 to %d", q.Get("limit"), store.MaxRunPage)
		}
		limit = n
	}
	return f, limit, nil
}

func (s *Server) apiListRuns(w http.ResponseWriter, r *http.Request) error {
	f, limit, err := runFilterOf(r)
	if err != nil {
		return err
	}
	runs, next, err := s.RunsPage(r.Context(), f, r.URL.Query().Get("cursor"), limit)
	if errors.Is(err, ErrCursor) {
		return apiErrorf(http.StatusBadRequest, "query parameter cursor: %s", err)
	}
	if err != nil {
		return err
	}
	body := map[string]any{"runs": runs}
	if next != "" {
		body["next"] = next
	}
	s.reply(w, http.StatusOK, body)
	return nil
}
