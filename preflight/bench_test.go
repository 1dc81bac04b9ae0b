package preflight_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/connector/stripe"
	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/internal/testgen"
	"github.com/openplaybook/openplaybook/mcphost"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/preflight"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/validate"
)

// benchHarness binds everything testgen.Large's documents require: the
// Stripe connection (its key from a fake environment), the MCP server
// "bulk" (never started: the benchmark fills in what it lists) and the
// agent "worker".
const benchHarness = `
connections:
  stripe: {authKind: api_token, secrets: {apiKey: STRIPE_API_KEY}}
mcpServers:
  bulk: {command: bulk-server}
agents:
  worker: {driver: transcript, transcript: worker.json}
`

// benchEnv builds by hand the environment `check` would connect to for
// doc, without starting a server: the built-ins and the Stripe
// connector's tools, and every tool doc embeds registered as the
// connector, the built-ins or MCP server "bulk" provide it (by its
// source), with its schemas spelled as form says:
//
//   - "compact": compact, as an MCP server sends them, against the
//     document's spaced text (drift's parse-free path);
//   - "sorted": compact with members sorted, as a registry that
//     re-encodes schemas has them (drift proves them equal member by
//     member).
func benchEnv(tb testing.TB, doc *playbook.Document, form string) *host.Host {
	tb.Helper()
	dir := tb.TempDir()
	// The agent's transcript must exist: check builds every bound driver.
	if err := os.WriteFile(filepath.Join(dir, "worker.json"), []byte(`{"steps": {}}`), 0o644); err != nil {
		tb.Fatal(err)
	}
	h, ds := harness.Parse("harness.yaml", []byte(benchHarness), dir)
	if n := diag.Count(ds, diag.Error); n > 0 {
		tb.Fatalf("harness: %v", ds)
	}
	env := &host.Host{
		Harness: h,
		Secrets: harness.NewSecrets(h.Secrets, &harness.SecretsOptions{LookupEnv: func(name string) (string, bool) {
			if name == "STRIPE_API_KEY" {
				return "sk_test_bench", true
			}
			return "", false
		}}),
		Registry:    registry.New(),
		Servers:     map[string]*mcphost.Server{},
		ServerErrs:  map[string]error{},
		ServerTools: map[string][]mcphost.Tool{},
	}
	add := func(d playbook.Definition, o registry.Origin) {
		if err := env.Registry.Add(d, o, nil); err != nil {
			tb.Fatal(err)
		}
	}
	for _, d := range builtin.Definitions() {
		add(d, registry.Origin{Kind: registry.Builtin})
	}
	for _, d := range stripe.Definitions() {
		add(d, registry.Origin{Kind: registry.Connector, Name: stripe.Provider})
	}
	for _, t := range doc.Tools {
		d := t.Definition(doc.Source)
		d.InputSchema, d.OutputSchema = respell(tb, d.InputSchema, form), respell(tb, d.OutputSchema, form)
		switch d.Source {
		case "connector":
			add(d, registry.Origin{Kind: registry.Connector, Name: stripe.Provider})
		case "mcp":
			add(d, registry.Origin{Kind: registry.MCP, Name: "bulk"})
			env.ServerTools["bulk"] = append(env.ServerTools["bulk"], mcphost.Tool{Name: d.Name, Definition: d})
		default:
			add(d, registry.Origin{Kind: registry.Builtin})
		}
	}
	return env
}

