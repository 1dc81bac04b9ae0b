// Package jsonnum finds JSON numbers that do not fit a 64-bit float.
//
// JSON (RFC 8259) allows numbers of any size, but JSON Schema validators
// and most consumers read them as IEEE 754 doubles (RFC 8259 section 6:
// "good interoperability can be achieved by implementations that expect no
// more precision or range than these provide"). A schema keyword such as
// "minimum": 1e9999999 is then silently dropped by a validator, and an
// argument 1e999 becomes 1.7976931348623157e+308: both change what is
// checked or sent. openplaybook refuses such numbers instead.
package jsonnum

import (
	"bytes"
	"errors"
	"io"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// OutOfRange returns the first number literal in the JSON text v whose
// magnitude overflows a float64 or that underflows to zero without being
// zero, and true; or "", false when there is none (or v is not JSON: the
// caller reports that).
func OutOfRange(v []byte) (string, bool) {
	if !mayOverflow(v) {
		return "", false
	}
	d := jsontext.NewDecoder(bytes.NewReader(v), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	for {
		if d.PeekKind() != '0' {
			if _, err := d.ReadToken(); err != nil {
				if errors.Is(err, io.EOF) {
					return "", false
				}
				return "", false
			}
			continue
		}
		raw, err := d.ReadValue()
		if err != nil {
			return "", false
		}
		if bad(string(raw)) {
			return string(raw), true
		}
	}
}

// Bad reports whether one number literal does not fit a float64.
func Bad(lit string) bool { return bad(lit) }

func bad(lit string) bool {
	f, err := strconv.ParseFloat(lit, 64)
	if errors.Is(err, strconv.ErrRange) {
		return true
	}
	if f == 0 {
		// Underflow: a non-zero literal that reads as 0.
		for i := 0; i < len(lit); i++ {
			c := lit[i]
			if c == 'e' || c == 'E' {
				break
			}
			if c >= '1' && c <= '9' {
				return true
			}
		}
	}
	return false
}

// mayOverflow is a quick scan: false when no number literal of v has an
// exponent or 300 or more digits (strings are skipped, so an "e" in a
// member name costs nothing), true when one might not fit.
func mayOverflow(v []byte) bool {
	run := 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			run = 0
			for i++; i < len(v) && v[i] != '"'; i++ {
				if v[i] == '\\' {
					i++
				}
			}
		case (c == 'e' || c == 'E') && run > 0:
			return true // an exponent (the e of true and false follows no digit)
		case c >= '0' && c <= '9' || c == '.' && run > 0:
			run++
			if run >= 300 {
				return true
			}
		default:
			run = 0
		}
	}
	return false
}
