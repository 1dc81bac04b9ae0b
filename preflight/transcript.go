package preflight

import (
	"fmt"
	"strings"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/driver/transcript"
	"github.com/openplaybook/openplaybook/internal/suggest"
	"github.com/openplaybook/openplaybook/playbook"
)

// Transcript checks that every step id of tr is an agent step of doc: an
// entry for a step id the document does not have, or for a gate (a person
// decides a gate; no agent runs there), would never be replayed, so what
// it records is never checked or made. Each is an error positioned at the
// step id in the transcript file (tr.File, line, column and the JSON
// Pointer of its list of calls), with a "did you mean" among the agent
// steps where one is close. check and run look at the transcripts the
// harness binds (through [Check]); replay at the one it is given.
func Transcript(doc *playbook.Document, tr *transcript.Transcript) []diag.Diagnostic {
	kinds := map[string]string{}
	var agentSteps []string
	for _, s := range doc.Steps {
		if s.ID == nil {
			continue
		}
		id := s.ID.Value
		if _, ok := kinds[id]; ok {
			continue // step-id-unique's
		}
		kinds[id] = playbook.Str(s.Kind)
		if kinds[id] == "agent" {
			agentSteps = append(agentSteps, id)
		}
	}
	name := "the playbook"
	if doc.Manifest != nil && playbook.Str(doc.Manifest.ID) != "" {
		name = fmt.Sprintf("playbook %q", playbook.Str(doc.Manifest.ID))
	}
	var ds []diag.Diagnostic
	for _, st := range tr.Steps() {
		kind, ok := kinds[st.ID]
		var msg string
		switch {
		case !ok:
			msg = fmt.Sprintf("the transcript has an entry for step %q, which %s does not have%s, so %s; the agent steps are %s",
				st.ID, name, suggest.Phrase(st.ID, agentSteps), neverReplayed(st.Calls), listOrNone(agentSteps))
		case kind == "gate":
			msg = fmt.Sprintf("the transcript has an entry for step %q, a gate of %s: a person decides a gate and no agent runs there, so %s; record calls under an agent step (%s)",
				st.ID, name, neverReplayed(st.Calls), listOrNone(agentSteps))
		default:
			continue
		}
		ds = append(ds, diag.Diagnostic{File: tr.File, Line: st.Line, Column: st.Column, Pointer: st.Pointer,
			Severity: diag.Error, Rule: RuleTranscript, Message: msg})
	}
	return ds
}

func neverReplayed(calls int) string {
	switch calls {
	case 0:
		return "it is never used"
	case 1:
		return "its call would never be replayed"
	}
	return fmt.Sprintf("its %d calls would never be replayed", calls)
}

func listOrNone(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = fmt.Sprintf("%q", id)
	}
	return strings.Join(q, ", ")
}
