// Package drivers builds a driver from a harness binding by the driver's
// name: it lists the drivers this runtime has, explicitly (no
// registration at init).
//
// The runtime builds an agent's driver per run, since a transcript path
// may name the playbook:
//
//	d, err := drivers.New(a.Driver, a.Settings, &driver.Setup{
//		Secret:     secrets.Resolve,
//		Expand:     secrets.Expand,
//		Path:       h.ResolvePath,
//		PlaybookID: manifestID,
//	})
package drivers

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/anthropic"
	"github.com/openplaybook/openplaybook/driver/external"
	"github.com/openplaybook/openplaybook/driver/openai"
	"github.com/openplaybook/openplaybook/driver/openairesponses"
	"github.com/openplaybook/openplaybook/driver/transcript"
	"github.com/openplaybook/openplaybook/internal/suggest"
)

// Names returns the driver names a binding may give, sorted.
func Names() []string {
	return []string{anthropic.Name, external.Name, openai.Name, openairesponses.Name, transcript.Name}
}

// New builds the driver named name from an agent binding's settings (every
// key of the binding but "driver"); see each package's FromSettings. A
// nil setup means the zero [driver.Setup].
func New(name string, settings map[string]any, setup *driver.Setup) (driver.Driver, error) {
	switch name {
	case transcript.Name:
		return transcript.FromSettings(settings, setup)
	case openai.Name:
		return openai.FromSettings(settings, setup)
	case openairesponses.Name:
		return openairesponses.FromSettings(settings, setup)
	case anthropic.Name:
		return anthropic.FromSettings(settings, setup)
	case external.Name:
		if err := external.CheckSettings(settings); err != nil {
			return nil, err
		}
		if setup != nil && setup.External != nil {
			return setup.External, nil
		}
		return external.Absent{}, nil
	}
	return nil, unknown(name)
}

// Check checks an agent binding without resolving secrets, reading files
// or sending anything: the driver name is known and its settings are
// well formed (see each package's CheckSettings).
func Check(name string, settings map[string]any) error {
	switch name {
	case transcript.Name:
		return transcript.CheckSettings(settings)
	case openai.Name:
		return openai.CheckSettings(settings)
	case openairesponses.Name:
		return openairesponses.CheckSettings(settings)
	case anthropic.Name:
		return anthropic.CheckSettings(settings)
	case external.Name:
		return external.CheckSettings(settings)
	}
	return unknown(name)
}

func unknown(name string) error {
	q := make([]string, 0, len(Names()))
	for _, n := range Names() {
		q = append(q, strconv.Quote(n))
	}
	return fmt.Errorf("unknown driver %q%s; the drivers are %s", name, suggest.Phrase(name, Names()), strings.Join(q, ", "))
}
