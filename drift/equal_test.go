package drift

import (
	"bytes"
	"strings"
	"testing"
)

func TestSameValue(t *testing.T) {
	cases := []struct {
		a, b string
		same bool
	}{
		{`{"a":1,"b":[true,false,null]}`, `{ "b" : [ true , false , null ] , "a" : 1 }`, true},
		{`{"a":{"y":1,"x":2},"b":"s"}`, `{"b":"s","a":{"x":2,"y":1}}`, true},
		{`[1, 1.0, 1e0, 10, -0.5]`, `[1.0, 1, 1E0, 1e1, -5e-1]`, true},
		{`{}`, `{ }`, true},
		{`[]`, `[ ]`, true},
		{`"é"`, `"é"`, true},
		{entitySchema, compact(entitySchema), true},

		{`{"a":1}`, `{"a":2}`, false},
		{`{"a":1}`, `{"b":1}`, false},
		{`{"a":1}`, `{"a":1,"b":1}`, false},
		{`[1,2]`, `[2,1]`, false},
		{`"a"`, `"b"`, false},
		{`true`, `false`, false},
		{`null`, `false`, false},
		{`1`, `"1"`, false},
		{`{"a":[1]}`, `{"a":{"0":1}}`, false},
		// Unproven, left to the parser: escapes, repeats, invalid text.
		{`"A"`, `"\u0041"`, false},
		{`{"\u0061":1}`, `{"\u0061":1}`, false},
		{`{"a":1,"a":1}`, `{"a":1,"a":1}`, false},
		{`{"a":1,}`, `{"a":1,}`, false},
		{`[01]`, `[01]`, false},
		{`[1.]`, `[1.]`, false},
		{`tru`, `tru`, false},
		{`"a` + "\x01" + `"`, `"a` + "\x01" + `"`, false},
		{"\"\xff\"", "\"\xff\"", false},
		{`{"a":1} x`, `{"a":1} x`, false},
		{`1e999`, `1e999`, false}, // out of range for the parser
		{`"\ud83d\ude00"`, `"\ud83d\ude00"`, true},
		{`"\ud800"`, `"\ud800"`, false},
		{`"\ude00"`, `"\ude00"`, false},
		{`"\ud800\u0041"`, `"\ud800\u0041"`, false},
		{``, ``, false},
		{strings.Repeat("[", 600) + strings.Repeat("]", 600), strings.Repeat("[", 600) + strings.Repeat("]", 600), false},
	}
	for _, c := range cases {
		if got := sameValue([]byte(c.a), []byte(c.b)); got != c.same {
			t.Errorf("sameValue(%q, %q) = %v", c.a, c.b, got)
		}
		if got := sameValue([]byte(c.b), []byte(c.a)); got != c.same {
			t.Errorf("sameValue(%q, %q) = %v (swapped)", c.b, c.a, got)
		}
	}
}

func TestSameValueAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	docs, regs := typicalPairs(1, "order")
	a, b := docs[0].InputSchema, regs[0].InputSchema
	if !sameValue(a, b) {
		t.Fatal("reordered schema not proven equal")
	}
	if n := testing.AllocsPerRun(100, func() { sameValue(a, b) }); n > 0 {
		t.Errorf("sameValue allocates %v times per call", n)
	}
}

// TestSameValueSound changes one byte of a schema at every position, in
// several ways, and holds sameValue to the parser: whatever it proves
// equal parses to equal values.
func TestSameValueSound(t *testing.T) {
	docs, regs := typicalPairs(1, "order")
	for _, orig := range [][]byte{[]byte(entitySchema), docs[0].OutputSchema, regs[0].OutputSchema} {
		ov, err := parseSchema(orig)
		if err != nil {
			t.Fatal(err)
		}
		for i := range orig {
			for _, c := range []byte{' ', '0', '1', 'e', '.', '"', '\\', ',', '}', ']', 'a', '-', 0x80} {
				m := bytes.Clone(orig)
				m[i] = c
				if !sameValue(orig, m) {
					continue
				}
				mv, err := parseSchema(m)
				if err != nil || !equal(ov, mv) {
					t.Fatalf("sameValue proved equal a text the parser reads otherwise (byte %d set to %q): %v", i, c, err)
				}
			}
		}
	}
}
