// Package schema embeds the published JSON Schema of OpenPlaybook 1.6
// (openplaybook-1.6.schema.json) and validates JSON values against it.
//
// The schema checks the shape of a document: members, types, enums and
// patterns. The consistency rules between fields are enforced by package
// validate, which is what `openplaybook validate` runs; the schema is for
// editors and for other implementations.
//
// Compiling the schema never touches the network or the file system: the
// only resources are the embedded schema and the JSON Schema meta-schemas
// built into the validator library, and every other reference fails.
package schema

import (
	"bytes"
	_ "embed"
	"fmt"
	"slices"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ID is the $id of the embedded schema, the URL it is published under.
const ID = "https://openplaybook.dev/schema/openplaybook-1.6.schema.json"

//go:embed openplaybook-1.6.schema.json
var src []byte

// JSON returns the text of the embedded schema, byte for byte as shipped.
// The caller may modify the returned slice; it is a copy.
func JSON() []byte { return slices.Clone(src) }

// Compiled returns the embedded schema compiled for validation. It is
// compiled once, on first use; the result is safe for concurrent use. An
// error means the embedded schema itself is broken, which is a bug.
func Compiled() (*jsonschema.Schema, error) { return compiled() }

var compiled = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(src))
	if err != nil {
		return nil, fmt.Errorf("schema: embedded schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(ID, doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s, err := c.Compile(ID)
	if err != nil {
		return nil, fmt.Errorf("schema: compiling the embedded schema: %w", err)
	}
	return s, nil
})

// noLoader refuses every URL, so that no reference in the schema can make
// the compiler read a file or fetch from the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("refusing to load %q: the openplaybook schema resolves references within itself only", url)
}

// Validate checks v against the schema. v is a decoded JSON value in the
// shape encoding/json produces with UseNumber (nil, bool, json.Number or
// float64, string, map[string]any, []any), as returned by
// [jsonschema.UnmarshalJSON] or syntax.Node.Value. It returns nil when v
// is valid; otherwise the error is a *jsonschema.ValidationError whose
// Causes locate each failure, or an error from compiling the schema.
func Validate(v any) error {
	s, err := compiled()
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// ValidateJSON decodes data as one JSON value (numbers kept exact) and
// checks it with [Validate]. Data that is not JSON is an error.
func ValidateJSON(data []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	return Validate(v)
}
