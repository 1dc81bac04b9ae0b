package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/sqlite"
)

// One tool call, recorded with its audit records: the call's start and
// outcome and both records are committed in one transaction, so after a
// crash either all four changes are there or none is. (A side-effecting
// call would commit its start first, run, then commit its outcome: a crash
// in between leaves a started call that resume marks outcome_unknown.)
func Example() {
	dir, err := os.MkdirTemp("", "store-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(filepath.Join(dir, "openplaybook.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()

	var run store.Run
	var attempt int
	err = s.Tx(ctx, func(tx store.Tx) error {
		if run, err = tx.CreateRun(store.Run{PlaybookID: "support-triage", PlaybookVersion: "1.0.0",
			Document: []byte(`{"openplaybook":"1.6"}`), Input: jsontext.Value(`{}`)}); err != nil {
			return err
		}
		if attempt, err = tx.StartStep(run.ID, "triage"); err != nil {
			return err
		}
		_, err = tx.Append(audit.Record{Run: run.ID, Kind: "step.started", Step: "triage"})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	args := jsontext.Value(`{"customerId":"cus_1"}`)
	err = s.Tx(ctx, func(tx store.Tx) error {
		c, err := tx.StartCall(store.Call{CallKey: store.CallKey{Run: run.ID, Step: "triage", Attempt: attempt},
			Tool: "customer.get", Args: args, ArgsDigest: "…", Decision: store.DecisionAllowed})
		if err != nil {
			return err
		}
		if _, err := tx.Append(audit.Record{Run: run.ID, Kind: "call.allowed", Step: "triage", Tool: c.Tool}); err != nil {
			return err
		}
		if err := tx.FinishCall(c.CallKey, store.CallSucceeded, jsontext.Value(`{"customer":{"id":"cus_1"}}`), ""); err != nil {
			return err
		}
		_, err = tx.Append(audit.Record{Run: run.ID, Kind: "call.succeeded", Step: "triage", Tool: c.Tool})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	recs, _ := s.Audit(ctx, run.ID)
	for _, r := range recs {
		fmt.Println(strings.TrimSpace(fmt.Sprint(r.Seq, " ", r.Kind, " ", r.Tool)))
	}
	probs, _ := s.VerifyAudit(ctx, run.ID)
	fmt.Println("problems:", len(probs))
	// Output:
	// 1 step.started
	// 2 call.allowed customer.get
	// 3 call.succeeded customer.get
	// problems: 0
}
