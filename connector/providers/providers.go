// Package providers is the catalog of the declarative connectors: one
// JSON file per provider (an [httpconn.Spec]) embedded in the binary, and
// the Go hooks their tools name. Stripe is not here: it uses stripe-go
// (package connector/stripe).
//
// docs/connectors.md describes the file format and each provider.
package providers

import (
	"embed"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/connector/httpconn"
)

//go:embed *.json
var files embed.FS

// All returns every declarative provider, by name. The files are compiled
// in and tested, so an error here is a build defect.
func All() ([]*httpconn.Provider, error) {
	names, err := files.ReadDir(".")
	if err != nil {
		return nil, err
	}
	var out []*httpconn.Provider
	for _, e := range names {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		spec, err := Read(e.Name())
		if err != nil {
			return nil, err
		}
		p, err := httpconn.New(spec, Hooks())
		if err != nil {
			return nil, fmt.Errorf("connector/providers/%s: %v", e.Name(), err)
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// Read decodes one embedded provider file, rejecting unknown members.
func Read(file string) (httpconn.Spec, error) {
	var spec httpconn.Spec
	b, err := files.ReadFile(file)
	if err != nil {
		return spec, err
	}
	if err := json.Unmarshal(b, &spec, json.RejectUnknownMembers(true)); err != nil {
		return spec, fmt.Errorf("connector/providers/%s: %v", file, err)
	}
	if want := strings.TrimSuffix(path.Base(file), ".json"); spec.Provider != want {
		return spec, fmt.Errorf("connector/providers/%s: provider is %q; the file is named for %q", file, spec.Provider, want)
	}
	return spec, nil
}
