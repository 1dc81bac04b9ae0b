// Package settings reads an agent's settings from the harness file (a map
// of plain JSON values: string, json.Number, bool, nil, map, slice) for the
// drivers' FromSettings constructors, with errors that name the setting
// and never its value.
package settings

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/internal/suggest"
)

// Reader reads the settings of one agent binding and collects every
// problem, so one error lists them all.
type Reader struct {
	driver string
	m      map[string]any
	errs   []error
}

// New starts reading m for the driver named driverName. Keys not in known
// are problems, with a "did you mean"; "driver" is always known.
func New(driverName string, m map[string]any, known ...string) *Reader {
	r := &Reader{driver: driverName, m: m}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k == "driver" || slices.Contains(known, k) {
			continue
		}
		msg := fmt.Sprintf("unknown setting %q%s", k, suggest.Phrase(k, known))
		if credentialKey(k) && slices.Contains(known, "apiKeySecret") {
			msg = fmt.Sprintf("unknown setting %q; an API key is never written in the harness: name the secret that holds it in \"apiKeySecret\"", k)
		}
		r.errorf("%s; the settings of driver %q are %s", msg, driverName, quoteAll(known))
	}
	return r
}

func credentialKey(k string) bool {
	k = strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(k))
	return strings.Contains(k, "key") || strings.Contains(k, "token") || strings.Contains(k, "secret") || strings.Contains(k, "password")
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

func (r *Reader) errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

// Err returns every problem found, joined and prefixed with the driver's
// name, or nil.
func (r *Reader) Err() error {
	if len(r.errs) == 0 {
		return nil
	}
	msgs := make([]string, len(r.errs))
	for i, e := range r.errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%s driver: %s", r.driver, strings.Join(msgs, "; "))
}

// String returns the string setting key ("" when absent). what describes
// the setting for the error when it is required and missing.
func (r *Reader) String(key string, required bool, what string) string {
	v, ok := r.m[key]
	if !ok || v == nil {
		if required {
			r.errorf("setting %q is required (%s)", key, what)
		}
		return ""
	}
	s, ok := v.(string)
	if !ok {
		r.errorf("setting %q must be a string (%s), not %s", key, what, kind(v))
		return ""
	}
	if s == "" && required {
		r.errorf("setting %q must not be empty (%s)", key, what)
	}
	return s
}

// Int returns the whole-number setting key, at least min, and whether it
// is present.
func (r *Reader) Int(key string, min int) (int, bool) {
	f, ok := r.number(key)
	if !ok {
		return 0, false
	}
	if f != math.Trunc(f) || f < float64(min) || f > math.MaxInt32 {
		r.errorf("setting %q must be a whole number of at least %d", key, min)
		return 0, false
	}
	return int(f), true
}

// Float returns the number setting key, between min and max, or nil when
// it is absent.
func (r *Reader) Float(key string, min, max float64) *float64 {
	f, ok := r.number(key)
	if !ok {
		return nil
	}
	if f < min || f > max {
		r.errorf("setting %q must be a number from %g to %g", key, min, max)
		return nil
	}
	return &f
}

func (r *Reader) number(key string) (float64, bool) {
	v, ok := r.m[key]
	if !ok || v == nil {
		return 0, false
	}
	var f float64
	var err error
	switch n := v.(type) {
	case json.Number:
		f, err = strconv.ParseFloat(string(n), 64)
	case float64:
		f = n
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	default:
		r.errorf("setting %q must be a number, not %s", key, kind(v))
		return 0, false
	}
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		r.errorf("setting %q must be a finite number", key)
		return 0, false
	}
	return f, true
}

// Bool returns the boolean setting key, or nil when it is absent.
func (r *Reader) Bool(key string) *bool {
	v, ok := r.m[key]
	if !ok || v == nil {
		return nil
	}
	b, ok := v.(bool)
	if !ok {
		r.errorf("setting %q must be true or false, not %s", key, kind(v))
		return nil
	}
	return &b
}

// Duration returns the duration setting key, a Go duration string
// ("30s", "2m") greater than zero, or 0 when it is absent.
func (r *Reader) Duration(key string) time.Duration {
	v, ok := r.m[key]
	if !ok || v == nil {
		return 0
	}
	s, ok := v.(string)
	if !ok {
		r.errorf("setting %q must be a duration such as \"60s\" or \"2m\", not %s", key, kind(v))
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		r.errorf("setting %q must be a duration greater than zero, such as \"60s\" or \"2m\"", key)
		return 0
	}
	return d
}

// SecretName checks the setting key as a secret's name
// (^[A-Za-z_][A-Za-z0-9_]*$) and returns it ("" when absent).
func (r *Reader) SecretName(key string) string {
	s := r.String(key, false, "the name of the secret that holds the API key")
	if s == "" {
		return ""
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		// Never echo it: it may be the key itself.
		r.errorf("setting %q must be a secret's name (^[A-Za-z_][A-Za-z0-9_]*$, such as OPENAI_API_KEY), never the key itself", key)
		return ""
	}
	return s
}

func kind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case json.Number, float64, int, int64:
		return "a number"
	case bool:
		return "a boolean"
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%T", v)
}

// Expand expands the ${secret:NAME} references of setting key's value s
// with setup.Expand. Without an Expand function a value holding "${" is an
// error. The error names the setting, never a value.
func Expand(driverName, key, s string, setup *driver.Setup) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	if setup == nil || setup.Expand == nil {
		return "", fmt.Errorf("%s driver: setting %q holds a ${secret:NAME} reference, and no secrets were given to expand it", driverName, key)
	}
	v, err := setup.Expand(s)
	if err != nil {
		return "", fmt.Errorf("%s driver: setting %q: %w", driverName, key, err)
	}
	return v, nil
}

// Secret resolves the secret named name for setting key with
// setup.Secret.
func Secret(driverName, key, name string, setup *driver.Setup) (string, error) {
	if setup == nil || setup.Secret == nil {
		return "", fmt.Errorf("%s driver: setting %q names the secret %q, and no secrets were given to resolve it", driverName, key, name)
	}
	v, err := setup.Secret(name)
	if err != nil {
		return "", fmt.Errorf("%s driver: setting %q: %w", driverName, key, err)
	}
	if v == "" {
		return "", fmt.Errorf("%s driver: setting %q: secret %q is empty", driverName, key, name)
	}
	return v, nil
}

// Missing returns the error for a setting that is required here.
func Missing(driverName, key, what string) error {
	return fmt.Errorf("%s driver: setting %q is required (%s)", driverName, key, what)
}
