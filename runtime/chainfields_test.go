package runtime_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/internal/teststore"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// chainedRun is a waiting run with a row of each kind the chain covers:
// a gate approved by a person (its step done with the decision as
// output), an agent step waiting with a read that succeeded, a refused
// call, a read whose result did not match its outputSchema (failed, with
// an error), a side-effecting call approved and run (its approval used),
// and one waiting for an approval (pending).
type chainedRun struct {
	r   *rig
	ctr *ctrServer
	tr  map[string]string
	run string
}

func newChainedRun(t *testing.T) *chainedRun {
	t.Helper()
	ctr := startCtr(t, true)
	doc := buildDoc(t, "chained", gateStep("hold", "act", ""),
		agentStep("act", "ops", []string{"mcp.ctr.lookup", "mcp.ctr.badout", "mcp.ctr.launch"}, ""))
	r := newRig(t, rigConfig{http: map[string]string{"ctr": ctr.URL}}, doc)
	ctx := context.Background()
	tr := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {
		{"mcp.ctr.lookup", map[string]any{"id": "w1"}},
		{"mcp.ctr.nope", map[string]any{"x": 1}},
		{"mcp.ctr.badout", map[string]any{}},
		{"mcp.ctr.launch", map[string]any{"target": "alpha"}},
		{"mcp.ctr.launch", map[string]any{"target": "beta"}},
	}})}
	out, err := r.engine(0, tr, nil, nil).Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)
	run := out.Run
	if _, err := runtime.Decide(ctx, r.st, run, "hold", runtime.Verdict{Approve: true, By: "alice", Reason: "looks right"}); err != nil {
		t.Fatal(err)
	}
	out, err = r.engine(0, tr, nil, nil).Resume(ctx, run)
	wantOutcome(t, "resume 1", out, err, runtime.Waiting)
	r.mustDecide(run, r.onlyApproval(run).ID, true)
	out, err = r.engine(0, tr, nil, nil).Resume(ctx, run)
	wantOutcome(t, "resume 2", out, err, runtime.Waiting)
	if ctr.runs("launch") != 1 || ctr.runs("lookup") != 1 || ctr.runs("badout") != 1 {
		t.Fatalf("setup: the server ran %s", ctr)
	}
	var states []string
	for _, c := range r.calls(run) {
		states = append(states, string(c.State))
	}
	if want := []string{"succeeded", "refused", "failed", "succeeded", "waiting"}; !slices.Equal(states, want) {
		t.Fatalf("setup: call states %v, want %v", states, want)
	}
	if ds, err := runtime.Disagreements(ctx, r.st, run); err != nil || len(ds) != 0 {
		t.Fatalf("setup: an untouched run disagrees with its chain: %v %v", ds, err)
	}
	return &chainedRun{r: r, ctr: ctr, tr: tr, run: run}
}

// newDeniedRun is a completed run whose one call a person denied: the
// call refused with code denied, the approval denied (with who and why),
// the step done with its output, the run completed. Resuming it does
// nothing, unless its rows disagree with its chain.
func newDeniedRun(t *testing.T) *chainedRun {
	t.Helper()
	ctr := startCtr(t, true)
	r := newRig(t, rigConfig{http: map[string]string{"ctr": ctr.URL}}, buildDoc(t, "denied", agentStep("act", "ops", []string{"mcp.ctr.launch"}, "")))
	ctx := context.Background()
	tr := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {{"mcp.ctr.launch", map[string]any{"target": "alpha"}}}})}
	out, err := r.engine(0, tr, nil, nil).Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)
	if err := r.decide(out.Run, r.onlyApproval(out.Run).ID, false, "not today"); err != nil {
		t.Fatal(err)
	}
	out2, err := r.engine(0, tr, nil, nil).Resume(ctx, out.Run)
	wantOutcome(t, "resume", out2, err, runtime.Completed)
	if cs := r.calls(out.Run); len(cs) != 1 || cs[0].State != store.CallRefused || cs[0].Code != "denied" || ctr.calls() != 0 {
		t.Fatalf("setup: calls %+v, server %s", cs, ctr)
	}
	if ds, err := runtime.Disagreements(ctx, r.st, out.Run); err != nil || len(ds) != 0 {
		t.Fatalf("setup: an untouched run disagrees with its chain: %v %v", ds, err)
	}
	return &chainedRun{r: r, ctr: ctr, tr: tr, run: out.Run}
}

