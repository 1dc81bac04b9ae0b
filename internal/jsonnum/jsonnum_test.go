package jsonnum

import (
	"strings"
	"testing"
)

func TestOutOfRange(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want string
	}{
		{`{"a":1,"b":[2.5,-3e10]}`, ""},
		{`{"minimum":1e9999999}`, "1e9999999"},
		{`{"maximum":1e-99999999999}`, "1e-99999999999"},
		{`[0, 0.0, 0e10, -0]`, ""},
		{`{"n":1e999}`, "1e999"},
		{`{"n":1.7976931348623157e308}`, ""},
		{`{"s":"1e999"}`, ""},
		{`{"t":true,"f":false,"n":2.5E+3}`, ""},
		{`{"t":true,"n":2.5E+999}`, "2.5E+999"},
		{`[` + strings.Repeat("9", 400) + `]`, strings.Repeat("9", 400)},
	} {
		got, ok := OutOfRange([]byte(tt.in))
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("OutOfRange(%s) = %q, %v; want %q", tt.in, got, ok, tt.want)
		}
	}
}
