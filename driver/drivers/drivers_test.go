package drivers_test

import (
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/driver/anthropic"
	"github.com/openplaybook/openplaybook/driver/drivers"
	"github.com/openplaybook/openplaybook/driver/openai"
	"github.com/openplaybook/openplaybook/driver/openairesponses"
	"github.com/openplaybook/openplaybook/driver/transcript"
)

func TestNewAndCheck(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]any
		want     string // error substring; "" for none
	}{
		{"openai", map[string]any{"model": "llama3.1", "baseURL": "http://127.0.0.1:11434/v1"}, ""},
		{"anthropic", map[string]any{"model": "claude", "baseURL": "http://127.0.0.1:9/"}, ""},
		{"transcript", map[string]any{"transcript": "x.json"}, ""},
		{"openai", map[string]any{}, `openai driver: setting "model" is required`},
		{"openai-responses", map[string]any{"model": "gpt-5", "baseURL": "http://127.0.0.1:9/v1"}, ""},
		{"openai-responses", map[string]any{"model": "gpt-5", "maxTokens": 1}, `openai-responses driver: unknown setting "maxTokens"`},
		{"openai_responses", map[string]any{}, `(did you mean "openai-responses"?)`},
		{"OpenAI", map[string]any{}, `unknown driver "OpenAI" (did you mean "openai"?); the drivers are "anthropic", "mcp", "openai", "openai-responses", "transcript"`},
		{"transcipt", map[string]any{}, `(did you mean "transcript"?)`},
	} {
		err := drivers.Check(tc.name, tc.settings)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Check(%q, %v) = %v, want %q", tc.name, tc.settings, err, tc.want)
		}
	}
	d, err := drivers.New("openai", map[string]any{"model": "llama3.1", "baseURL": "http://127.0.0.1:11434/v1"}, nil)
	if _, ok := d.(*openai.Driver); !ok || err != nil {
		t.Errorf("New(openai) = %T, %v", d, err)
	}
	d, err = drivers.New("openai-responses", map[string]any{"model": "gpt-5", "baseURL": "http://127.0.0.1:9/v1"}, nil)
	if _, ok := d.(*openairesponses.Driver); !ok || err != nil {
		t.Errorf("New(openai-responses) = %T, %v", d, err)
	}
	d, err = drivers.New("anthropic", map[string]any{"model": "claude", "baseURL": "http://127.0.0.1:9"}, nil)
	if _, ok := d.(*anthropic.Driver); !ok || err != nil {
		t.Errorf("New(anthropic) = %T, %v", d, err)
	}
	d, err = drivers.New("transcript", map[string]any{"transcript": "../../examples/transcripts/rita.json"}, nil)
	if err == nil {
		if _, ok := d.(*transcript.Driver); !ok {
			t.Errorf("New(transcript) = %T", d)
		}
	}
	if _, err := drivers.New("gemini", nil, nil); err == nil {
		t.Error("New(gemini): no error")
	}
}
