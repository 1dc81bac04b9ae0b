package stripe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	stripeapi "github.com/stripe/stripe-go/v82"
)

// The result types below are the tools' outputSchemas as Go values. Member
// names and order are the schemas'; optional members Stripe leaves empty
// (null) are omitted, never sent as "" or null. Times are RFC 3339 in UTC.

// ChargeHistoryResult is charge.history's result.
type ChargeHistoryResult struct {
	// Charges, newest first; never nil.
	Charges []ChargeSummary `json:"charges"`
}

// ChargeSummary is one charge in a [ChargeHistoryResult].
type ChargeSummary struct {
	ID string `json:"id"`
	// Amount is in the currency's smallest unit (e.g. cents).
	Amount int64 `json:"amount"`
	// Currency is the ISO 4217 code, lowercase.
	Currency string `json:"currency"`
	// Status is "succeeded", "pending" or "failed".
	Status         string `json:"status"`
	FailureCode    string `json:"failureCode,omitempty"`
	FailureMessage string `json:"failureMessage,omitempty"`
	// InvoiceID is the invoice the charge's payment is for, when Stripe
	// links one (see the package documentation).
	InvoiceID string `json:"invoiceId,omitempty"`
	Refunded  bool   `json:"refunded"`
	Created   string `json:"created"`
}

// ChargeResult is charge.get's result: one charge as it stands now.
type ChargeResult struct {
	ID string `json:"id"`
	// Amount and AmountRefunded are in the currency's smallest unit.
	Amount         int64  `json:"amount"`
	AmountRefunded int64  `json:"amountRefunded"`
	Currency       string `json:"currency"`
	// Status is "succeeded", "pending" or "failed".
	Status         string `json:"status"`
	Refunded       bool   `json:"refunded"`
	Disputed       bool   `json:"disputed"`
	CustomerID     string `json:"customerId,omitempty"`
	Description    string `json:"description,omitempty"`
	FailureCode    string `json:"failureCode,omitempty"`
	FailureMessage string `json:"failureMessage,omitempty"`
	Created        string `json:"created"`
}

// InvoiceListResult is invoice.list's result.
type InvoiceListResult struct {
	// Invoices, newest first; never nil.
	Invoices []InvoiceSummary `json:"invoices"`
}

// InvoiceSummary is one invoice in an [InvoiceListResult].
type InvoiceSummary struct {
	ID string `json:"id"`
	// Number is empty (omitted) for drafts, which Stripe numbers when it
	// finalizes them.
	Number     string `json:"number,omitempty"`
	Status     string `json:"status"`
	AmountDue  int64  `json:"amountDue"`
	AmountPaid int64  `json:"amountPaid"`
	Currency   string `json:"currency"`
	DueDate    string `json:"dueDate,omitempty"`
}

// BillingCustomerResult is billing_customer.get's result.
type BillingCustomerResult struct {
	ID         string `json:"id"`
	Email      string `json:"email,omitempty"`
	Name       string `json:"name,omitempty"`
	Delinquent bool   `json:"delinquent"`
	// DefaultPaymentMethod is the customer's default card, nil (omitted)
	// when the default is not a card or there is none.
	DefaultPaymentMethod *CardSummary `json:"defaultPaymentMethod,omitempty"`
}

// CardSummary is a card in a [BillingCustomerResult].
type CardSummary struct {
	Brand    string `json:"brand,omitempty"`
	Last4    string `json:"last4,omitempty"`
	ExpMonth int64  `json:"expMonth,omitempty"`
	ExpYear  int64  `json:"expYear,omitempty"`
}

