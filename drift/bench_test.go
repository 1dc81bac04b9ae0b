package drift

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/playbook"
)

// typicalPairs returns n pairs of definitions as `check` sees them: the
// document's (schemas sliced from a pretty-printed document) and the
// registry's, with input and output schemas of about 1 KB each. form says
// how the registry's schemas are spelled:
//
//   - "bytes": the same bytes (a document just pinned by the same writer);
//   - "indent": compact, as an MCP server sends them, against the
//     document's indented text;
//   - "order": compact with members in another order, so both are parsed.
func typicalPairs(n int, form string) (docs, regs []playbook.Definition) {
	for i := range n {
		in := fmt.Sprintf(`{"type":"object","properties":{"customerId":{"type":"string","description":"Id of the customer the call is about; as returned by customer.search."},`+
			`"query%d":{"type":"string","description":"Free text: a name, an email address or a company.","minLength":1,"maxLength":200},`+
			`"limit":{"type":"integer","description":"Maximum number of matches to return.","minimum":1,"maximum":50,"default":10},`+
			`"status":{"type":"string","enum":["open","pending","closed","archived"],"description":"Only records in this status."},`+
			`"tags":{"type":"array","items":{"type":"string","maxLength":40},"maxItems":20,"description":"Only records carrying all of these tags."},`+
			`"since":{"type":"string","format":"date-time","description":"Only records changed at or after this time."},`+
			`"sort":{"type":"string","enum":["newest","oldest","relevance"],"default":"newest","description":"Order of the matches."}},`+
			`"required":["customerId","query%d"],"additionalProperties":false}`, i, i)
		out := fmt.Sprintf(`{"type":"object","properties":{"items%d":{"type":"array","items":{"type":"object","properties":{`+
			`"id":{"type":"string","description":"Record id."},"title":{"type":"string","description":"Short title."},`+
			`"status":{"type":"string","enum":["open","pending","closed","archived"]},"amount":{"type":"integer","description":"Amount in the smallest currency unit."},`+
			`"createdAt":{"type":"string","format":"date-time","description":"When the record was created."},"tags":{"type":"array","items":{"type":"string"}},`+
			`"currency":{"type":"string","pattern":"^[a-z]{3}$","description":"ISO 4217 code, lowercase."}},`+
			`"required":["id","title","status"],"additionalProperties":false},"description":"Matching records, newest first."},`+
			`"nextCursor":{"type":["string","null"],"description":"Cursor for the next page, or null on the last page."},`+
			`"total":{"type":"integer","minimum":0,"description":"How many records match in all, across pages."}},"required":["items%d","total"],"additionalProperties":false}`, i, i)
		d := playbook.Definition{
			Name:               fmt.Sprintf("record.search%d", i),
			Source:             "primitive",
			Description:        "Search the workspace's records by customer, text, status and tags; returns the newest matches first.",
			Permissions:        []string{"records:read", "customers:read"},
			InputSchema:        indented(in),
			OutputSchema:       indented(out),
			DataScopeResources: []string{"records", "customers"},
			RequiresApproval:   ptr(false),
			RiskClass:          "read",
			SideEffecting:      ptr(false),
		}
		r := d
		r.Permissions = slices.Clone(d.Permissions)
		r.DataScopeResources = slices.Clone(d.DataScopeResources)
		r.RequiresApproval, r.SideEffecting = ptr(false), ptr(false)
		switch form {
		case "bytes":
			r.InputSchema, r.OutputSchema = slices.Clone(d.InputSchema), slices.Clone(d.OutputSchema)
		case "indent":
			r.InputSchema, r.OutputSchema = jsontext.Value(in), jsontext.Value(out)
		case "order":
			r.InputSchema = jsontext.Value(strings.Replace(in, `"type":"object",`, ``, 1)[:len(in)-len(`"type":"object",`)-1] + `,"type":"object"}`)
			r.OutputSchema = jsontext.Value(strings.Replace(out, `"type":"object",`, ``, 1)[:len(out)-len(`"type":"object",`)-1] + `,"type":"object"}`)
		}
		docs, regs = append(docs, d), append(regs, r)
	}
	return docs, regs
}

// indented spells a schema as it sits in a pretty-printed document, three
// levels down (tools[i].inputSchema).
func indented(s string) jsontext.Value {
	v := jsontext.Value(s)
	if err := v.Indent(jsontext.WithIndentPrefix("      "), jsontext.WithIndent("  ")); err != nil {
		panic(err)
	}
	return v
}

// TestTypicalPairsHaveNoFindings keeps the benchmark honest: its pairs are
// identical definitions, whatever the spelling.
func TestTypicalPairsHaveNoFindings(t *testing.T) {
	for _, form := range []string{"bytes", "indent", "order"} {
		docs, regs := typicalPairs(3, form)
		in, out := slices.Clone(docs[0].InputSchema), slices.Clone(docs[0].OutputSchema)
		if err := errors.Join(in.Compact(), out.Compact()); err != nil {
			t.Fatal(err)
		}
		if n, m := len(in), len(out); n < 900 || m < 900 || n > 1200 || m > 1200 {
			t.Fatalf("%s: schemas are not about 1 KB: %d, %d", form, n, m)
		}
		if form != "bytes" && sameJSON(docs[0].InputSchema, regs[0].InputSchema) == (form == "order") {
			t.Fatalf("%s: the registry's spelling is not what the form says", form)
		}
		for i := range docs {
			if got := Compare(docs[i], regs[i]); got != nil {
				t.Fatalf("%s: %v", form, got)
			}
		}
	}
}

// BenchmarkCompare5000 compares 5,000 identical definition pairs per
// iteration, in the three spellings of typicalPairs. `check` has 200 ms for
// a registry of 5,000 tools, so ns/pair must stay well under 20µs.
//
//	go test ./drift -run '^$' -bench Compare5000
func BenchmarkCompare5000(b *testing.B) {
	for _, form := range []string{"bytes", "indent", "order"} {
		b.Run(form, func(b *testing.B) {
			docs, regs := typicalPairs(5000, form)
			b.ReportAllocs()
			for b.Loop() {
				for i := range docs {
					Compare(docs[i], regs[i])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(docs)), "ns/pair")
		})
	}
}

// TestCompareConcurrent runs Compare from several goroutines (go test
// -race checks the shared scratch buffers).
func TestCompareConcurrent(t *testing.T) {
	docs, regs := typicalPairs(200, "order")
	regs[7].InputSchema = jsontext.Value(strings.Replace(string(regs[7].InputSchema), `"maximum":50`, `"maximum":20`, 1))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range docs {
				got := Compare(docs[i], regs[i])
				if (i == 7) != (len(got) == 1) {
					t.Errorf("pair %d: %v", i, got)
				}
			}
		})
	}
	wg.Wait()
}
