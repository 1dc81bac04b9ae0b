package explain

import (
	"encoding/json"
	"html"
	"reflect"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/validate"
)

// Fake credentials, built from pieces so that secret scanners leave this
// file alone; none of them is real.
var fakeCredentials = []string{
	"sk_" + "live_" + "51HqLyjWDarjtT1zdp7dcXq",
	"ghp_" + "R2d2C3p0BB8aLuKeSkYwAlKeR0123456789",
	"postgres://app:" + "Tr0ub4dor3@db.zq9x.example:5432/app",
	"Bearer " + "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + "." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0" + "." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
	"-----BEGIN " + "RSA PRIVATE KEY-----\n" + "MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB" + "\n-----END RSA PRIVATE KEY-----",
	"x_" + "sk_" + "live_" + "51Hq8ZtLkR9vXw2Yp4Nm7QcB3dF6gJ",
	"AKIA" + "Z3MNQ7RT5XK2PL4W",
	"xoxb-" + "2048123456-4096123456789-AbCdEfGhIjKlMnOpQrStUvWx",
	"Basic " + "YXBwOlRyMHViNGRvcjNYeQ==",
	"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + "." + "eyJzdWIiOiI5ODc2NTQzMjEwIn0" + "." + "Xm3vQ0n9Lk2Pz8Rt5Wy1Ab4Cd7Ef0Gh3Ij6Kl9Mn2Op",
}

// leakyDocument returns a document with a credential in every string the
// explanation takes from it (each @ of the template below, in a phrase
// "see <credential> now"; step ids and the names that refer to them are
// bare credentials), and the pieces of the credentials no output may
// show.
func leakyDocument() (src string, pieces []string) {
	const template = `{
  "openplaybook": @,
  "manifest": {"id": @, "name": @, "version": @, "description": @, "requiredConnectors": [@]},
  "inputSchema": {"type": "object", "properties": {"PROP": {"type": @, "format": @, "description": @}}, "required": ["PROP"]},
  "requires": {
    "connections": [{"provider": @, "authKind": @, "scopes": [@], "capabilities": [@]}],
    "mcpServers": [{"name": @, "toolNames": [@]}],
    "secrets": [{"name": @, "purpose": @}]
  },
  "tools": [{"name": "STRIPE", "source": @, "connectorType": @, "description": @, "permissions": [@],
    "inputSchema": {}, "outputSchema": {}, "riskClass": @, "sideEffecting": true, "requiresApproval": true,
    "scope": @, "dataScopeResources": [@], "dataScopeWrites": [@]}],
  "steps": [
    {"id": "GITHUB", "kind": "agent", "agent": @, "purpose": @, "allowedTools": ["STRIPE", "mcp.AWS.x", "SLACK"], "next": "JWT"},
    {"id": "JWT", "kind": "gate", "purpose": @, "next": "URL", "onReject": "GITHUB"},
    {"id": "URL", "kind": @, "purpose": @, "next": "BASIC"}
  ]
}
`
	bare := map[string]string{
		"STRIPE": fakeCredentials[0], "GITHUB": fakeCredentials[1], "URL": fakeCredentials[2],
		"AWS": fakeCredentials[6], "SLACK": fakeCredentials[7], "BASIC": fakeCredentials[8], "JWT": fakeCredentials[9],
		"PROP": fakeCredentials[5],
	}
	var b strings.Builder
	n := 0
	for _, c := range template {
		if c != '@' {
			b.WriteRune(c)
			continue
		}
		q, _ := json.Marshal("see " + fakeCredentials[n%len(fakeCredentials)] + " now")
		b.Write(q)
		n++
	}
	src = b.String()
	for name, s := range bare {
		src = strings.ReplaceAll(src, name, strings.Trim(string(must(json.Marshal(s))), `"`))
	}
	for _, s := range fakeCredentials {
		for i := 0; i+8 <= len(s); i++ {
			if w := s[i : i+8]; !strings.ContainsAny(w, " \n") {
				pieces = append(pieces, w)
			}
		}
	}
	return src, pieces
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestNoFormatShowsCredentials explains a document with a credential in
// every string it holds, in every format: none shows a piece of one.
func TestNoFormatShowsCredentials(t *testing.T) {
	src, pieces := leakyDocument()
	if !json.Valid([]byte(src)) {
		t.Fatalf("the test document is not JSON:\n%s", src)
	}
	doc, ds := playbook.Read("leaky.json", []byte(src), nil)
	ds = append(ds, validate.Document(doc, nil)...)
	diag.Sort(ds)
	// A registry that has the tool, from a source whose name holds a
	// credential too, and says something else of every value.
	reg := registry.New()
	if err := reg.Add(playbook.Definition{Name: fakeCredentials[0]}, registry.Origin{Kind: registry.MCP, Name: "see " + fakeCredentials[3] + " now"}, nil); err != nil {
		t.Fatal(err)
	}
	e := BuildWith(doc, ds, &Options{Registry: reg, Source: "see " + fakeCredentials[4] + " now", Unavailable: []string{"see " + fakeCredentials[7] + " now"}})

	// The document fills every string of the explanation somewhere.
	seen, filled := map[string]bool{}, map[string]bool{}
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(path, v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(path+"."+v.Type().Field(i).Name, v.Field(i))
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.String {
				seen[path] = true
			}
			for i := range v.Len() {
				walk(path+"[]", v.Index(i))
			}
		case reflect.String:
			path = strings.TrimSuffix(path, "[]") // a list is filled by any item
			seen[path] = true
			if v.String() != "" {
				filled[path] = true
			}
		}
	}
	walk("Explanation", reflect.ValueOf(e))
	for path := range seen {
		if !filled[path] {
			t.Errorf("%s is empty: the test document does not fill it", path)
		}
	}

	for _, format := range Formats {
		out := render(t, e, format)
		if format == "html" {
			out = html.UnescapeString(out)
		}
		for _, p := range pieces {
			if i := strings.Index(out, p); i >= 0 {
				t.Errorf("the %s format shows %q of a credential: ...%s...", format, p, out[max(i-80, 0):min(i+80, len(out))])
				break
			}
		}
		if !strings.Contains(out, "redacted ") {
			t.Errorf("the %s format shows no redaction", format)
		}
	}
}