// ChargeRefundResult is charge.refund's result.
type ChargeRefundResult struct {
	RefundID string `json:"refundId"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	// Status is Stripe's refund status: "pending", "succeeded", "failed",
	// "canceled" (or "requires_action", which the outputSchema does not
	// list; Stripe uses it only for some non-card payment methods).
	Status string `json:"status"`
}

// timestamp formats a Unix time from Stripe as RFC 3339 in UTC.
func timestamp(unix int64) string {
	return time.Unix(unix, 0).UTC().Format(time.RFC3339)
}

// decodeArgs decodes the JSON object args into the struct pointed to by v,
// rejecting members the tool does not have.
func decodeArgs(tool string, args []byte, v any) error {
	if len(strings.TrimSpace(string(args))) == 0 {
		args = []byte("{}")
	}
	if !jsontext.Value(args).IsValid() {
		// Syntax errors (and duplicate member names) come from here.
		err := json.Unmarshal(args, new(jsontext.Value))
		return argError(tool, "arguments are not valid JSON: %v", err)
	}
	if jsontext.Value(args).Kind() != '{' {
		return argError(tool, "arguments must be a JSON object")
	}
	err := json.Unmarshal(args, v, json.RejectUnknownMembers(true))
	if err == nil {
		return nil
	}
	var se *json.SemanticError
	if errors.As(err, &se) && se.JSONPointer != "" {
		name := se.JSONPointer.LastToken()
		if se.Err == json.ErrUnknownName {
			return argError(tool, "unknown argument %q; %s takes %s", name, tool, quoteAll(memberNames(v)))
		}
		if se.GoType != nil && se.JSONKind != 0 {
			want := se.GoType.Kind().String()
			if want == "ptr" {
				want = se.GoType.Elem().Kind().String()
			}
			return argError(tool, "argument %q must be a %s, got %s", name, want, kindName(se.JSONKind))
		}
	}
	return argError(tool, "%v", err)
}

// kindName names a JSON kind for messages: "a JSON number", "null", ...
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "a JSON boolean"
	case '"':
		return "a JSON string"
	case '0':
		return "a JSON number"
	case '{':
		return "a JSON object"
	case '[':
		return "a JSON array"
	}
	return "another JSON type"
}

// memberNames returns the JSON member names of the struct v points to.
func memberNames(v any) []string {
	t := reflect.TypeOf(v).Elem()
	names := make([]string, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	return names
}

// intArg reads an integer argument. JSON Schema's "integer" admits any
// number with a zero fraction (25.0), so one is accepted here too.
func intArg(tool, name string, v jsontext.Value, min, max int64) (int64, error) {
	if v.Kind() != '0' {
		return 0, argError(tool, "argument %q must be an integer", name)
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(v), 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, argError(tool, "argument %q must be an integer, got %s", name, v)
		}
		n = int64(f)
	}
	if n < min || n > max {
		return 0, argError(tool, "argument %q must be between %d and %d, got %d", name, min, max, n)
	}
	return n, nil
}

// id checks a required Stripe id argument. It is used as given: never
// trimmed. An empty id would turn a retrieval into a listing.
func id(tool, name, v string) error {
	if v == "" {
		return argError(tool, "argument %q is required and must not be empty", name)
	}
	if strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return argError(tool, "argument %q must not contain whitespace or control characters", name)
	}
	return nil
}

// chargeHistoryLimit is charge.history's default "limit".
const chargeHistoryLimit = 25

// chargeHistory lists the customer's charges, newest first: at most limit,
// created at or after since, with the invoice each is for (see the package
// documentation).
func (c *Connector) chargeHistory(ctx context.Context, raw []byte) (any, error) {
	const tool = "charge.history"
	var args struct {
		CustomerID string         `json:"customerId"`
		Limit      jsontext.Value `json:"limit"`
		Since      *string        `json:"since"`
	}
	if err := decodeArgs(tool, raw, &args); err != nil {
		return nil, err
	}
	if err := id(tool, "customerId", args.CustomerID); err != nil {
		return nil, err
	}
	limit := int64(chargeHistoryLimit)
	if args.Limit != nil {
		n, err := intArg(tool, "limit", args.Limit, 1, 100)
		if err != nil {
			return nil, err
		}
		limit = n
	}
	params := &stripeapi.ChargeListParams{Customer: stripeapi.String(args.CustomerID)}
	params.Limit = stripeapi.Int64(limit)
	params.Single = true // limit <= 100: one page
	if args.Since != nil {
		t, err := parseDateTime(*args.Since)
		if err != nil {
			return nil, argError(tool, "argument %q is %q, not an RFC 3339 date-time such as \"2025-01-31T00:00:00Z\"", "since", *args.Since)
		}
		// "at or after": created is whole seconds, so round up.
		gte := t.Unix()
		if t.Nanosecond() > 0 {
			gte++
		}
		params.CreatedRange = &stripeapi.RangeQueryParams{GreaterThanOrEqual: max(gte, 0)}
	}

	res := ChargeHistoryResult{Charges: []ChargeSummary{}}
	var payments []string // per charge: its payment intent, else its own id
	for ch, err := range c.client.V1Charges.List(ctx, params) {
		if err != nil {
			return nil, c.apiError(tool, err)
		}
		res.Charges = append(res.Charges, ChargeSummary{
			ID:             ch.ID,
			Amount:         ch.Amount,
			Currency:       string(ch.Currency),
			Status:         string(ch.Status),
			FailureCode:    ch.FailureCode,
			FailureMessage: ch.FailureMessage,
			Refunded:       ch.Refunded,
			Created:        timestamp(ch.Created),
		})
		if ch.PaymentIntent != nil && ch.PaymentIntent.ID != "" {
			payments = append(payments, ch.PaymentIntent.ID)
		} else {
			payments = append(payments, ch.ID)
		}
		if int64(len(res.Charges)) == limit {
			break
		}
	}
	if len(res.Charges) == 0 {
		return res, nil
	}

	invoices, err := c.customerInvoices(ctx, args.CustomerID, "", true)
	if err != nil {
		var se *stripeapi.Error
		if errors.As(err, &se) && se.HTTPStatusCode == http.StatusForbidden {
			return res, nil
		}
		return nil, c.apiError(tool, err)
	}
	owner := invoiceOwners(invoices)
	for i := range res.Charges {
		res.Charges[i].InvoiceID = owner[payments[i]]
	}
	return res, nil
}

// invoiceOwners maps each payment (a payment intent id, or a charge id for
// a charge without one) to the invoice it is for, from invoices with their
// payments expanded. Cancelled invoice payments are left out; a payment
// that several invoices claim maps to "" (no single invoice).
func invoiceOwners(invoices []*stripeapi.Invoice) map[string]string {
	owner := map[string]string{}
	for _, inv := range invoices {
		if inv == nil || inv.Payments == nil {
			continue
		}
		for _, p := range inv.Payments.Data {
			if p == nil || p.Payment == nil || p.Status == "canceled" {
				continue
			}
			var key string
			switch {
			case p.Payment.PaymentIntent != nil && p.Payment.PaymentIntent.ID != "":
				key = p.Payment.PaymentIntent.ID
			case p.Payment.Charge != nil && p.Payment.Charge.ID != "":
				key = p.Payment.Charge.ID
			default:
				continue
			}
			if prev, seen := owner[key]; seen && prev != inv.ID {
				owner[key] = ""
				continue
			}
			owner[key] = inv.ID
		}
	}
	return owner
}

// customerInvoices returns the customer's newest invoices (one page of
// 100), optionally only those in status, optionally with payments expanded.
func (c *Connector) customerInvoices(ctx context.Context, customer, status string, withPayments bool) ([]*stripeapi.Invoice, error) {
	params := &stripeapi.InvoiceListParams{Customer: stripeapi.String(customer)}
	if status != "" {
		params.Status = stripeapi.String(status)
	}
	params.Limit = stripeapi.Int64(100)
	params.Single = true
	if withPayments {
		params.AddExpand("data.payments")
	}
	var out []*stripeapi.Invoice
	for inv, err := range c.client.V1Invoices.List(ctx, params) {
		if err != nil {
			return nil, err
		}
		out = append(out, inv)
		if len(out) == 100 {
			break
		}
	}
	return out, nil
}

// invoiceStatuses are invoice.list's "status" values.
var invoiceStatuses = []string{"draft", "open", "paid", "uncollectible", "void"}

// invoiceList lists the customer's newest 100 invoices, newest first,
// optionally only those in one status.
func (c *Connector) invoiceList(ctx context.Context, raw []byte) (any, error) {
	const tool = "invoice.list"
	var args struct {
		CustomerID string  `json:"customerId"`
		Status     *string `json:"status"`
	}
	if err := decodeArgs(tool, raw, &args); err != nil {
		return nil, err
	}
	if err := id(tool, "customerId", args.CustomerID); err != nil {
		return nil, err
	}
	status := ""
	if args.Status != nil {
		status = *args.Status
		if !slices.Contains(invoiceStatuses, status) {
			return nil, argError(tool, "argument %q is %q, want one of %s", "status", status, quoteAll(invoiceStatuses))
		}
	}
	invoices, err := c.customerInvoices(ctx, args.CustomerID, status, false)
	if err != nil {
		return nil, c.apiError(tool, err)
	}
	res := InvoiceListResult{Invoices: make([]InvoiceSummary, 0, len(invoices))}
	for _, inv := range invoices {
		s := InvoiceSummary{
			ID:         inv.ID,
			Number:     inv.Number,
			Status:     string(inv.Status),
			AmountDue:  inv.AmountDue,
			AmountPaid: inv.AmountPaid,
			Currency:   string(inv.Currency),
		}
		if inv.DueDate != 0 {
			s.DueDate = timestamp(inv.DueDate)
		}
		res.Invoices = append(res.Invoices, s)
	}
	return res, nil
}

// billingCustomerGet retrieves the customer with its default payment method
// (invoice_settings.default_payment_method, else the legacy default_source)
// expanded; only a card is summarised.
func (c *Connector) billingCustomerGet(ctx context.Context, raw []byte) (any, error) {
	const tool = "billing_customer.get"
	var args struct {
		CustomerID string `json:"customerId"`
	}
	if err := decodeArgs(tool, raw, &args); err != nil {
		return nil, err
	}
	if err := id(tool, "customerId", args.CustomerID); err != nil {
		return nil, err
	}
	params := &stripeapi.CustomerRetrieveParams{}
	params.AddExpand("invoice_settings.default_payment_method")
	params.AddExpand("default_source")
	cus, err := c.client.V1Customers.Retrieve(ctx, args.CustomerID, params)
	if err != nil {
		return nil, c.apiError(tool, err)
	}
	if cus.Deleted {
		return nil, fmt.Errorf("stripe: %s: customer %q has been deleted", tool, cus.ID)
	}
	res := BillingCustomerResult{
		ID:         cus.ID,
		Email:      cus.Email,
		Name:       cus.Name,
		Delinquent: cus.Delinquent,
	}
	if is := cus.InvoiceSettings; is != nil && is.DefaultPaymentMethod != nil && is.DefaultPaymentMethod.Card != nil {
		card := is.DefaultPaymentMethod.Card
		res.DefaultPaymentMethod = &CardSummary{Brand: string(card.Brand), Last4: card.Last4, ExpMonth: card.ExpMonth, ExpYear: card.ExpYear}
	} else if src := cus.DefaultSource; src != nil && src.Card != nil {
		card := src.Card
		res.DefaultPaymentMethod = &CardSummary{Brand: string(card.Brand), Last4: card.Last4, ExpMonth: card.ExpMonth, ExpYear: card.ExpYear}
	}
	return res, nil
}

// chargeGet retrieves one charge as it stands now (GET /v1/charges/{id}).
func (c *Connector) chargeGet(ctx context.Context, raw []byte) (any, error) {
	const tool = "charge.get"
	var args struct {
		ChargeID string `json:"chargeId"`
	}
	if err := decodeArgs(tool, raw, &args); err != nil {
		return nil, err
	}
	if err := id(tool, "chargeId", args.ChargeID); err != nil {
		return nil, err
	}
	ch, err := c.client.V1Charges.Retrieve(ctx, args.ChargeID, nil)
	if err != nil {
		return nil, c.apiError(tool, err)
	}
	res := ChargeResult{
		ID:             ch.ID,
		Amount:         ch.Amount,
		AmountRefunded: ch.AmountRefunded,
		Currency:       string(ch.Currency),
		Status:         string(ch.Status),
		Refunded:       ch.Refunded,
		Disputed:       ch.Disputed,
		Description:    ch.Description,
		FailureCode:    ch.FailureCode,
		FailureMessage: ch.FailureMessage,
		Created:        timestamp(ch.Created),
	}
	if ch.Customer != nil {
		res.CustomerID = ch.Customer.ID
	}
	return res, nil
}

// refundReasons are charge.refund's "reason" values.
var refundReasons = []string{"duplicate", "fraudulent", "requested_by_customer"}

// chargeRefund creates a refund of the charge, of amount or in full, with
// the context's idempotency key (see [WithIdempotencyKey]).
func (c *Connector) chargeRefund(ctx context.Context, raw []byte) (any, error) {
	const tool = "charge.refund"
	var args struct {
		ChargeID string         `json:"chargeId"`
		Amount   jsontext.Value `json:"amount"`
		Reason   *string        `json:"reason"`
	}
	if err := decodeArgs(tool, raw, &args); err != nil {
		return nil, err
	}
	if err := id(tool, "chargeId", args.ChargeID); err != nil {
		return nil, err
	}
	if args.Reason == nil {
		return nil, argError(tool, "argument %q is required, one of %s", "reason", quoteAll(refundReasons))
	}
	if !slices.Contains(refundReasons, *args.Reason) {
		return nil, argError(tool, "argument %q is %q, want one of %s", "reason", *args.Reason, quoteAll(refundReasons))
	}
	key, err := idempotencyKey(ctx)
	if err != nil {
		return nil, argError(tool, "%v", err)
	}
	params := &stripeapi.RefundCreateParams{
		Charge: stripeapi.String(args.ChargeID),
		Reason: stripeapi.String(*args.Reason),
	}
	if args.Amount != nil {
		n, err := intArg(tool, "amount", args.Amount, 0, 1<<53)
		if err != nil {
			return nil, err
		}
		params.Amount = stripeapi.Int64(n)
	}
	if key != "" {
		params.SetIdempotencyKey(key)
	}
	re, err := c.createKeyed(ctx, key, func() (*stripeapi.Refund, error) { return c.client.V1Refunds.Create(ctx, params) })
	if err != nil {
		return nil, c.apiError(tool, err)
	}
	return ChargeRefundResult{
		RefundID: re.ID,
		Amount:   re.Amount,
		Currency: string(re.Currency),
		Status:   string(re.Status),
	}, nil
}

// parseDateTime parses an RFC 3339 date-time (JSON Schema's "date-time"),
// which also allows a lowercase "t" and "z".
func parseDateTime(s string) (time.Time, error) {
	return time.Parse(time.RFC3339Nano, strings.ToUpper(s))
}

func quoteAll(list []string) string {
	q := make([]string, len(list))
	for i, v := range list {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}
