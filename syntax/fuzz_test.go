package syntax

import (
	"testing"
)

// FuzzParse checks the reader alone (fast, so it explores the JSON grammar
// deeply): it never panics, positions stay inside the input, and an input
// the reader accepts without errors has a root.
//
//	go test ./syntax -run '^$' -fuzz FuzzParse -fuzztime 5m
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,true,null,"x"]}`, `{"a":1,"a":2}`, `{"allowed\u0054ools":1}`, "\xEF\xBB\xBF{}",
		"{\"a\":1 // c\n}", `{"a":[1,],}`, `{"a":NaN}`, `{"a":"\ud800"}`, `[[[[[[]]]]]]`, `{"a":1} x`, `"\u0000"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		root, errs := Parse(src, Limits{MaxDepth: 32})
		for _, e := range errs {
			if e.Offset < 0 || e.Offset > len(src) || e.Rule == "" || e.Message == "" {
				t.Fatalf("bad error %+v for %q", e, src)
			}
		}
		if len(errs) == 0 && root == nil {
			t.Fatalf("no error and no root for %q", src)
		}
		Walk(root, func(n *Node) bool {
			if n.Offset < 0 || int(n.End) > len(src) || n.End < n.Offset {
				t.Fatalf("node %+v outside the input %q", n, src)
			}
			_ = n.Pointer()
			return true
		})
	})
}
