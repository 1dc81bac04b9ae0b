package syntax

import (
	"strconv"
	"strings"
	"testing"
)

func TestParseHazards(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string // rule@offset, in order
		ptr       string   // pointer of the first error, if checked
	}{
		{"ok", `{"a":[1,true,null,"x"]}`, nil, ""},
		{"duplicate", `{"a":1,"a":2}`, []string{"duplicate-member@7"}, "/a"},
		{"escaped duplicate", `{"allowedTools":1,"allowed\u0054ools":2}`, []string{"duplicate-member@18"}, "/allowedTools"},
		{"nested duplicate", `{"s":[{"id":"a","id":"b"}]}`, []string{"duplicate-member@16"}, "/s/0/id"},
		{"invalid utf8", "{\"a\":\"x\xffy\"}", []string{"invalid-utf8@7"}, "/a"},
		{"lone surrogate", `{"a":"\ud800"}`, []string{"invalid-utf8@6"}, "/a"},
		{"bom", "\xEF\xBB\xBF{\"a\":1}", []string{"byte-order-mark@0"}, ""},
		{"line comment", "{\"a\":1 // note\n}", []string{"comment@7"}, ""},
		{"block comment", "{/* x */\"a\":1}", []string{"comment@1"}, ""},
		{"comment chars in string are fine", `{"a":"// not a comment, /* nor this */"}`, nil, ""},
		{"trailing comma object", `{"a":1,}`, []string{"trailing-comma@6"}, ""},
		{"trailing comma array", `{"a":[1,2 , ]}`, []string{"trailing-comma@10"}, ""},
		{"trailing data", `{"a":1} {"b":2}`, []string{"trailing-data@8"}, ""},
		{"trailing garbage", `{"a":1}x`, []string{"trailing-data@7"}, ""},
		{"nan", `{"a":NaN,"b":-Infinity}`, []string{"non-finite-number@5", "non-finite-number@13"}, ""},
		{"syntax", `{"a" 1}`, []string{"syntax@5"}, ""},
		{"cut off", `{"a":[1,`, []string{"syntax@8"}, ""},
		{"single quotes", `{'a':1}`, []string{"syntax@1"}, ""},
		{"empty", ``, []string{"syntax@0"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := Parse([]byte(tt.src), Limits{})
			var got []string
			for _, e := range errs {
				got = append(got, e.Rule+"@"+strconv.Itoa(e.Offset))
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("Parse(%q) errors = %v, want %v (%+v)", tt.src, got, tt.want, errs)
			}
			if tt.ptr != "" && errs[0].Pointer != tt.ptr {
				t.Errorf("pointer = %q, want %q", errs[0].Pointer, tt.ptr)
			}
		})
	}
}

func TestParseKeepsGoingAfterRepairs(t *testing.T) {
	root, errs := Parse([]byte("{\n // c\n \"a\": [1,],\n \"b\": NaN,\n \"c\": \"ok\"\n}"), Limits{})
	if len(errs) != 3 {
		t.Fatalf("want 3 errors, got %+v", errs)
	}
	if got := root.Member("c"); got == nil || got.Text() != "ok" {
		t.Fatalf("member c after repairs = %+v, want \"ok\"", got)
	}
}

func TestParsePartialTreeAfterFatal(t *testing.T) {
	root, errs := Parse([]byte(`{"a":"kept","b":[1,2,`), Limits{})
	if len(errs) != 1 || errs[0].Rule != RuleSyntax {
		t.Fatalf("errors = %+v", errs)
	}
	if root.Member("a") == nil || root.Member("a").Text() != "kept" {
		t.Fatalf("partial tree lost member a: %+v", root)
	}
}

func TestLimits(t *testing.T) {
	deep := strings.Repeat("[", 10) + strings.Repeat("]", 10)
	_, errs := Parse([]byte(deep), Limits{MaxDepth: 5})
	if len(errs) != 1 || errs[0].Rule != RuleLimit || errs[0].Offset != 5 {
		t.Errorf("depth: %+v", errs)
	}
	_, errs = Parse([]byte(`{"a":"`+strings.Repeat("x", 100)+`"}`), Limits{MaxString: 10})
	if len(errs) != 1 || errs[0].Rule != RuleLimit || errs[0].Pointer != "/a" {
		t.Errorf("string: %+v", errs)
	}
	root, errs := Parse([]byte(`[1,2,3,4,5,6]`), Limits{MaxArray: 4})
	if len(errs) != 1 || errs[0].Rule != RuleLimit || root.Len() != 4 {
		t.Errorf("array: %+v", errs)
	}
	_, errs = Parse([]byte(`{"a":1}`), Limits{MaxSize: 3})
	if len(errs) != 1 || errs[0].Rule != RuleLimit {
		t.Errorf("size: %+v", errs)
	}
	// jsontext's own hard limit is far above ours; a very deep document must
	// be a diagnostic, not a crash.
	huge := strings.Repeat("[", 100000)
	if _, errs := Parse([]byte(huge), Limits{}); len(errs) == 0 {
		t.Errorf("deep unterminated: no error")
	}
}

func TestPointerAndPosition(t *testing.T) {
	src := "{\n  \"s\": [\n    {\"a/b~c\": 1}\n  ]\n}"
	root, errs := Parse([]byte(src), Limits{})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	v := root.Member("s").Child(0).Child(0)
	if got := v.Pointer(); got != "/s/0/a~1b~0c" {
		t.Errorf("pointer = %q", got)
	}
	line, col := NewLines([]byte(src)).Position(int(v.Offset))
	if line != 3 || col != 15 {
		t.Errorf("position = %d:%d, want 3:15", line, col)
	}
}
