package stripe

import (
	"bytes"
	"context"
	jsonv1 "encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/openplaybook/openplaybook/internal/stripemock"
	"github.com/santhosh-tekuri/jsonschema/v6"
	stripeapi "github.com/stripe/stripe-go/v82"
)

const testKey = "sk_test_123"

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v, json.Deterministic(true)) }

// mockURL is the one stripe-mock of the package's tests (it takes seconds
// to start), set while TestAgainstStripeMock runs: every test that needs
// it is one of its subtests, and puts its own proxy in front of it.
var mockURL string

func newProxy(t *testing.T) *stripemock.Recorder {
	t.Helper()
	if mockURL == "" {
		t.Fatal("newProxy outside TestAgainstStripeMock")
	}
	return stripemock.Proxy(t, mockURL)
}

func newConnector(t *testing.T, key, baseURL string) *Connector {
	t.Helper()
	c, err := New(Config{APIKey: key, BaseURL: baseURL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// schemas compiles each tool's input and output schema, asserting formats.
func schemas(t *testing.T) (in, out map[string]*jsonschema.Schema) {
	t.Helper()
	in, out = map[string]*jsonschema.Schema{}, map[string]*jsonschema.Schema{}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	for _, d := range Definitions() {
		for _, s := range []struct {
			kind string
			src  []byte
			into map[string]*jsonschema.Schema
		}{{"input", d.InputSchema, in}, {"output", d.OutputSchema, out}} {
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(s.src))
			if err != nil {
				t.Fatal(err)
			}
			loc := "mem://" + d.Name + "/" + s.kind
			if err := c.AddResource(loc, doc); err != nil {
				t.Fatal(err)
			}
			sch, err := c.Compile(loc)
			if err != nil {
				t.Fatalf("%s %s schema: %v", d.Name, s.kind, err)
			}
			s.into[d.Name] = sch
		}
	}
	return in, out
}

func validate(t *testing.T, sch *jsonschema.Schema, what string, data []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("%s does not validate: %v\n%s", what, err, data)
	}
}

func TestAgainstStripeMock(t *testing.T) {
	mockURL = stripemock.Start(t)
	defer func() { mockURL = "" }()

	t.Run("tools", testTools)
	t.Run("charge.history request", testChargeHistoryRequest)
	t.Run("charge.refund idempotency key", testRefundIdempotencyKey)
	t.Run("check", testCheck)
	t.Run("rejected key never echoed", testRejectedKeyNeverEchoed)
	t.Run("nothing sent", testNothingSent)
}

// testTools calls each tool against stripe-mock; the arguments validate
// against the inputSchema and the result, encoded by either JSON package,
// against the outputSchema.
func testTools(t *testing.T) {
	inSchemas, outSchemas := schemas(t)
	rec := newProxy(t)
	c := newConnector(t, testKey, rec.URL)
	cases := []struct {
		tool     string
		args     string
		requests int
	}{
		{"charge.history", `{"customerId":"cus_123"}`, 2},
		{"charge.history", `{"customerId":"cus_123","limit":1,"since":"2009-02-13T00:00:00Z"}`, 2},
		{"charge.history", `{"customerId":"cus_123","limit":100.0,"since":"2024-01-01t00:00:00.5+02:00"}`, 2},
		{"invoice.list", `{"customerId":"cus_123"}`, 1},
		{"invoice.list", `{"customerId":"cus_123","status":"open"}`, 1},
		{"billing_customer.get", `{"customerId":"cus_123"}`, 1},
		{"charge.get", `{"chargeId":"ch_123"}`, 1},
		{"charge.refund", `{"chargeId":"ch_123","reason":"duplicate"}`, 1},
		{"charge.refund", `{"chargeId":"ch_123","reason":"requested_by_customer","amount":50}`, 1},
	}
	for _, tc := range cases {
		t.Run(tc.tool+" "+tc.args, func(t *testing.T) {
			validate(t, inSchemas[tc.tool], "test arguments", []byte(tc.args))
			before := rec.Count()
			res, err := c.Call(context.Background(), tc.tool, []byte(tc.args))
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if n := rec.Count() - before; n != tc.requests {
				t.Errorf("%d requests reached stripe-mock, want %d", n, tc.requests)
			}
			v2, err := jsonMarshal(res)
			if err != nil {
				t.Fatal(err)
			}
			validate(t, outSchemas[tc.tool], "result (go-json-experiment)", v2)
			v1, err := jsonv1.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			validate(t, outSchemas[tc.tool], "result (encoding/json)", v1)
		})
	}

	// What stripe-mock's fixtures make of it, field by field.
	res, err := c.Call(context.Background(), "charge.history", []byte(`{"customerId":"cus_123"}`))
	if err != nil {
		t.Fatal(err)
	}
	h := res.(ChargeHistoryResult)
	if len(h.Charges) == 0 {
		t.Fatal("no charges")
	}
	ch := h.Charges[0]
	if !strings.HasPrefix(ch.ID, "ch_") || ch.Amount != 100 || ch.Currency != "usd" || ch.Status != "succeeded" || ch.Created != "2009-02-13T23:31:30Z" {
		t.Errorf("charge = %+v", ch)
	}
	res, err = c.Call(context.Background(), "billing_customer.get", []byte(`{"customerId":"cus_123"}`))
	if err != nil {
		t.Fatal(err)
	}
	bc := res.(BillingCustomerResult)
	if bc.ID != "cus_123" || bc.DefaultPaymentMethod == nil || bc.DefaultPaymentMethod.Last4 != "4242" || bc.DefaultPaymentMethod.ExpMonth != 8 {
		t.Errorf("customer = %+v, card %+v", bc, bc.DefaultPaymentMethod)
	}
	last := rec.Requests()[rec.Count()-1]
	if got := expands(last.Query); !equalSet(got, []string{"invoice_settings.default_payment_method", "default_source"}) {
		t.Errorf("customer retrieval expands %q", got)
	}
}

// expands returns the expand[...] values of a query (stripe-go numbers
// them: expand[0]=...).
func expands(query string) []string {
	q, _ := url.ParseQuery(query)
	var out []string
	for k, v := range q {
		if strings.HasPrefix(k, "expand[") {
			out = append(out, v...)
		}
	}
	return out
}

func equalSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

// testChargeHistoryRequest checks the query charge.history sends: the
// customer, the limit, "since" rounded up to the second, and the invoice
// lookup with payments expanded.
func testChargeHistoryRequest(t *testing.T) {
	rec := newProxy(t)
	c := newConnector(t, testKey, rec.URL)
	_, err := c.Call(context.Background(), "charge.history",
		[]byte(`{"customerId":"cus_9","limit":7,"since":"2024-05-01T10:00:00.25Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	reqs := rec.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	q, _ := url.ParseQuery(reqs[0].Query)
	since := time.Date(2024, 5, 1, 10, 0, 1, 0, time.UTC).Unix()
	if reqs[0].Path != "/v1/charges" || q.Get("customer") != "cus_9" || q.Get("limit") != "7" || q.Get("created[gte]") != fmt.Sprint(since) {
		t.Errorf("charges request %s?%s", reqs[0].Path, reqs[0].Query)
	}
	q, _ = url.ParseQuery(reqs[1].Query)
	if reqs[1].Path != "/v1/invoices" || q.Get("customer") != "cus_9" || !equalSet(expands(reqs[1].Query), []string{"data.payments"}) {
		t.Errorf("invoices request %s?%s", reqs[1].Path, reqs[1].Query)
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q", got)
	}
}

// testRefundIdempotencyKey: the caller's key is sent as Idempotency-Key,
// unchanged, and the same key again on a retried call.
func testRefundIdempotencyKey(t *testing.T) {
	rec := newProxy(t)
	c := newConnector(t, testKey, rec.URL)
	const key = "run-7f3a/step-refund/call-2"
	ctx := WithIdempotencyKey(context.Background(), key)
	args := []byte(`{"chargeId":"ch_dup","amount":1999,"reason":"duplicate"}`)
	for range 2 {
		res, err := c.Call(ctx, "charge.refund", args)
		if err != nil {
			t.Fatal(err)
		}
		if r := res.(ChargeRefundResult); !strings.HasPrefix(r.RefundID, "re_") || r.Currency != "usd" || r.Status != "succeeded" {
			t.Errorf("result %+v", r)
		}
	}
	reqs := rec.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2 (stripe-mock does not replay by key; Stripe would)", len(reqs))
	}
	for _, r := range reqs {
		if r.Method != http.MethodPost || r.Path != "/v1/refunds" {
			t.Errorf("request %s %s", r.Method, r.Path)
		}
		if got := r.Header.Values("Idempotency-Key"); len(got) != 1 || got[0] != key {
			t.Errorf("Idempotency-Key = %q, want %q", got, key)
		}
		f := r.Form()
		if f.Get("charge") != "ch_dup" || f.Get("amount") != "1999" || f.Get("reason") != "duplicate" {
			t.Errorf("form %v", f)
		}
	}

	// Without a key stripe-go makes up one per call: never ours, never
	// the same twice.
	for range 2 {
		if _, err := c.Call(context.Background(), "charge.refund", []byte(`{"chargeId":"ch_1","reason":"fraudulent"}`)); err != nil {
			t.Fatal(err)
		}
	}
	reqs = rec.Requests()[2:]
	k1, k2 := reqs[0].Header.Get("Idempotency-Key"), reqs[1].Header.Get("Idempotency-Key")
	if k1 == "" || k1 == key || k1 == k2 {
		t.Errorf("keys without WithIdempotencyKey: %q, %q", k1, k2)
	}
	if _, ok := reqs[0].Form()["amount"]; ok {
		t.Errorf("a full refund sent an amount: %v", reqs[0].Form())
	}

	// Keys Call will not alter: rejected before anything is sent.
	n := rec.Count()
	for _, bad := range []string{" k", "k ", "k\n", strings.Repeat("k", 256), "ключ"} {
		_, err := c.Call(WithIdempotencyKey(context.Background(), bad), "charge.refund", []byte(`{"chargeId":"ch_1","reason":"duplicate"}`))
		if !errors.Is(err, ErrInvalidArguments) {
			t.Errorf("key %q: err = %v, want ErrInvalidArguments", bad, err)
		}
	}
	if rec.Count() != n {
		t.Errorf("a rejected key still sent %d requests", rec.Count()-n)
	}
}

func testCheck(t *testing.T) {
	rec := newProxy(t)
	if err := newConnector(t, testKey, rec.URL).Check(context.Background()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if err := newConnector(t, "rk_test_restricted", rec.URL).Check(context.Background()); err != nil {
		t.Fatalf("Check with a restricted key: %v", err)
	}
	reqs := rec.Requests()
	if len(reqs) != 2 || reqs[0].Method != http.MethodGet || reqs[0].Path != "/v1/charges" || reqs[0].Query != "limit=1" {
		t.Errorf("Check sent %+v", reqs)
	}

	// An empty key fails before any request.
	err := newConnector(t, "", rec.URL).Check(context.Background())
	if !errors.Is(err, ErrNoAPIKey) || !strings.Contains(err.Error(), "no API key") {
		t.Errorf("Check with no key: %v", err)
	}
	if rec.Count() != 2 {
		t.Errorf("Check with no key sent a request")
	}
}

// testRejectedKeyNeverEchoed: stripe-mock rejects a key that is not
// sk_test_X with a message quoting the whole Authorization header; neither
// Check nor any tool may pass the key on in its error.
func testRejectedKeyNeverEchoed(t *testing.T) {
	rec := newProxy(t)
	for _, key := range []string{
		"sk_live_Zq8DistinctiveSecret42",  // live keys are refused by stripe-mock
		"sk_test_Zq8_DistinctiveSecret42", // four parts: refused
		"Zq8DistinctiveSecret42",
	} {
		c := newConnector(t, key, rec.URL)
		check := func(what string, err error) {
			t.Helper()
			if err == nil {
				t.Fatalf("%s with key %d chars long: no error", what, len(key))
			}
			for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
				if strings.Contains(s, "DistinctiveSecret") {
					t.Errorf("%s: error echoes the key: %s", what, s)
				}
			}
			for e := errors.Unwrap(err); e != nil; e = errors.Unwrap(e) {
				if strings.Contains(e.Error(), "DistinctiveSecret") {
					t.Errorf("%s: a wrapped error echoes the key: %s", what, e)
				}
			}
			var se *Error
			if !errors.As(err, &se) || se.HTTPStatus != http.StatusUnauthorized || se.Type != "invalid_request_error" {
				t.Errorf("%s: err = %#v, want a 401 *Error", what, err)
			} else if !strings.Contains(se.Message, "[redacted]") {
				t.Errorf("%s: message %q", what, se.Message)
			}
		}
		check("Check", c.Check(context.Background()))
		for _, tc := range []struct{ tool, args string }{
			{"charge.history", `{"customerId":"cus_1"}`},
			{"invoice.list", `{"customerId":"cus_1"}`},
			{"billing_customer.get", `{"customerId":"cus_1"}`},
			{"charge.refund", `{"chargeId":"ch_1","reason":"duplicate"}`},
		} {
			_, err := c.Call(context.Background(), tc.tool, []byte(tc.args))
			check(tc.tool, err)
			if err != nil && !strings.HasPrefix(err.Error(), "stripe: "+tc.tool+": invalid_request_error: ") {
				t.Errorf("%s: error %q", tc.tool, err)
			}
		}
	}
	if n := rec.Count(); n == 0 {
		t.Error("no request reached stripe-mock")
	}
}

// testNothingSent: unknown tools, bad arguments and a missing key are
// refused before any request.
func testNothingSent(t *testing.T) {
	rec := newProxy(t)
	c := newConnector(t, testKey, rec.URL)
	for _, name := range []string{"", "charge", "Charge.history", "charge.history ", " charge.history", "charge.histor\u0443", "charge.history\x00", "mcp.stripe.charge.history", "customer.get"} {
		_, err := c.Call(context.Background(), name, []byte(`{"customerId":"cus_1"}`))
		if !errors.Is(err, ErrUnknownTool) {
			t.Errorf("tool %q: err = %v, want ErrUnknownTool", name, err)
			continue
		}
		if want := fmt.Sprintf("stripe: unknown tool %q; the Stripe connector has ", name); !strings.HasPrefix(err.Error(), want) {
			t.Errorf("tool %q: error %q, want prefix %q", name, err, want)
		}
	}
	bad := []struct{ tool, args, want string }{
		{"charge.history", ``, `"customerId" is required`},
		{"charge.history", `{}`, `"customerId" is required`},
		{"charge.history", `[]`, `must be a JSON object`},
		{"charge.history", `{"customerId":""}`, `"customerId" is required`},
		{"charge.history", `{"customerId":"cus 1"}`, `whitespace`},
		{"charge.history", `{"customerId":"cus_1","limit":0}`, `"limit" must be between 1 and 100, got 0`},
		{"charge.history", `{"customerId":"cus_1","limit":101}`, `"limit" must be between 1 and 100`},
		{"charge.history", `{"customerId":"cus_1","limit":2.5}`, `"limit" must be an integer`},
		{"charge.history", `{"customerId":"cus_1","limit":"5"}`, `"limit" must be an integer`},
		{"charge.history", `{"customerId":"cus_1","since":"yesterday"}`, `"since" is "yesterday", not an RFC 3339 date-time`},
		{"charge.history", `{"customerId":"cus_1","customerid":"cus_2"}`, `unknown argument "customerid"; charge.history takes "customerId", "limit", "since"`},
		{"charge.history", `{"customerId":"cus_1","customerId":"cus_2"}`, `not valid JSON: jsontext: duplicate object member name "customerId"`},
		{"charge.history", `{"customerId":"cus_1",}`, `not valid JSON`},
		{"charge.history", `{"customerId":1}`, `argument "customerId" must be a string, got a JSON number`},
		{"charge.refund", `{"chargeId":"ch_1","reason":false}`, `argument "reason" must be a string, got a JSON boolean`},
		{"invoice.list", `{"customerId":"cus_1","status":"Paid"}`, `"status" is "Paid", want one of "draft", "open", "paid", "uncollectible", "void"`},
		{"billing_customer.get", `{"chargeId":"ch_1"}`, `unknown argument "chargeId"; billing_customer.get takes "customerId"`},
		{"charge.refund", `{"chargeId":"ch_1"}`, `"reason" is required`},
		{"charge.refund", `{"chargeId":"ch_1","reason":"other"}`, `want one of "duplicate", "fraudulent", "requested_by_customer"`},
		{"charge.refund", `{"chargeId":"ch_1","reason":"duplicate","amount":-1}`, `"amount" must be between 0 and`},
		{"charge.refund", `{"reason":"duplicate"}`, `"chargeId" is required`},
	}
	for _, tc := range bad {
		_, err := c.Call(context.Background(), tc.tool, []byte(tc.args))
		if !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: err = %v, want ErrInvalidArguments containing %q", tc.tool, tc.args, err, tc.want)
		} else if !strings.HasPrefix(err.Error(), "stripe: "+tc.tool+": invalid arguments: ") {
			t.Errorf("%s %s: error %q", tc.tool, tc.args, err)
		}
	}
	noKey := newConnector(t, "", rec.URL)
	if _, err := noKey.Call(context.Background(), "charge.history", []byte(`{"customerId":"cus_1"}`)); !errors.Is(err, ErrNoAPIKey) {
		t.Errorf("Call with no key: %v", err)
	}
	if n := rec.Count(); n != 0 {
		t.Errorf("%d requests reached stripe-mock", n)
	}
}

func TestNew(t *testing.T) {
	const secret = "sk_test_Zq8DistinctiveSecret42"
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{APIKey: secret + "\n"}, "whitespace"},
		{Config{APIKey: " " + secret}, "whitespace"},
		{Config{APIKey: secret, BaseURL: "127.0.0.1:12111"}, "absolute http or https URL"},
		{Config{APIKey: secret, BaseURL: "ftp://example.com"}, "absolute http or https URL"},
		{Config{APIKey: secret, BaseURL: "/v1"}, "absolute http or https URL"},
		{Config{APIKey: secret, BaseURL: "http://"}, "no host"},
		{Config{APIKey: secret, BaseURL: "https://user:" + secret + "@example.com"}, "user information"},
		{Config{APIKey: secret, BaseURL: "https://example.com/?x=1"}, "query"},
	} {
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(key of %d bytes, %q): err = %v, want %q", len(tc.cfg.APIKey), tc.cfg.BaseURL, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "DistinctiveSecret") {
			t.Errorf("error echoes the key: %v", err)
		}
	}
	for _, base := range []string{"", "http://127.0.0.1:12111", "https://proxy.example/stripe/"} {
		if _, err := New(Config{APIKey: secret, BaseURL: base}); err != nil {
			t.Errorf("New(BaseURL %q): %v", base, err)
		}
	}
}

// TestAPIErrorRedacts: errors that are not Stripe's (network, proxy) pass
// through redacted and unwrapped when they quote the key; otherwise they
// stay wrapped, so errors.Is still sees a context's deadline.
func TestAPIErrorRedacts(t *testing.T) {
	const key = "rk_live_Zq8DistinctiveSecret42"
	c := &Connector{key: key}
	err := c.apiError("charge.refund", fmt.Errorf("proxy said: Authorization: Bearer %s", key))
	if strings.Contains(err.Error(), "Distinctive") || errors.Unwrap(err) != nil {
		t.Errorf("err = %q (unwrap %v)", err, errors.Unwrap(err))
	}
	err = c.apiError("charge.refund", fmt.Errorf("dial tcp: %w", context.DeadlineExceeded))
	if !errors.Is(err, context.DeadlineExceeded) || err.Error() != "stripe: charge.refund: dial tcp: context deadline exceeded" {
		t.Errorf("err = %q", err)
	}
	err = c.apiError("", &stripeapi.Error{
		HTTPStatusCode: 403, Type: "invalid_request_error", Code: "secret_key_required",
		Msg:       "The provided key 'rk_live_*********t42' does not have the required permissions",
		RequestID: "req_1",
	})
	want := "stripe: check: invalid_request_error secret_key_required: The provided key '[redacted]' does not have the required permissions (HTTP 403, request req_1)"
	if err.Error() != want {
		t.Errorf("err = %q\nwant  %q", err, want)
	}
	// A short key is still removed wherever it appears.
	c = &Connector{key: "k3y"}
	if got := c.apiError("t", errors.New("bad k3y")).Error(); strings.Contains(got, "k3y") {
		t.Errorf("err = %q", got)
	}
}

func TestInvoiceOwners(t *testing.T) {
	pay := func(status, pi, ch string) *stripeapi.InvoicePayment {
		p := &stripeapi.InvoicePayment{Status: status, Payment: &stripeapi.InvoicePaymentPayment{}}
		if pi != "" {
			p.Payment.PaymentIntent = &stripeapi.PaymentIntent{ID: pi}
		}
		if ch != "" {
			p.Payment.Charge = &stripeapi.Charge{ID: ch}
		}
		return p
	}
	inv := func(id string, ps ...*stripeapi.InvoicePayment) *stripeapi.Invoice {
		return &stripeapi.Invoice{ID: id, Payments: &stripeapi.InvoicePaymentList{Data: ps}}
	}
	got := invoiceOwners([]*stripeapi.Invoice{
		inv("in_1", pay("paid", "pi_a", ""), pay("open", "pi_b", ""), pay("canceled", "pi_c", "")),
		inv("in_2", pay("paid", "", "ch_legacy"), pay("open", "pi_shared", "")),
		inv("in_3", pay("paid", "pi_shared", "")),
		{ID: "in_4"}, // payments not expanded
		nil,
	})
	want := map[string]string{"pi_a": "in_1", "pi_b": "in_1", "ch_legacy": "in_2", "pi_shared": ""}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("invoiceOwners = %v, want %v", got, want)
	}
}
