package runtime

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/store"
)

// maxDriftMessageBytes bounds the message of one recorded [DriftWarning].
const maxDriftMessageBytes = 2 << 10

// driftWarnings picks, from what SessionOptions.Check found, the
// warning-level drift findings (rules "drift-"), as a [RunDrift] records
// them.
func driftWarnings(doc *playbook.Document, ds []diag.Diagnostic) []DriftWarning {
	var out []DriftWarning
	for _, d := range ds {
		if d.Severity != diag.Warning || !strings.HasPrefix(d.Rule, "drift-") {
			continue
		}
		out = append(out, DriftWarning{Tool: toolAt(doc, d.Pointer), Rule: d.Rule, Pointer: d.Pointer, Message: clipText(d.Message, maxDriftMessageBytes)})
	}
	return out
}

// toolAt is the name of the embedded tool a pointer /tools/N/... is in,
// or "".
func toolAt(doc *playbook.Document, ptr string) string {
	rest, ok := strings.CutPrefix(ptr, "/tools/")
	if !ok {
		return ""
	}
	i, err := strconv.Atoi(strings.SplitN(rest, "/", 2)[0])
	if err != nil || i < 0 || i >= len(doc.Tools) || doc.Tools[i].Name == nil {
		return ""
	}
	return doc.Tools[i].Name.Value
}

// driftEvent is the [RunDrift] record of the session's drift warnings.
func (s *Session) driftEvent() RunDrift {
	ev := RunDrift{Warnings: s.drift}
	if len(ev.Warnings) > MaxDriftWarnings {
		ev.More = len(ev.Warnings) - MaxDriftWarnings
		ev.Warnings = ev.Warnings[:MaxDriftWarnings]
	}
	return ev
}

// sayDrift prints the session's drift warnings, as check prints them.
func (s *Session) sayDrift(runID string) {
	for _, w := range s.drift {
		s.progress("run %s: warning: %s [%s]", runID, w.Message, w.Rule)
	}
}

// noteDrift records (run.drift) and prints the session's drift warnings
// when a resumed or retried run finds them other than its last run.drift
// record says (recs are the run's verified records): a server whose
// description changed while the run waited is seen and recorded once.
func (s *Session) noteDrift(ctx context.Context, runID string, recs []audit.Record) error {
	ev := s.driftEvent()
	var last RunDrift
	for _, r := range recs {
		if EventKind(r.Kind) == KindRunDrift {
			last = RunDrift{}
			_ = json.Unmarshal(r.Data, &last)
		}
	}
	if len(ev.Warnings) == 0 || slices.Equal(last.Warnings, redactedWarnings(s.opt.Redact, ev.Warnings)) && last.More == ev.More {
		return nil
	}
	if err := s.opt.Store.Tx(ctx, func(tx store.Tx) error {
		return s.append(tx, runID, "", "", ev)
	}); err != nil {
		return err
	}
	s.sayDrift(runID)
	return nil
}

// redactedWarnings are ws as a record holds them (the record's data is
// redacted whole), for comparing with a recorded list.
func redactedWarnings(redact func(string) string, ws []DriftWarning) []DriftWarning {
	out := make([]DriftWarning, len(ws))
	for i, w := range ws {
		out[i] = DriftWarning{Tool: redact(w.Tool), Rule: w.Rule, Pointer: w.Pointer, Message: redact(w.Message)}
	}
	return out
}