func respell(tb testing.TB, v jsontext.Value, form string) jsontext.Value {
	tb.Helper()
	if v == nil {
		return nil
	}
	switch form {
	case "compact":
		c := jsontext.Value(append([]byte(nil), v...))
		if err := c.Compact(); err != nil {
			tb.Fatal(err)
		}
		return c
	case "sorted":
		var m any
		if err := json.Unmarshal(v, &m); err != nil {
			tb.Fatal(err)
		}
		b, err := json.Marshal(m, json.Deterministic(true))
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	tb.Fatalf("unknown form %q", form)
	return nil
}

// checkDoc is what `check` does with one document once the environment is
// built (server start-up excluded): read it, validate it with the
// registry's names resolving, and check it (resolution, drift against
// every registry definition, preflight).
func checkDoc(ctx context.Context, env *host.Host, src []byte) []diag.Diagnostic {
	doc, ds := playbook.Read("large.json", src, nil)
	ds = append(ds, validate.Document(doc, &validate.Options{Registry: env.Registry.Has})...)
	return append(ds, preflight.Check(ctx, env, doc)...)
}

// TestCheckLargeIsClean keeps BenchmarkCheck5000 honest: the generated
// document passes check against the benchmark's environment, in both
// spellings, so every definition is compared and none is skipped as
// missing.
func TestCheckLargeIsClean(t *testing.T) {
	src := testgen.Large(100, 500)
	doc, _ := playbook.Read("large.json", src, nil)
	for _, form := range []string{"compact", "sorted"} {
		env := benchEnv(t, doc, form)
		if got := env.Registry.Len(); got < 500 {
			t.Fatalf("%s: registry has %d tools", form, got)
		}
		for _, d := range checkDoc(context.Background(), env, src) {
			if d.Severity >= diag.Warning {
				t.Errorf("%s: %d:%d %s [%s]", form, d.Line, d.Column, d.Message, d.Rule)
			}
		}
	}
	// The two spellings differ: "sorted" exercises drift's member-by-member
	// comparison.
	c, _ := benchEnv(t, doc, "compact").Registry.Lookup("charge.op1")
	o, _ := benchEnv(t, doc, "sorted").Registry.Lookup("charge.op1")
	if string(c.Definition.InputSchema) == string(o.Definition.InputSchema) {
		t.Fatalf("compact and sorted spell the schema alike: %s", c.Definition.InputSchema)
	}
	// A drifted definition is found: the comparison really runs.
	env := benchEnv(t, doc, "sorted")
	e, _ := env.Registry.Lookup("charge.op1")
	e.Definition.Permissions = append(e.Definition.Permissions, "records:write")
	drifted := registry.New()
	for _, n := range env.Registry.Names() {
		x, _ := env.Registry.Lookup(n)
		if n == "charge.op1" {
			x = e
		}
		if err := drifted.Add(x.Definition, x.Origin, nil); err != nil {
			t.Fatal(err)
		}
	}
	env.Registry = drifted
	var found bool
	for _, d := range checkDoc(context.Background(), env, src) {
		found = found || d.Rule == "drift-permissions" && d.Severity == diag.Error
	}
	if !found {
		t.Error("a registry definition with one more permission was not reported")
	}
}

// BenchmarkCheck5000 measures `check` of a generated 1,000-step document
// embedding 5,000 tools against a registry holding the same 5,000 (plus
// the built-ins and the Stripe connector's), minus server start-up:
// reading the document, validating it with the registry, resolution,
// drift (5,000 comparisons) and preflight: what cmd/openplaybook/cli's
// checkInputs does per document. Target (BENCHMARKS.md): under 200 ms. The
// registry's schemas are spelled as [benchEnv]'s form says.
//
//	go test ./preflight -run '^$' -bench Check5000 -benchmem
func BenchmarkCheck5000(b *testing.B) {
	src := testgen.Large(1000, 5000)
	doc, _ := playbook.Read("large.json", src, nil)
	if len(doc.Tools) != 5000 {
		b.Fatalf("document embeds %d tools", len(doc.Tools))
	}
	ctx := context.Background()
	for _, name := range []string{"compact", "sorted"} {
		env := benchEnv(b, doc, name)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				if ds := checkDoc(ctx, env, src); diag.Count(ds, diag.Error) > 0 {
					b.Fatal(fmt.Sprint(ds[0]))
				}
			}
		})
	}
}

// BenchmarkEnvCheck5000 is BenchmarkCheck5000's share of preflight:
// [preflight.Check] alone (resolution, 5,000 drift comparisons,
// preflight) on a document already read and validated.
//
//	go test ./preflight -run '^$' -bench EnvCheck5000 -benchmem
func BenchmarkEnvCheck5000(b *testing.B) {
	doc, _ := playbook.Read("large.json", testgen.Large(1000, 5000), nil)
	ctx := context.Background()
	for _, form := range []string{"compact", "sorted"} {
		env := benchEnv(b, doc, form)
		b.Run(form, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ds := preflight.Check(ctx, env, doc); diag.Count(ds, diag.Error) > 0 {
					b.Fatal(fmt.Sprint(ds[0]))
				}
			}
		})
	}
}
