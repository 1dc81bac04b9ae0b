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
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// OutOfRange returns the first number literal in the JSON text v that a
// float64 does not hold exactly as written (its magnitude overflows, it
// underflows to zero without being zero, or it has more precision than a
// double keeps, so that it would read as another number), and true; or "", false when there is none (or v is not JSON: the
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
	if err == nil && !sameDecimal(lit, strconv.FormatFloat(f, 'e', -1, 64)) {
		return true // the double is another number: 100.0000000000000001 reads as 100
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
// exponent or more than 15 digits (a double keeps any 15 significant
// digits exactly) (strings are skipped, so an "e" in a
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
			if run > 15 {
				return true // more digits than a double always keeps
			}
		default:
			run = 0
		}
	}
	return false
}

// sameDecimal reports whether two number literals are the same decimal
// value (1.50 and 15e-1 are; 100.0000000000000001 and 1e2 are not).
func sameDecimal(a, b string) bool {
	sa, da, ea := decimal(a)
	sb, db, eb := decimal(b)
	if da == "" && db == "" {
		return true // both zero, whatever the sign
	}
	return sa == sb && da == db && ea == eb
}

// decimal splits a number literal into its sign, its significant digits
// without leading or trailing zeros, and the exponent of the last of
// them ("" digits for zero).
func decimal(lit string) (neg bool, digits string, exp int) {
	if strings.HasPrefix(lit, "-") {
		neg, lit = true, lit[1:]
	}
	mant, e, _ := strings.Cut(strings.ToLower(lit), "e")
	if e != "" {
		exp, _ = strconv.Atoi(e)
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits = intPart + frac
	exp -= len(frac)
	digits = strings.TrimLeft(digits, "0")
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	return neg, trimmed, exp
}
