package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestEmbeddedSchemaCompiles(t *testing.T) {
	if _, err := Compiled(); err != nil {
		t.Fatal(err)
	}
	var top struct {
		ID string `json:"$id"`
	}
	if err := json.Unmarshal(JSON(), &top); err != nil {
		t.Fatal(err)
	}
	if top.ID != ID {
		t.Errorf("schema $id is %q, package constant ID is %q", top.ID, ID)
	}
}

func TestJSONIsACopy(t *testing.T) {
	a := JSON()
	a[0] = 'x'
	if b := JSON(); b[0] == 'x' {
		t.Error("JSON returned the embedded slice itself; callers could change the schema")
	}
}

// TestValidCorpus: every example and every testdata/ok document is valid
// against the published schema.
func TestValidCorpus(t *testing.T) {
	files, _ := filepath.Glob("../examples/*.json")
	ok, _ := filepath.Glob("../testdata/ok/*.json")
	files = append(files, ok...)
	if len(files) < 7 {
		t.Fatalf("found only %d valid documents", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := ValidateJSON(data); err != nil {
				t.Errorf("%s does not validate against the schema:\n%v", f, err)
			}
		})
	}
}

func TestInvalidDocument(t *testing.T) {
	err := ValidateJSON([]byte(`{"openplaybook": "1.6"}`))
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a *jsonschema.ValidationError, got %v", err)
	}
	if err := ValidateJSON([]byte(`{`)); err == nil {
		t.Error("ValidateJSON accepted text that is not JSON")
	}
}

// TestNoRemoteReferences: a schema that refers outside itself fails to
// compile instead of fetching.
func TestNoRemoteReferences(t *testing.T) {
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(`{"$ref": "https://example.com/other.json"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("mem://s.json", doc); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compile("mem://s.json"); err == nil {
		t.Fatal("a remote $ref compiled; the loader must refuse it")
	}
}
