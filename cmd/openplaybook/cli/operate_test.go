package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestServeOperateUsage: the operate flags and the environment forms of
// serve's flags are read, and a bad value is a usage error naming the
// flag or the variable.
func TestServeOperateUsage(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"OPENPLAYBOOK_LISTEN": "0.0.0.0:7420"}, nil, "--listen 0.0.0.0:7420 is not a loopback address"},
		{map[string]string{"OPENPLAYBOOK_INSECURE_LISTEN": "maybe"}, nil, `OPENPLAYBOOK_INSECURE_LISTEN="maybe"`},
		{map[string]string{"OPENPLAYBOOK_LOG_LEVEL": "loud"}, nil, "debug, info, warn or error"},
		{map[string]string{"OPENPLAYBOOK_LOG_FORMAT": "xml"}, nil, "json or text"},
		{nil, []string{"--public-url", "https://playbooks.example.com/sub"}, "no path"},
		{nil, []string{"--public-url", "playbooks.example.com"}, "--public-url"},
		{map[string]string{"OPENPLAYBOOK_TRUSTED_PROXIES": "10.0.0.0/8,proxy.local"}, nil, `"proxy.local"`},
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, nil, "OTEL_TRACES_EXPORTER"},
		// The command line wins over the variable.
		{map[string]string{"OPENPLAYBOOK_LISTEN": "0.0.0.0:7420"}, []string{"--listen", "7420"}, "host:port"},
	} {
		var out, errb bytes.Buffer
		cl := &CLI{Stdout: &out, Stderr: &errb, Version: "test", Getenv: func(k string) string { return c.env[k] }}
		code := cl.Main(append([]string{"serve", "--harness", "x.yaml"}, c.args...))
		if code != ExitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("env %v args %q: exit %d, stderr %q; want 2 and %q", c.env, c.args, code, errb.String(), c.want)
		}
	}
}
