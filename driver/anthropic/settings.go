package anthropic

import (
	"fmt"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/internal/settings"
)

// The settings of a harness binding {driver: anthropic, ...}.
var settingNames = []string{"model", "baseURL", "apiKeySecret", "maxTokens", "maxTurns", "maxRetries"}

type rawSettings struct {
	model, baseURL, keySecret       string
	maxTokens, maxTurns, maxRetries int
}

func parseSettings(m map[string]any) (rawSettings, error) {
	r := settings.New(Name, m, settingNames...)
	var s rawSettings
	s.model = r.String("model", true, `the model to run, such as "claude-sonnet-4-5"`)
	s.baseURL = r.String("baseURL", false, "the API's base URL")
	s.keySecret = r.SecretName("apiKeySecret")
	s.maxTokens, _ = r.Int("maxTokens", 1)
	s.maxTurns, _ = r.Int("maxTurns", 1)
	if n, ok := r.Int("maxRetries", 0); ok {
		s.maxRetries = n
		if n == 0 {
			s.maxRetries = -1
		}
	}
	return s, r.Err()
}

// CheckSettings checks an agent binding's settings without resolving
// secrets or sending anything: "model" (required, a string), "baseURL"
// (a string), "apiKeySecret" (a secret's name), "maxTokens" (at least 1,
// default 4096), "maxTurns" (at least 1), "maxRetries" (at least 0), and
// no other setting.
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
	if setup == nil {
		setup = &driver.Setup{}
	}
	cfg := Config{MaxTokens: s.maxTokens, MaxTurns: s.maxTurns, MaxRetries: s.maxRetries, HTTPClient: setup.HTTPClient}
	if cfg.Model, err = settings.Expand(Name, "model", s.model, setup); err != nil {
		return nil, err
	}
	if cfg.BaseURL, err = settings.Expand(Name, "baseURL", s.baseURL, setup); err != nil {
		return nil, err
	}
	if s.keySecret == "" && s.baseURL == "" {
		return nil, settings.Missing(Name, "apiKeySecret", "the name of the secret that holds the Anthropic API key, such as ANTHROPIC_API_KEY; only a server at a baseURL of your own may need none")
	}
	if s.keySecret != "" {
		if cfg.APIKey, err = settings.Secret(Name, "apiKeySecret", s.keySecret, setup); err != nil {
			return nil, err
		}
	}
	d, err := New(cfg)
	if err != nil && cfg.BaseURL != s.baseURL {
		// The base URL holds a secret's value: never show it.
		return nil, fmt.Errorf("anthropic driver: setting \"baseURL\" (its secret references expanded) is not a usable http(s) URL")
	}
	return d, err
}