// c names a column "table.column".
func c(name string) store.Column {
	t, col, _ := strings.Cut(name, ".")
	return store.Column{Table: t, Name: col}
}

// keyColumns are the columns that name a row: a changed one makes the
// row another (one the chain has no record of) and the chain's row
// missing.
var keyColumns = map[store.Column]bool{
	c("steps.run"): true, c("steps.step"): true, c("steps.attempt"): true,
	c("calls.run"): true, c("calls.step"): true, c("calls.attempt"): true, c("calls.idx"): true,
	c("approvals.id"): true, c("approvals.run"): true,
	c("gates.run"): true, c("gates.step"): true, c("gates.attempt"): true,
}

// headColumns are checked by the chain's own verification (the log must
// end at the head), not row by row.
var headColumns = map[store.Column]bool{c("runs.audit_last_seq"): true, c("runs.audit_last_hash"): true}

// enumValues are the values a CHECK constraint allows, for a column a
// flipped byte cannot change (the database refuses it).
var enumValues = map[store.Column][]any{
	c("runs.status"):          {"running", "waiting", "completed", "rejected", "failed"},
	c("steps.status"):         {"running", "done", "failed", "waiting"},
	c("calls.decision"):       {"allowed", "refused", "waiting"},
	c("calls.state"):          {"started", "succeeded", "failed", "outcome_unknown", "refused", "waiting"},
	c("calls.side_effecting"): {int64(0), int64(1)},
	c("approvals.kind"):       {"call", "outcome_unknown"},
	c("approvals.status"):     {"pending", "approved", "denied", "expired", "used"},
	c("gates.status"):         {"waiting", "approved", "rejected"},
}

// TestChainedColumnsFlipped: a random change (a flipped bit of one byte,
// a byte where the cell was empty, another allowed value where the
// schema allows only some) of every column store.ChainedColumns lists,
// in every row of it, of a waiting run (newChainedRun) and of a completed
// one (newDeniedRun), is a tamper verdict: Disagreements names the
// table, the column and the audit record that says otherwise (the audit
// head's columns fail the chain's own verification instead), and resume
// refuses with ErrStoreAltered without a call reaching the server. The
// columns come from the schema's list, so a column added to it later is
// flipped too. The seed is fixed; each change is undone before the next.
func TestChainedColumnsFlipped(t *testing.T) {
	t.Parallel()
	teststore.SQLiteOnly(t, "it edits the SQLite file's rows by rowid")
	flipped := map[store.Column]int{}
	t.Run("waiting", func(t *testing.T) { flipAll(t, newChainedRun(t), 18, flipped) })
	t.Run("completed", func(t *testing.T) { flipAll(t, newDeniedRun(t), 19, flipped) })
	for _, col := range store.ChainedColumns {
		if flipped[col] == 0 {
			t.Errorf("%s: neither run has a row to change; give one such a row", col)
		}
	}
}

