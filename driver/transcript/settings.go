package transcript

import (
	"fmt"
	"strings"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/internal/settings"
)

// Name is the driver's name in a harness binding
// ({driver: transcript, transcript: <path>}).
const Name = "transcript"

// CheckSettings checks an agent binding's settings without reading the
// transcript: "transcript" (required) is a non-empty string, and there is
// no other setting.
func CheckSettings(m map[string]any) error {
	_, err := parseSettings(m)
	return err
}

func parseSettings(m map[string]any) (string, error) {
	r := settings.New(Name, m, "transcript")
	p := r.String("transcript", true, `the transcript file's path, relative to the harness file; "{playbook}" stands for the playbook's manifest id`)
	return p, r.Err()
}

// FromSettings builds the driver of a harness binding
// {driver: transcript, transcript: <path>}: it expands the path's
// ${secret:NAME} references (setup.Expand), replaces "{playbook}" by
// setup.PlaybookID ([PathFor]), resolves it against the harness file's
// directory (setup.Path) and loads the transcript. A nil setup means the
// zero [driver.Setup].
func FromSettings(m map[string]any, setup *driver.Setup) (*Driver, error) {
	pattern, err := parseSettings(m)
	if err != nil {
		return nil, err
	}
	if setup == nil {
		setup = &driver.Setup{}
	}
	p, err := settings.Expand(Name, "transcript", pattern, setup)
	if err != nil {
		return nil, err
	}
	if strings.Contains(p, "{playbook}") {
		if setup.PlaybookID == "" {
			return nil, fmt.Errorf("transcript driver: the path %q holds \"{playbook}\", and no playbook was named to replace it", pattern)
		}
		p = PathFor(p, setup.PlaybookID)
	}
	if setup.Path != nil {
		p = setup.Path(p)
	}
	t, err := Load(p)
	if err != nil {
		if p != pattern && strings.Contains(pattern, "${") {
			// The path holds a secret's value: never show it.
			return nil, fmt.Errorf("transcript driver: cannot read the transcript %q (its secret references expanded)", pattern)
		}
		return nil, err
	}
	return New(t), nil
}
