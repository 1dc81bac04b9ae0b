package driver_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/openplaybook/openplaybook/driver"
)

func TestTransient(t *testing.T) {
	pe := func(status int) error { return &driver.ProviderError{Provider: "p", StatusCode: status} }
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{pe(408), true}, {pe(409), true}, {pe(429), true}, {pe(500), true}, {pe(503), true},
		{pe(400), false}, {pe(401), false}, {pe(403), false}, {pe(404), false},
		{fmt.Errorf("step: %w", pe(502)), true},
		{&driver.ReplyError{Provider: "p", Code: driver.ReplyTruncated}, false},
		{driver.ErrTurnLimit, false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
		{errors.New("boom"), false},
	} {
		if got := driver.Transient(tc.err); got != tc.want {
			t.Errorf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestUnknownModelError(t *testing.T) {
	err := error(&driver.UnknownModelError{Provider: "anthropic", Model: "claude-x", BaseURL: "https://api.anthropic.com", Listed: -1})
	if want := `anthropic: the API at https://api.anthropic.com does not know the model "claude-x"`; err.Error() != want || !errors.Is(err, driver.ErrUnknownModel) {
		t.Errorf("err = %v, want %s", err, want)
	}
}
