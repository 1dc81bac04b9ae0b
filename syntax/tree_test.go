package syntax

import (
	"fmt"
	"strings"
	"testing"
)

// TestTreeAPI checks the shapes of the tree: members with their names and
// places, elements, texts (escaped or not), parents, indexes and pointers.
func TestTreeAPI(t *testing.T) {
	src := []byte(`{"a": [1, "x\u0041", {"b~/c": true}], "\u00e9t\u00e9": "caf` + "\u00e9" + `", "n": null, "e": {}, "z": []}`)
	root, errs := Parse(src, Limits{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if root.Parent() != nil || root.Index() != -1 || root.Pointer() != "" {
		t.Errorf("root: parent %v, index %d, pointer %q", root.Parent(), root.Index(), root.Pointer())
	}
	if k, ok := root.Key(); ok || k != "" {
		t.Errorf("root key %q %v", k, ok)
	}
	var names []string
	for name, v := range root.Members() {
		names = append(names, name)
		if v.Parent() != root || src[v.NameOffset()] != '"' {
			t.Errorf("member %q: parent %p, name offset %d", name, v.Parent(), v.NameOffset())
		}
	}
	if got := strings.Join(names, ","); got != "a,été,n,e,z" || root.Len() != 5 {
		t.Errorf("members %q, Len %d", got, root.Len())
	}
	a := root.Member("a")
	if a.Kind != Array || a.Len() != 3 || a.Child(1).Text() != "xA" || a.Child(0).Text() != "1" {
		t.Fatalf("a: %v %d", a.Kind, a.Len())
	}
	for i, e := range a.Elems() {
		if e != a.Child(i) || e.Index() != i || e.Parent() != a || e.NameOffset() != int(e.Offset) {
			t.Errorf("element %d: index %d", i, e.Index())
		}
		if _, ok := e.Key(); ok {
			t.Errorf("element %d has a key", i)
		}
	}
	b := a.Child(2).Member("b~/c")
	if b == nil || !b.Bool() || b.Text() != "true" || b.Pointer() != "/a/2/b~0~1c" || b.Index() != 0 {
		t.Fatalf("b: %+v pointer %q", b, b.Pointer())
	}
	if v := root.Member("été"); v == nil || v.Text() != "café" || v.Pointer() != "/été" || v.Index() != 1 {
		t.Errorf("été: %v", v)
	}
	if n := root.Member("n"); n.Text() != "" || n.Len() != 0 || n.Kind != Null {
		t.Errorf("n: %q", n.Text())
	}
	for _, k := range []string{"e", "z"} {
		if c := root.Member(k); c.Len() != 0 || c.Text() != "" || c.Pointer() != "/"+k {
			t.Errorf("%s: Len %d", k, c.Len())
		}
	}
	// Iterators stop when asked, and yield nothing for the other kind.
	for range root.Elems() {
		t.Error("Elems of an object yielded")
	}
	for range a.Members() {
		t.Error("Members of an array yielded")
	}
	for range root.Members() {
		break
	}
	// A copy is not in the tree.
	c := *b
	if c.Parent() != nil || c.Pointer() != "" || c.Index() != -1 || c.Text() != "true" {
		t.Errorf("copy: %q", c.Pointer())
	}
	var zero Node
	if zero.Pointer() != "" || zero.Parent() != nil || zero.Text() != "" || zero.Len() != 0 {
		t.Error("zero node")
	}
}

// TestTreeLarge checks containers past the node's own child count and
// pointers deep in them.
func TestTreeLarge(t *testing.T) {
	const n = 70_000
	var b strings.Builder
	b.WriteString(`{"big": [`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"k%d": %d}`, i, i)
	}
	b.WriteString(`], "obj": {`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"m%d": "v\n%d"`, i, i)
	}
	b.WriteString(`}}`)
	root, errs := Parse([]byte(b.String()), Limits{})
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
	big := root.Member("big")
	if big.Len() != n {
		t.Fatalf("Len %d", big.Len())
	}
	last := big.Child(n - 1).Member(fmt.Sprintf("k%d", n-1))
	if last == nil || last.Text() != fmt.Sprint(n-1) || last.Pointer() != fmt.Sprintf("/big/%d/k%d", n-1, n-1) {
		t.Fatalf("last: %v", last)
	}
	obj := root.Member("obj")
	if obj.Len() != n || obj.Child(n-1).Text() != fmt.Sprintf("v\n%d", n-1) || obj.Child(n-1).Index() != n-1 {
		t.Fatalf("obj: %d", obj.Len())
	}
}

// TestTreeTruncated checks pointers in a tree cut off by a syntax error.
func TestTreeTruncated(t *testing.T) {
	root, errs := Parse([]byte(`{"a": [{"b": 1}, {"c": [true, `), Limits{})
	if !Truncated(errs) || root == nil {
		t.Fatal(errs)
	}
	c := root.Member("a").Child(1).Member("c")
	if c.End != c.Offset || c.Len() != 1 || c.Child(0).Pointer() != "/a/1/c/0" {
		t.Fatalf("c: %+v", c)
	}
	if errs[0].Pointer == "" {
		t.Errorf("error without a pointer: %+v", errs[0])
	}
}
