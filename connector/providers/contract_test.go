package providers_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/openplaybook/openplaybook/connector"
	"github.com/openplaybook/openplaybook/connector/httpconn"
	"github.com/openplaybook/openplaybook/connector/providers"
)

// repoRoot is where node_modules is (scripts/deps.sh installs it).
var repoRoot = filepath.Join("..", "..")

// descriptionPath is the file a provider is contract-tested against.
func descriptionPath(t *testing.T, d httpconn.DescriptionSource) string {
	t.Helper()
	var p string
	switch {
	case d.Package != "":
		p = filepath.Join(repoRoot, "node_modules", d.Package)
	case d.File != "":
		p = filepath.Join("descriptions", d.File)
	default:
		t.Fatal("the provider names no description (description.package or description.file)")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the API description %s is missing (run scripts/deps.sh for the npm packages): %v", p, err)
	}
	return p
}

var (
	docsMu sync.Mutex
	docs   = map[string]*openapi3.T{}
)

func loadOpenAPI(t *testing.T, path string) *openapi3.T {
	t.Helper()
	docsMu.Lock()
	defer docsMu.Unlock()
	if d := docs[path]; d != nil {
		return d
	}
	l := openapi3.NewLoader()
	l.IsExternalRefsAllowed = false
	d, err := l.LoadFromFile(path)
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	docs[path] = d
	return d
}

