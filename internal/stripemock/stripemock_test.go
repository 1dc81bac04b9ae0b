package stripemock

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestStartAndProxy(t *testing.T) {
	base := Start(t)
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("base URL %q is not on loopback", base)
	}
	rec := Proxy(t, base)

	req, _ := http.NewRequest(http.MethodPost, rec.URL+"/v1/refunds", strings.NewReader("charge=ch_123&reason=duplicate"))
	req.Header.Set("Authorization", "Bearer sk_test_123")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Idempotency-Key", "key-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var refund struct{ Object string }
	if err := json.Unmarshal(body, &refund); err != nil || refund.Object != "refund" {
		t.Errorf("body is not a refund (%v): %s", err, body)
	}
	// stripe-mock reflects the key, as Stripe does.
	if got := resp.Header.Get("Idempotency-Key"); got != "key-1" {
		t.Errorf("response Idempotency-Key = %q, want %q", got, "key-1")
	}

	if n := rec.Count(); n != 1 {
		t.Fatalf("Count() = %d, want 1", n)
	}
	r := rec.Requests()[0]
	if r.Method != http.MethodPost || r.Path != "/v1/refunds" || r.Query != "" {
		t.Errorf("recorded %s %s?%s", r.Method, r.Path, r.Query)
	}
	if got := r.Header.Get("Idempotency-Key"); got != "key-1" {
		t.Errorf("recorded Idempotency-Key = %q", got)
	}
	if got := r.Form().Get("reason"); got != "duplicate" {
		t.Errorf("recorded form reason = %q", got)
	}
}

func TestInCI(t *testing.T) {
	for v, want := range map[string]bool{"": false, "false": false, "0": false, "true": true, "1": true, "yes": true} {
		t.Setenv("CI", v)
		if got := inCI(); got != want {
			t.Errorf("CI=%q: inCI() = %v, want %v", v, got, want)
		}
	}
}
