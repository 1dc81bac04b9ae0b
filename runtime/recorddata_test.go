package runtime

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
)

// TestDecodePlainMatches: on the data objects the runtime writes and on
// random objects built from their members, spoiled at random (other
// types, case, escapes, duplicates, nesting, numbers that are not small
// integers, broken JSON), decodePlain either declines or gives exactly
// what json.Unmarshal gives; and it takes the usual records.
func TestDecodePlainMatches(t *testing.T) {
	usual := []string{
		`{"index":0,"attempt":1,"argsDigest":"e9f7","defDigest":"31db","sideEffecting":false}`,
		`{"attempt":1,"index":0,"resultDigest":"4062"}`,
		`{"playbook":"auditgen","version":"1.0.0","documentDigest":"eea2","inputDigest":"4413"}`,
		`{"attempt":1}`, `{}`, ` { "attempt" : 12 , "reason" : "no" } `,
		`{"attempt":1,"index":3,"approval":"apr_1","code":"E","reason":"why","by":"op","sideEffecting":true}`,
	}
	for _, in := range usual {
		var plain recordData
		if !plain.decodePlain([]byte(in)) {
			t.Errorf("decodePlain declined the usual %s", in)
		}
		checkDecode(t, in, true)
	}
	names := []string{"approval", "argsDigest", "storedArgsDigest", "bindDigest", "defDigest", "sideEffecting", "attempt", "index",
		"playbook", "version", "documentDigest", "harnessDigest", "inputDigest", "resultDigest", "outputDigest", "code", "reason", "by",
		"Attempt", "INDEX", "other", "by\\u0041", "é"}
	values := []string{`"x"`, `"a b"`, `""`, `0`, `7`, `-3`, `123456789`, `1234567890`, `01`, `-0`, `1.5`, `1e2`, `true`, `false`, `null`,
		`{}`, `[1]`, `"\u00e9"`, `"\n"`, `"é"`, `tru`, `"x`, `--1`, `-`}
	rng := rand.New(rand.NewPCG(7, 20))
	taken := 0
	for range 20000 {
		var b strings.Builder
		b.WriteString(often(rng, "{", " {", "", "["))
		for i := range rng.IntN(5) {
			if i > 0 {
				b.WriteString(often(rng, ",", " , ", ",,", ""))
			}
			// Mostly the runtime's names, each with a value of its type.
			name := names[rng.IntN(18)]
			value := values[rng.IntN(3)] // a string
			switch name {
			case "attempt", "index":
				value = values[3+rng.IntN(4)]
			case "sideEffecting":
				value = values[12+rng.IntN(2)]
			}
			if rng.IntN(4) == 0 {
				name = names[rng.IntN(len(names))]
			}
			if rng.IntN(4) == 0 {
				value = values[rng.IntN(len(values))]
			}
			fmt.Fprintf(&b, `"%s"%s%s`, name, often(rng, ":", " : ", ""), value)
		}
		b.WriteString(often(rng, "}", "} ", "", "}x", "}}"))
		if checkDecode(t, b.String(), false) {
			taken++
		}
	}
	t.Logf("decodePlain took %d of 20000 random objects", taken)
	if taken < 1000 || taken > 19000 {
		t.Fatalf("decodePlain took %d of 20000 random objects: the test does not try both paths", taken)
	}
}

// checkDecode fails t when decodePlain takes in and decodes it otherwise
// than json.Unmarshal (an input Unmarshal fails on must be declined),
// and reports whether it took it.
func checkDecode(t *testing.T, in string, mustTake bool) bool {
	t.Helper()
	var plain, general recordData
	took := plain.decodePlain([]byte(in))
	err := json.Unmarshal([]byte(in), &general)
	switch {
	case !took && mustTake:
		t.Errorf("decodePlain declined %s", in)
	case took && err != nil:
		t.Errorf("decodePlain took %s, which json.Unmarshal refuses (%v)", in, err)
	case took && !reflect.DeepEqual(plain, general):
		t.Errorf("decodePlain(%s) = %+v, json.Unmarshal %+v", in, plain, general)
	}
	return took
}

// often returns the first of choices nine times in ten, else one of
// the others.
func often(rng *rand.Rand, choices ...string) string {
	if rng.IntN(10) > 0 {
		return choices[0]
	}
	return choices[1+rng.IntN(len(choices)-1)]
}
