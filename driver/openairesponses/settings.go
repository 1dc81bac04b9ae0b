package openairesponses

import (
	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/internal/openaiapi"
)

func parseSettings(m map[string]any) (openaiapi.Settings, error) {
	return openaiapi.ParseSettings(Name, "gpt-5", m)
}

// CheckSettings checks an agent binding's settings without resolving
// secrets or sending anything: "model" (required, a string), "baseURL"
// (a string), "apiKeySecret" (a secret's name), "temperature" (0 to 2),
// "images" (true or false, default true), "maxTurns" (at least 1),
// "maxRetries" (at least 0), "timeout" (a duration such as "60s",
// default 60s), "stepTimeout" (a duration; default none),
// "maxResultBytes" (at least 1, default 65536), and no other setting.
func CheckSettings(m map[string]any) error {
	_, err := parseSettings(m)
	return err
}

// FromSettings builds the driver of a harness binding
//
//	{driver: openai-responses, model: gpt-5, baseURL: https://api.openai.com/v1, apiKeySecret: OPENAI_API_KEY}
//
// (see [CheckSettings] for every setting). The API key is the value of
// the secret apiKeySecret names (setup.Secret); without apiKeySecret no
// key is sent, which suits local servers, and is an error for OpenAI's
// own API (no baseURL). Strings may hold ${secret:NAME} references
// (setup.Expand). setup.HTTPClient, when set, sends the requests. A nil
// setup means the zero [driver.Setup]. Errors name the setting, never a
// secret's value.
func FromSettings(m map[string]any, setup *driver.Setup) (*Driver, error) {
	s, err := parseSettings(m)
	if err != nil {
		return nil, err
	}
	res, err := s.Resolve(Name, "the name of the secret that holds the OpenAI API key, such as OPENAI_API_KEY; only a server at a baseURL of your own may need none", setup)
	if err != nil {
		return nil, err
	}
	d, err := New(Config{
		Model: res.Model, BaseURL: res.BaseURL, APIKey: res.APIKey, HTTPClient: res.HTTPClient,
		Temperature: s.Temperature, NoImages: s.NoImages(), MaxTurns: s.MaxTurns, MaxRetries: s.MaxRetries, Timeout: s.Timeout,
		StepTimeout: s.StepTimeout, MaxResultBytes: s.MaxResultBytes, Binding: res.Binding,
	})
	if err != nil {
		return nil, s.NewError(Name, res, err)
	}
	return d, nil
}