// flipAll changes every chained column of every row of cr's run, one at
// a time, a few times each, checking each change is detected.
func flipAll(t *testing.T, cr *chainedRun, seed uint64, flipped map[store.Column]int) {
	r, ctx := cr.r, context.Background()
	db, err := sql.Open("sqlite", "file:"+r.sqlite().Path()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewPCG(seed, 3))
	before := cr.ctr.calls()
	for _, col := range store.ChainedColumns {
		where := "run = ?"
		if col.Table == "runs" {
			where = "id = ?"
		}
		rowids := queryRowids(t, db, col.Table, where, cr.run)
		if len(rowids) == 0 {
			continue // the caller checks another run has one
		}
		flips := max(3, len(rowids))
		for i := 0; i < flips; i++ {
			rowid := rowids[i%len(rowids)]
			orig := cell(t, db, col, rowid)
			changed, ok := flipCell(db, col, rowid, orig, rng)
			if !ok {
				t.Errorf("%s: no change of %v is accepted by the database", col, orig)
				continue
			}
			flipped[col]++
			what := fmt.Sprintf("%s of row %d changed from %s to %s", col, rowid, show(orig), show(changed))
			checkDetected(t, cr, col, what)
			undo(t, db, col, rowid, orig, what)
			if ds, err := runtime.Disagreements(ctx, r.st, cr.run); err != nil || len(ds) != 0 {
				t.Fatalf("after undoing %s: %v %v", what, ds, err)
			}
		}
	}
	if n := cr.ctr.calls() - before; n != 0 {
		t.Errorf("the server received %d calls while the store was altered: %s", n, cr.ctr)
	}
}

// checkDetected asserts that verification and resume both refuse the
// run as altered.
func checkDetected(t *testing.T, cr *chainedRun, col store.Column, what string) {
	t.Helper()
	ctx := context.Background()
	probs, err := cr.r.st.VerifyAudit(ctx, cr.run)
	if err != nil {
		t.Fatalf("%s: VerifyAudit: %v", what, err)
	}
	if headColumns[col] {
		if len(probs) == 0 {
			t.Errorf("%s: the chain still verifies", what)
		}
	} else {
		ds, err := runtime.Disagreements(ctx, cr.r.st, cr.run)
		if err != nil {
			t.Fatalf("%s: Disagreements: %v", what, err)
		}
		if !namesColumn(ds, col) {
			t.Errorf("%s: not named with its audit record: %v", what, ds)
		}
	}
	_, err = cr.r.engine(0, cr.tr, nil, nil).Resume(ctx, cr.run)
	if !errors.Is(err, runtime.ErrStoreAltered) {
		t.Errorf("%s: resume: %v, want ErrStoreAltered", what, err)
	}
}

// namesColumn: a disagreement names the column (or, for a key column,
// the row the chain has that the store no longer has) and the audit
// record that says otherwise.
func namesColumn(ds []runtime.Disagreement, col store.Column) bool {
	for _, d := range ds {
		if d.Table != col.Table || d.Seq <= 0 || !strings.Contains(d.Message, fmt.Sprintf("audit record %d ", d.Seq)) {
			continue
		}
		if d.Column == col.Name || keyColumns[col] && d.Column == "" {
			return true
		}
	}
	return false
}

