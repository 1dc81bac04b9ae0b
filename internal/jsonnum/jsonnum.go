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
	if bytes.IndexAny(v, "eE") < 0 && len(v) < 300 {
		return "", false // no exponent and short: every literal fits
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
