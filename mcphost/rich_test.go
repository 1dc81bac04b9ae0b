package mcphost_test

import (
	"context"
	"slices"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/mcphost"
)

// TestRichContent: a result whose content holds an image, a resource link
// or an embedded resource (and no structuredContent) is kept as MCP sent
// it, {"content": [...]}, so the step's output and the model see it; a
// text-only result stays text.
func TestRichContent(t *testing.T) {
	t.Parallel()
	const content = `[{"type":"text","text":"the chart"},{"type":"image","mimeType":"image/png","data":"iVBORw0KGgo="},` +
		`{"type":"resource_link","uri":"file:///r.csv","name":"r.csv","mimeType":"text/csv"},` +
		`{"type":"resource","resource":{"uri":"file:///n.txt","mimeType":"text/plain","text":"notes"}}]`
	cfg, _ := hostileHTTPServer(t, `{"jsonrpc":"2.0","id":@ID@,"result":{"content":`+content+`}}`, false)
	s := connect(t, cfg)
	canon := func(v []byte) string {
		c := jsontext.Value(slices.Clone(v))
		if err := c.Canonicalize(); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		return string(c)
	}
	want := `{"content":` + content + `}`
	out, err := s.RegistryTool(tools(t, s)["t"]).Call(context.Background(), []byte(`{}`))
	if err != nil || canon(out.Content) != canon([]byte(want)) {
		t.Fatalf("registry call = %s, %v\nwant %s", out.Content, err, want)
	}
	res, err := s.Call(context.Background(), "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Content = res.Content[:1]
	if got, err := mcphost.ResultJSON(res); err != nil || string(got) != `"the chart"` {
		t.Errorf("text only: %s, %v", got, err)
	}
}
