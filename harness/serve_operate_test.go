package harness_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/harness"
)

// TestServePublicURLAndProxies: serve.publicURL and serve.trustedProxies
// are read; a URL with a path and a proxy that is a host name are errors
// at their place saying what to write.
func TestServePublicURLAndProxies(t *testing.T) {
	h, ds := harness.Parse("h.yaml", []byte("serve:\n  publicURL: https://playbooks.example.com\n  trustedProxies: [10.0.0.0/8, 127.0.0.1]\n"), t.TempDir())
	if len(ds) != 0 || h.Serve.PublicURL != "https://playbooks.example.com" || !slices.Equal(h.Serve.TrustedProxies, []string{"10.0.0.0/8", "127.0.0.1"}) {
		t.Fatalf("%+v %v", h.Serve, ds)
	}
	for _, c := range []struct{ src, want string }{
		{"serve:\n  publicURL: https://playbooks.example.com/sub\n", "no path"},
		{"serve:\n  trustedProxies: [proxy.local]\n", "IP address or a CIDR prefix"},
	} {
		_, ds := harness.Parse("h.yaml", []byte(c.src), t.TempDir())
		if len(ds) != 1 || !strings.Contains(ds[0].Message, c.want) || ds[0].Line != 2 {
			t.Errorf("%q: %v, want one error on line 2 saying %q", c.src, ds, c.want)
		}
	}
}