// undo writes the cell's value back, past the table's triggers when
// they refuse it (the audit head only moves forward): they are dropped
// and made again around the write.
func undo(t *testing.T, db *sql.DB, col store.Column, rowid int64, orig any, what string) {
	t.Helper()
	set := fmt.Sprintf(`UPDATE %s SET %s = ? WHERE rowid = ?`, col.Table, col.Name)
	if _, err := db.Exec(set, orig, rowid); err == nil {
		return
	}
	rows, err := db.Query(`SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = ?`, col.Table)
	if err != nil {
		t.Fatal(err)
	}
	var names, defs []string
	for rows.Next() {
		var n, d string
		if err := rows.Scan(&n, &d); err != nil {
			t.Fatal(err)
		}
		names, defs = append(names, n), append(defs, d)
	}
	rows.Close()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, n := range names {
		if _, err := tx.Exec(`DROP TRIGGER ` + n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Exec(set, orig, rowid); err != nil {
		t.Fatalf("undoing %s: %v", what, err)
	}
	for _, d := range defs {
		if _, err := tx.Exec(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func queryRowids(t *testing.T, db *sql.DB, table, where, run string) []int64 {
	t.Helper()
	rows, err := db.Query(fmt.Sprintf(`SELECT rowid FROM %s WHERE %s ORDER BY rowid`, table, where), run)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

func cell(t *testing.T, db *sql.DB, col store.Column, rowid int64) any {
	t.Helper()
	var v any
	if err := db.QueryRow(fmt.Sprintf(`SELECT %s FROM %s WHERE rowid = ?`, col.Name, col.Table), rowid).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// flipCell writes a changed value into the cell and returns it: a bit of
// a random byte flipped (text, blob), a random bit flipped or a small
// step (integer), a random byte (empty text), a random JSON string
// (NULL); then, when the database refuses every such change (a CHECK,
// UNIQUE or trigger), another allowed value.
func flipCell(db *sql.DB, col store.Column, rowid int64, orig any, rng *rand.Rand) (any, bool) {
	var cands []any
	for range 6 {
		switch v := orig.(type) {
		case string:
			cands = append(cands, string(flipBytes([]byte(v), rng)))
		case []byte:
			cands = append(cands, flipBytes(v, rng))
		case int64:
			cands = append(cands, v^(1<<rng.IntN(4)), v+1+rng.Int64N(8))
		case nil:
			cands = append(cands, fmt.Sprintf(`"%c"`, 'a'+rune(rng.IntN(26))))
		}
	}
	alts := slices.Clone(enumValues[col])
	rng.Shuffle(len(alts), func(i, j int) { alts[i], alts[j] = alts[j], alts[i] })
	cands = append(cands, alts...)
	for _, c := range cands {
		if fmt.Sprint(c) == fmt.Sprint(orig) {
			continue
		}
		if _, err := db.Exec(fmt.Sprintf(`UPDATE %s SET %s = ? WHERE rowid = ?`, col.Table, col.Name), c, rowid); err == nil {
			return c, true
		}
	}
	return nil, false
}

func flipBytes(b []byte, rng *rand.Rand) []byte {
	out := slices.Clone(b)
	if len(out) == 0 {
		return []byte{byte(0x21 + rng.IntN(0x5e))}
	}
	i := rng.IntN(len(out))
	out[i] ^= 1 << rng.IntN(8)
	return out
}

func show(v any) string {
	s := fmt.Sprintf("%q", fmt.Sprint(v))
	if b, ok := v.([]byte); ok {
		s = fmt.Sprintf("%q", b)
	}
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return s
}

// TestApproveAlteredRowRefused: what a person is shown of a pending
// approval, and approves by, is checked against the chain. With the
// waiting call's arguments (or its tool, or the approval's digests)
// edited in SQLite, Pendings withholds the tool and the arguments and
// says the store was altered, Decide refuses to approve (nothing is
// recorded, the approval stays pending), and no call reaches the server;
// denying it is still possible.
func TestApproveAlteredRowRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, query string
		tool        []byte // the first argument, when set (a blob on both engines)
	}{
		{"edited arguments", `UPDATE calls SET args = '{"target":"harmless"}' WHERE run = ? AND state = 'waiting'`, nil},
		{"edited arguments and their digest", `UPDATE calls SET args = '{"target":"harmless"}', args_digest = '` + strings.Repeat("a", 64) + `' WHERE run = ? AND state = 'waiting'`, nil},
		{"edited tool", `UPDATE calls SET tool = ? WHERE run = ? AND state = 'waiting'`, []byte("mcp.ctr.lookup")},
		{"edited approval tool", `UPDATE approvals SET tool = ? WHERE run = ? AND status = 'pending'`, []byte("mcp.ctr.lookup")},
		{"edited approval arguments digest", `UPDATE approvals SET args_digest = '` + strings.Repeat("b", 64) + `' WHERE run = ? AND status = 'pending'`, nil},
		{"edited approval bind", `UPDATE approvals SET def_digest = '` + strings.Repeat("c", 64) + `' WHERE run = ? AND status = 'pending'`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cr := newChainedRun(t)
			r, ctx := cr.r, context.Background()
			apr := r.onlyApproval(cr.run)
			if !strings.Contains(string(apr.Arguments), "beta") || apr.Altered != "" {
				t.Fatalf("setup: pending %+v", apr)
			}
			if tc.tool != nil {
				r.hostileWrite(tc.query, tc.tool, cr.run)
			} else {
				r.hostileWrite(tc.query, cr.run)
			}
			ps, err := runtime.Pendings(ctx, r.st, cr.run)
			if err != nil {
				t.Fatal(err)
			}
			var p *runtime.Pending
			for i := range ps {
				if ps[i].ID == apr.ID {
					p = &ps[i]
				}
			}
			if p == nil || p.Altered == "" || p.Arguments != nil || p.Tool != "" || !strings.Contains(p.Summary, "the store was altered") {
				t.Errorf("Pendings shows %+v; want the approval marked altered, without tool or arguments", p)
			}
			seqBefore, _, _ := r.st.AuditHead(ctx, cr.run)
			_, err = runtime.Decide(ctx, r.st, cr.run, apr.ID, runtime.Verdict{Approve: true, By: "bob"})
			if !errors.Is(err, runtime.ErrStoreAltered) {
				t.Errorf("approve: %v, want ErrStoreAltered", err)
			}
			a, err := r.st.GetApproval(ctx, apr.ID)
			if err != nil || a.Status != store.ApprovalPending {
				t.Errorf("after the refused approve the approval is %+v %v, want pending", a, err)
			}
			if seqAfter, _, _ := r.st.AuditHead(ctx, cr.run); seqAfter != seqBefore {
				t.Errorf("the refused approve appended %d records", seqAfter-seqBefore)
			}
			if _, err := cr.r.engine(0, cr.tr, nil, nil).Resume(ctx, cr.run); !errors.Is(err, runtime.ErrStoreAltered) {
				t.Errorf("resume: %v, want ErrStoreAltered", err)
			}
			if n := cr.ctr.runs("launch"); n != 1 {
				t.Errorf("launch ran %d times, want 1 (before the edit)", n)
			}
			if _, err := runtime.Decide(ctx, r.st, cr.run, apr.ID, runtime.Verdict{Approve: false, By: "bob"}); err != nil {
				t.Errorf("deny: %v", err)
			}
		})
	}
}

// TestToolNameByteResumesNothing: the case. One byte of the tool
// name of a call that succeeded (a read, and a side-effecting call) is
// changed in SQLite; on resume the agent's call would match no recorded
// call and run again (the read) or ask a person again (the write).
// Resume refuses instead, naming the column and the record, and no call
// reaches the server.
func TestToolNameByteResumesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, tool, where string }{
		{"read", "mcp.ctr.lookuP", `state = 'succeeded' AND side_effecting = 0`},
		{"side-effecting", "mcp.ctr.launcH", `state = 'succeeded' AND side_effecting = 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cr := newChainedRun(t)
			ctx := context.Background()
			before := cr.ctr.calls()
			hostileWrite(t, cr.r.sqlite().Path(), `UPDATE calls SET tool = CAST(? AS BLOB) WHERE run = ? AND `+tc.where, tc.tool, cr.run)
			_, err := cr.r.engine(0, cr.tr, nil, nil).Resume(ctx, cr.run)
			if !errors.Is(err, runtime.ErrStoreAltered) || !strings.Contains(err.Error(), fmt.Sprintf(`column tool is %q in the store, but audit record`, tc.tool)) {
				t.Errorf("resume: %v, want ErrStoreAltered naming the tool column", err)
			}
			if n := cr.ctr.calls() - before; n != 0 {
				t.Errorf("resume sent %d calls to the server: %s", n, cr.ctr)
			}
		})
	}
}
