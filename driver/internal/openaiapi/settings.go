package openaiapi

import "github.com/openplaybook/openplaybook/driver/internal/settings"

// SettingNames are the settings of a harness binding of either OpenAI
// driver ({driver: openai | openai-responses, ...}).
var SettingNames = []string{"model", "baseURL", "apiKeySecret", "temperature", "images", "maxTurns", "maxRetries", "timeout", "stepTimeout", "maxResultBytes"}

// Settings are an OpenAI driver binding's settings as read: the common
// ones (package settings) and "temperature" (0 to 2) and "images" (true
// or false; nil when not given).
type Settings struct {
	settings.Common
	Temperature *float64
	Images      *bool
}

// ParseSettings reads the settings m of driver driver (its Name);
// model names an example model for the message of a missing "model".
func ParseSettings(driver, model string, m map[string]any) (Settings, error) {
	r := settings.New(driver, m, SettingNames...)
	var s Settings
	s.Common = r.Common(`the model to run, such as "`+model+`"`, func() {
		s.Temperature = r.Float("temperature", 0, 2)
		s.Images = r.Bool("images")
	})
	return s, r.Err()
}

// NoImages reports whether the binding turned images off.
func (s Settings) NoImages() bool { return s.Images != nil && !*s.Images }