func allProviders(t *testing.T) []*httpconn.Provider {
	t.Helper()
	ps, err := providers.All()
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// TestCatalog holds every provider to the catalog rules of
// docs/connectors.md: at least 4 tools, 2 reads and (where the API has
// writes) a write; names <provider>.<...>; reads never side-effecting or
// approval-gated; examples valid against the inputSchema.
func TestCatalog(t *testing.T) {
	for _, p := range allProviders(t) {
		t.Run(p.Name(), func(t *testing.T) {
			defs := p.Definitions()
			reads, writes := 0, 0
			for _, d := range defs {
				if !strings.HasPrefix(d.Name, p.Name()+".") {
					t.Errorf("%s: a %s tool is named %s.<resource>.<verb>", d.Name, p.Name(), p.Name())
				}
				if d.SideEffecting == nil || d.RequiresApproval == nil || d.RiskClass == "" {
					t.Errorf("%s: sideEffecting, requiresApproval and riskClass are all stated", d.Name)
					continue
				}
				if *d.SideEffecting {
					writes++
					if len(d.DataScopeWrites) == 0 {
						t.Errorf("%s: a write names its dataScopeWrites", d.Name)
					}
				} else {
					reads++
					if *d.RequiresApproval || d.RiskClass != "read" {
						t.Errorf("%s: a read has riskClass read and never requires approval", d.Name)
					}
				}
				if len(d.Permissions) == 0 || len(d.DataScopeResources) == 0 {
					t.Errorf("%s: permissions and dataScopeResources are stated", d.Name)
				}
				c := jsonschema.NewCompiler()
				var in, ex any
				in, err := jsonschema.UnmarshalJSON(bytes.NewReader(d.InputSchema))
				if err == nil {
					err = c.AddResource("in.json", in)
				}
				var s *jsonschema.Schema
				if err == nil {
					s, err = c.Compile("in.json")
				}
				if err != nil {
					t.Errorf("%s: inputSchema: %v", d.Name, err)
					continue
				}
				if _, err := jsonschema.UnmarshalJSON(bytes.NewReader(d.OutputSchema)); err != nil {
					t.Errorf("%s: outputSchema: %v", d.Name, err)
				}
				example := p.Example(d.Name)
				if example == nil {
					t.Errorf("%s: no example arguments", d.Name)
					continue
				}
				ex, _ = jsonschema.UnmarshalJSON(bytes.NewReader(example))
				if err := s.Validate(ex); err != nil {
					t.Errorf("%s: the example is not valid against the inputSchema: %v", d.Name, err)
				}
			}
			if len(defs) < 4 || reads < 2 || writes < 1 {
				t.Errorf("%d tools, %d reads, %d writes; at least 4 tools, 2 reads and 1 write are needed", len(defs), reads, writes)
			}
		})
	}
}

// fakeSecrets are the credentials the contract tests put on requests:
// every role, so each auth kind places something.
var fakeSecrets = map[string]string{
	"apiKey": "test_api_key_0001", "accessToken": "test_access_token_0001",
	"clientId": "test_client_id", "clientSecret": "test_client_secret",
}

// openFor opens p's first auth kind against baseURL.
func openFor(t *testing.T, p *httpconn.Provider, baseURL string) *httpconn.Connection {
	t.Helper()
	info := p.Info()
	conn, err := p.OpenWith(connector.Config{AuthKind: info.AuthKinds[0].Kind, Secrets: fakeSecrets, BaseURL: baseURL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestContract checks every REST binding against the provider's own
// OpenAPI description: the operation exists (method and path), the
// request built from the tool's example is valid against it (path, query
// and header parameters, body) and every member the result template
// reads is in the documented 2xx answer. GraphQL bindings are validated
// against the provider's SDL by scripts/graphql-mock.mjs --check.
func TestContract(t *testing.T) {
	for _, p := range allProviders(t) {
		spec := p.Spec()
		t.Run(p.Name(), func(t *testing.T) {
			path := descriptionPath(t, spec.Description)
			switch spec.Description.Kind {
			case "graphql":
				checkGraphQL(t, spec, path)
				return
			case "openapi":
			default:
				t.Fatalf("description.kind is %q; it is openapi or graphql", spec.Description.Kind)
			}
			doc := loadOpenAPI(t, path)
			if len(doc.Servers) == 0 {
				t.Fatal("the description has no servers")
			}
			if got := doc.Servers[0].URL; strings.TrimRight(got, "/") != strings.TrimRight(spec.APIRoot, "/") {
				t.Errorf("apiRoot is %s; the description's servers[0].url is %s", spec.APIRoot, got)
			}
			// Route on a test host with the server's base path.
			base := "http://contract.test"
			if u, err := url.Parse(doc.Servers[0].URL); err == nil {
				base += strings.TrimRight(u.Path, "/")
			}
			routed := *doc
			routed.Servers = openapi3.Servers{{URL: base}}
			// A router per method: gorillamux takes /a/{id} (DELETE) and
			// /a/{idOrUrl} (GET) for one route and answers the second
			// "method not allowed" (Vercel's deployments).
			byMethod := map[string]routers.Router{}
			routerFor := func(method string) routers.Router {
				if r := byMethod[method]; r != nil {
					return r
				}
				only := routed
				only.Paths = openapi3.NewPaths()
				for p, item := range routed.Paths.Map() {
					if op := item.GetOperation(method); op != nil {
						one := &openapi3.PathItem{Parameters: item.Parameters, Servers: item.Servers}
						one.SetOperation(method, op)
						only.Paths.Set(p, one)
					}
				}
				r, err := gorillamux.NewRouter(&only)
				if err != nil {
					t.Fatalf("routing the description: %v", err)
				}
				byMethod[method] = r
				return r
			}
			conn := openFor(t, p, base)
			for _, d := range p.Definitions() {
				t.Run(d.Name, func(t *testing.T) {
					req, err := conn.Request(context.Background(), d.Name, p.Example(d.Name), "opb_00000000000000000000000000000000")
					if err != nil {
						t.Fatalf("building the request from the example: %v", err)
					}
					route, params, err := routerFor(req.Method).FindRoute(req)
					if err != nil {
						t.Fatalf("%s %s is not an operation of the description: %v", req.Method, req.URL.Path, err)
					}
					in := &openapi3filter.RequestValidationInput{
						Request: req, PathParams: params, Route: route,
						Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true,
							// Check what is sent, not what defaults would add.
							SkipSettingDefaults: true},
					}
					if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
						t.Errorf("the request %s %s does not match the description: %v", req.Method, req.URL.Path, err)
					}
					schema := answerSchema(route.Operation)
					if schema == nil {
						t.Fatalf("the operation documents no JSON 2xx answer")
					}
					for _, ptr := range p.ResultPointers(d.Name) {
						if !schemaHas(schema, strings.Split(strings.TrimPrefix(ptr, "/"), "/"), 0) && ptr != "" {
							t.Errorf("the result reads %s, which the documented answer does not have", ptr)
						}
					}
				})
			}
		})
	}
}

// answerSchema returns the JSON schema of the operation's first 2xx
// answer.
func answerSchema(op *openapi3.Operation) *openapi3.Schema {
	if op.Responses == nil {
		return nil
	}
	codes := []string{"200", "201", "202", "203", "2XX", "default"}
	for _, c := range codes {
		r := op.Responses.Value(c)
		if r == nil || r.Value == nil {
			continue
		}
		for ct, mt := range r.Value.Content {
			if (strings.Contains(ct, "json") || ct == "*/*") && mt.Schema != nil && mt.Schema.Value != nil {
				return mt.Schema.Value
			}
		}
	}
	return nil
}

// schemaHas reports whether the pointer tokens name something the schema
// can hold ("*" stands for every element of an array).
func schemaHas(s *openapi3.Schema, toks []string, depth int) bool {
	if len(toks) == 0 || (len(toks) == 1 && toks[0] == "") {
		return true
	}
	if s == nil || depth > 64 {
		return false
	}
	for _, branch := range [][]*openapi3.SchemaRef{s.AllOf, s.OneOf, s.AnyOf} {
		for _, b := range branch {
			if b.Value != nil && schemaHas(b.Value, toks, depth+1) {
				return true
			}
		}
	}
	tok := strings.ReplaceAll(strings.ReplaceAll(toks[0], "~1", "/"), "~0", "~")
	if s.Items != nil && s.Items.Value != nil {
		if tok == "*" || isIndex(tok) {
			return schemaHas(s.Items.Value, toks[1:], depth+1)
		}
	}
	if p := s.Properties[tok]; p != nil {
		return schemaHas(p.Value, toks[1:], depth+1)
	}
	if ap := s.AdditionalProperties.Schema; ap != nil && ap.Value != nil && len(s.Properties) == 0 {
		return schemaHas(ap.Value, toks[1:], depth+1)
	}
	// A free-form object (no properties, no composition) holds anything.
	free := s.Type == nil || s.Type.Is("object")
	return free && len(s.Properties) == 0 && len(s.AllOf)+len(s.OneOf)+len(s.AnyOf) == 0 && s.Items == nil
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// checkGraphQL validates each query document of the provider against its
// SDL with the graphql package (scripts/graphql-mock.mjs --check).
func checkGraphQL(t *testing.T, spec httpconn.Spec, sdl string) {
	t.Helper()
	file := filepath.Join(".", spec.Provider+".json")
	cmd := exec.Command(nodeBinary(t), filepath.Join(repoRoot, "scripts", "graphql-mock.mjs"), "--schema", sdl, "--check", file)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the GraphQL documents do not validate against %s: %v\n%s", sdl, err, out)
	}
	for _, tl := range spec.Tools {
		if tl.Request.GraphQL == nil {
			t.Errorf("%s: a tool of a GraphQL provider sends a GraphQL document", tl.Definition.Name)
		}
	}
}

func nodeBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is needed for the GraphQL contract tests")
	}
	return p
}

var _ = slices.Contains[[]string]
var _ = http.MethodGet
var _ jsontext.Value
