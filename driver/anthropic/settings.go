package anthropic

import (
	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/internal/settings"
)

// The settings of a harness binding {driver: anthropic, ...}.
var settingNames = []string{"model", "baseURL", "apiKeySecret", "maxTokens", "maxTurns", "maxRetries", "timeout", "stepTimeout", "maxResultBytes"}

type rawSettings struct {
	settings.Common
	maxTokens int
}

func parseSettings(m map[string]any) (rawSettings, error) {
	r := settings.New(Name, m, settingNames...)
	var s rawSettings
	s.Common = r.Common(`the model to run, such as "claude-sonnet-4-5"`, func() {
		s.maxTokens, _ = r.Int("maxTokens", 1)
	})
	return s, r.Err()
}

// CheckSettings checks an agent binding's settings without resolving
// secrets or sending anything: "model" (required, a string), "baseURL"
// (a string), "apiKeySecret" (a secret's name), "maxTokens" (at least 1,
// default 4096), "maxTurns" (at least 1), "maxRetries" (at least 0),
// "timeout" (a duration such as "60s", default 10m), "stepTimeout" (a
// duration; default none), "maxResultBytes" (at least 1, default 65536),
// and no other setting.
func CheckSettings(m map[string]any) error {
	_, err := parseSettings(m)
	return err
}

// FromSettings builds the driver of a harness binding
//
//	{driver: anthropic, model: claude-sonnet-4-5, apiKeySecret: ANTHROPIC_API_KEY}
//
// (see [CheckSettings] for every setting). The API key is the value of
// the secret apiKeySecret names (setup.Secret); without apiKeySecret no
// key is sent, which is an error for Anthropic's own API (no baseURL).
// Strings may hold ${secret:NAME} references (setup.Expand).
// setup.HTTPClient, when set, sends the requests. A nil setup means the
// zero [driver.Setup]. Errors name the setting, never a secret's value.
func FromSettings(m map[string]any, setup *driver.Setup) (*Driver, error) {
	s, err := parseSettings(m)
	if err != nil {
		return nil, err
	}
	res, err := s.Resolve(Name, "the name of the secret that holds the Anthropic API key, such as ANTHROPIC_API_KEY; only a server at a baseURL of your own may need none", setup)
	if err != nil {
		return nil, err
	}
	d, err := New(Config{
		Model: res.Model, BaseURL: res.BaseURL, APIKey: res.APIKey, HTTPClient: res.HTTPClient,
		MaxTokens: s.maxTokens, MaxTurns: s.MaxTurns, MaxRetries: s.MaxRetries, Timeout: s.Timeout,
		StepTimeout: s.StepTimeout, MaxResultBytes: s.MaxResultBytes, Binding: res.Binding,
	})
	if err != nil {
		return nil, s.NewError(Name, res, err)
	}
	return d, nil
}
