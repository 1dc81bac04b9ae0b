// Package openairesponses is the driver that runs an agent step with a
// model through the OpenAI Responses API (POST {baseURL}/responses) and
// its function calling, on OpenAI's own API or on any gateway that speaks
// it: set Config.BaseURL.
//
// The model sees the same conversation as with package driver/openai: the
// system prompt (as the request's instructions), the user message "Carry
// out this step." and the step's allowed tools as functions under their
// wire names ([driver.WireName]). Each function_call item of a response
// goes, in order, to the [driver.Caller] under [driver.SpecName] of the
// name it sent, with its arguments as sent; the Caller's answer goes back
// as the call's function_call_output item. The step ends when a completed
// response has no function call: its text, as a JSON string, is the
// step's output.
//
// The driver is stateless towards the API: every request holds the whole
// conversation (its input items) and store: false; it never sends
// previous_response_id, so nothing of the run is kept by the provider and
// a resumed step never depends on what it kept.
//
// The driver reads nothing from the environment (no OPENAI_API_KEY,
// OPENAI_BASE_URL, ...): the runtime passes the key it resolved from the
// harness.
package openairesponses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/internal/llm"
	"github.com/openplaybook/openplaybook/driver/internal/openaiapi"
)

// Name is the driver's name in a harness binding (driver: openai-responses).
const Name = "openai-responses"

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1"

// Config configures a [Driver]. Printing a Config (fmt, log/slog) never
// shows the API key.
type Config struct {
	// Model is the model to run ("gpt-5", "gpt-4.1"); required.
	Model string
	// BaseURL is the API's base URL, up to and including /v1 (requests
	// go to BaseURL/responses). Empty: [DefaultBaseURL].
	BaseURL string
	// APIKey is sent as a bearer token. Empty: no Authorization header
	// (for local servers and gateways that add their own).
	APIKey string
	// Temperature is the sampling temperature. Nil: the server's default
	// (reasoning models accept no other).
	Temperature *float64
	// HTTPClient sends the requests. Nil: http.DefaultClient.
	HTTPClient *http.Client
	// MaxTurns is the most requests sent for one step; a model still
	// calling functions after that ends the step with
	// [driver.ErrTurnLimit]. Zero: one more than the step's MaxCalls (51
	// when that is 0).
	MaxTurns int
	// MaxRetries is how often a request that failed with a connection
	// error, 408, 409, 429 or 5xx is retried, with the SDK's backoff.
	// Zero: 2; negative: never.
	MaxRetries int
	// Timeout is the most one HTTP request (each attempt) may take; a
	// request that runs out of it fails the step with an error naming
	// the URL. Zero: 60s; negative: none.
	Timeout time.Duration
	// StepTimeout is the most one run of a step may take, its requests,
	// retries and tool calls included: no request or tool call starts
	// after it, and a request still running then is cut; the step fails
	// with an error wrapping [driver.ErrStepTimeout]. Zero or negative:
	// none.
	StepTimeout time.Duration
	// MaxResultBytes is the most bytes of a tool result's text the model
	// is shown; a longer result is shown as a notice and a preview (the
	// result itself is kept whole in the run's store). Zero:
	// [llm.DefaultMaxResultBytes] (64 KiB).
	MaxResultBytes int
	// NoImages says the model is not shown the images tools return (a
	// model without vision): each is a notice in the result's text.
	// False: images go to the model as input_image parts of a user
	// message after the turn's function_call_output items, whose output
	// the driver sends as text.
	NoImages bool
	// Binding is where the agent's binding is in the harness file
	// ("harness.yaml:12"), for errors; see [driver.Setup].Binding.
	Binding string
}

// String shows the Config without its API key.
func (c Config) String() string {
	return fmt.Sprintf("openairesponses.Config{Model: %q, BaseURL: %q, APIKey: %s, MaxTurns: %d}", c.Model, c.BaseURL, llm.KeyShown(c.APIKey), c.MaxTurns)
}

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// Driver runs agent steps through the Responses API. It is safe for
// concurrent use.
type Driver struct {
	now    func() time.Time // the step deadline's clock; nil: time.Now
	cfg    Config
	svc    responses.ResponseService
	models sdk.ModelService
	ep     openaiapi.Endpoint
}

// New returns a Driver for cfg. It sends nothing yet.
func New(cfg Config) (*Driver, error) {
	if cfg.Model == "" {
		return nil, errors.New(Name + ": no model")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	base, err := llm.BaseURL(Name, cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = llm.DefaultTimeout
	}
	opts := openaiapi.Options(Name, cfg.HTTPClient, cfg.BaseURL, cfg.APIKey, cfg.Timeout, cfg.MaxRetries)
	return &Driver{
		cfg: cfg, svc: responses.NewResponseService(opts...), models: sdk.NewModelService(opts...),
		ep: openaiapi.Endpoint{Provider: Name, Model: cfg.Model, Base: base, URL: strings.TrimSuffix(base, "/") + "/responses", Key: cfg.APIKey, Timeout: cfg.Timeout, Binding: cfg.Binding},
	}, nil
}

// String shows the Driver without its API key.
func (d *Driver) String() string { return "openairesponses.Driver{" + d.cfg.String() + "}" }

// GoString is String, for %#v.
func (d *Driver) GoString() string { return d.String() }

// RunStep runs the step's conversation: it sends the instructions, the
// input items and the tools, passes each function call of a completed
// response, in order, to caller, appends the calls and their outputs to
// the input, and sends it all again, until a completed response has no
// function call; that response's text, as a JSON string, is the output.
// The loop is the one every model driver shares ([llm.Loop]); this
// driver's [turn] only builds the requests and reads the replies.
//
// It returns caller's error unchanged ([driver.ErrSuspended],
// [driver.ErrCallLimit], ...), ctx's error, [driver.ErrTurnLimit] after
// MaxTurns requests, an error wrapping [driver.ErrStepTimeout] when the
// step runs out of Config.StepTimeout, a *[driver.ProviderError] when the
// API answers with an error status (after the SDK's retries; it names the
// URL, the attempts and the binding), an error naming the URL when a
// request runs out of Config.Timeout or is answered with a redirect
// ([llm.RedirectError]), an error naming the response's error code when
// its status is "failed" (transient for server_error and
// rate_limit_exceeded, see [driver.Transient]), and a *[driver.ReplyError]
// when a response is refused whole (incomplete, or "completed" and also
// cut off, filtered or failed, a refusal, function calls under a status
// other than "completed", a call_id given twice in the step, arguments
// that are not a JSON string, blank arguments to a tool that needs some):
// none of its calls reaches caller. No error holds the API key.
//
// When caller is a [driver.UsageRecorder], each response's usage
// (input_tokens, output_tokens, input_tokens_details.cached_tokens), when
// the server reports it, goes to it before the response is acted on.
func (d *Driver) RunStep(ctx context.Context, in driver.StepInput, caller driver.Caller) (jsontext.Value, error) {
	tools, err := llm.Tools(Name, in)
	if err != nil {
		return nil, err
	}
	params := responses.ResponseNewParams{
		Model:        d.cfg.Model,
		Instructions: param.NewOpt(llm.SystemPrompt(in)),
		Store:        param.NewOpt(false),
	}
	if d.cfg.Temperature != nil {
		params.Temperature = param.NewOpt(*d.cfg.Temperature)
	}
	for _, t := range tools {
		def, err := functionTool(t)
		if err != nil {
			return nil, fmt.Errorf("%s: tool %q: %w", Name, driver.SpecName(t.Wire), err)
		}
		f := param.Override[responses.FunctionToolParam](json.RawMessage(def))
		params.Tools = append(params.Tools, responses.ToolUnionParam{OfFunction: &f})
	}
	input := responses.ResponseInputParam{message(llm.UserPrompt, responses.EasyInputMessageRoleUser)}

	t := &turn{d: d, params: params, input: input, shown: llm.Shown{Limit: d.cfg.MaxResultBytes, Images: !d.cfg.NoImages, ImagesLater: true}}
	loop := llm.Loop{Provider: Name, Model: d.cfg.Model, MaxTurns: d.cfg.MaxTurns, StepTimeout: d.cfg.StepTimeout, Now: d.now, Binding: d.cfg.Binding, IDName: "call_id"}
	return loop.Run(ctx, in, caller, t)
}

// turn is the Responses API's half of a step's conversation
// ([llm.Turn]): every request holds the whole conversation as input
// items.
type turn struct {
	d      *Driver
	params responses.ResponseNewParams
	input  responses.ResponseInputParam
	shown  llm.Shown
	images imageMessage // of the accepted reply's answers
}

// Send sends the conversation and reads the response: its function
// calls, its text, its status and the other signals ([Driver.readStop]).
// A response that failed without function calls is an error (see
// [Driver.failed]).
func (t *turn) Send(ctx context.Context) (llm.Reply, error) {
	t.params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: t.input}
	rctx, att := llm.CountAttempts(ctx)
	resp, err := t.d.svc.New(rctx, t.params)
	if err != nil {
		return llm.Reply{}, t.d.ep.CleanN(rctx, err, att.N())
	}
	rr := readReply(resp)
	r := llm.Reply{Stop: string(resp.Status), Calls: rr.calls, Wires: rr.wires, Text: rr.text}
	if resp.JSON.Usage.Valid() {
		u := resp.Usage
		r.Usage = &driver.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedInputTokens: u.InputTokensDetails.CachedTokens}
	}
	return r, t.d.readStop(&r, resp, rr)
}

// Accept appends the response's text as an assistant message, when it
// has any, and its function_call items with their arguments in canonical
// form (what was decided).
func (t *turn) Accept(r llm.Reply) {
	if r.Text != "" {
		t.input = append(t.input, message(r.Text, responses.EasyInputMessageRoleAssistant))
	}
	for i, c := range r.Calls {
		t.input = append(t.input, responses.ResponseInputItemParamOfFunctionCall(string(llm.CanonicalArgs(c.Arguments)), c.ID, r.Wires[i]))
	}
}

// Answer appends the call's function_call_output item; its images wait
// for EndTurn.
func (t *turn) Answer(c driver.Call, res driver.Result) {
	t.input = append(t.input, functionOutput(c.ID, t.shown.Text(res)))
	t.images.add(c.ID, c.Name, res, t.shown)
}

// EndTurn appends the user message with the answers' images, if any.
func (t *turn) EndTurn() {
	t.input = t.images.append(t.input)
	t.images = imageMessage{}
}

// message is a message input item (type "message", content text).
func message(text string, role responses.EasyInputMessageRole) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfMessage(text, role)
	item.OfMessage.Type = responses.EasyInputMessageTypeMessage
	return item
}

// functionOutput is the function_call_output item of call id, with the
// result's text ([llm.Shown.Text]) as its output.
func functionOutput(id, text string) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(text)
	item.OfFunctionCallOutput.CallID = param.NewOpt(id)
	return item
}

// imageMessage collects the images a turn's tool results hold, for the
// user message that follows the function_call_output items: the driver
// sends each output as text (which every server that speaks the
// Responses API takes), and a user message takes input_image parts with
// the image as a data URL (Responses API reference: input_image,
// image_url "a fully qualified URL or base64 encoded image in a data
// URL").
type imageMessage struct {
	parts responses.ResponseInputMessageContentListParam
}

func (m *imageMessage) add(id, name string, r driver.Result, shown llm.Shown) {
	if r.Error != "" {
		return
	}
	n := 0
	for _, p := range shown.Parts(r.Content) {
		if p.Image == nil {
			continue
		}
		n++
		img := responses.ResponseInputContentParamOfInputImage(responses.ResponseInputImageDetailAuto)
		img.OfInputImage.ImageURL = param.NewOpt("data:" + p.Image.MediaType + ";base64," + p.Image.Data)
		m.parts = append(m.parts,
			responses.ResponseInputContentParamOfInputText(fmt.Sprintf("Image %d of the result of function call %s (%s):", n, id, name)),
			img)
	}
}

// append appends the user message with the images to input, when there
// are any.
func (m *imageMessage) append(input responses.ResponseInputParam) responses.ResponseInputParam {
	if len(m.parts) == 0 {
		return input
	}
	item := responses.ResponseInputItemParamOfMessage(m.parts, responses.EasyInputMessageRoleUser)
	item.OfMessage.Type = responses.EasyInputMessageTypeMessage
	return append(input, item)
}

// reply is what the driver reads of a response's output items.
type reply struct {
	calls []driver.Call // the function calls as the Caller gets them
	wires []string      // their names as sent
	// unfinished is the status of the first function_call item that is
	// neither "completed" nor unset ("" when none is).
	unfinished string
	text       string // the output_text parts of the message items
	refusal    string // the refusal parts
	other      string // the type of the first item the driver never asks for
	// shape is why the function calls are malformed by their shape (""
	// when they are not): "arguments" not a JSON string.
	shape string
	// incomplete says a message item's own status is "incomplete" (""
	// when none is): the reply was cut off.
	incomplete string
}

func readReply(resp *responses.Response) reply {
	var r reply
	var text, refusal strings.Builder
	for _, item := range resp.Output {
		switch item.Type {
		case "message":
			msg := item.AsMessage()
			if msg.Status == "incomplete" && r.incomplete == "" {
				r.incomplete = "a message item has status \"incomplete\""
			}
			for _, part := range msg.Content {
				switch part.Type {
				case "output_text":
					text.WriteString(part.Text)
				case "refusal":
					refusal.WriteString(part.Refusal)
				}
			}
		case "function_call":
			fc := item.AsFunctionCall()
			args := fc.Arguments
			if raw := fc.JSON.Arguments.Raw(); r.shape == "" && !strings.HasPrefix(raw, `"`) {
				// Missing or null, the SDK reads it as "", which the
				// runtime takes as {}.
				r.shape = fmt.Sprintf("the arguments of function call %d are not a JSON string (the API sends them as one): %s", len(r.calls)+1, openaiapi.ArgShape(raw))
				args = raw
			}
			r.calls = append(r.calls, driver.Call{ID: fc.CallID, Name: driver.SpecName(fc.Name), Arguments: jsontext.Value(args)})
			r.wires = append(r.wires, fc.Name)
			if s := string(fc.Status); s != "" && s != "completed" && r.unfinished == "" {
				r.unfinished = s
			}
		case "reasoning":
			// The model's reasoning is not carried to the next request
			// (store: false, no encrypted reasoning asked for).
		default:
			if r.other == "" {
				r.other = item.Type
				if r.other == "" {
					r.other = "(none)"
				}
			}
		}
	}
	r.text, r.refusal = text.String(), refusal.String()
	return r
}

// readStop adds to r the signals of a response (see docs/drivers.md,
// "Stop reasons"), or returns the error of a response that failed without
// function calls. Only status "completed" lets function calls run; a
// response without calls whose status is "completed" (or that has none)
// is the final answer. A "completed" response that also says it was cut
// off, filtered or failed has those signals too: contradictory stop
// signals count as cut off ([llm.Check]).
func (d *Driver) readStop(r *llm.Reply, resp *responses.Response, rr reply) error {
	status, n := string(resp.Status), len(r.Calls)
	switch status {
	case "completed":
		if why := resp.IncompleteDetails.Reason; why == "content_filter" {
			r.Refuse(driver.ReplyFiltered, fmt.Sprintf("the response says status %q, and it was filtered (incomplete_details.reason %q)", status, why))
		} else if why != "" || rr.incomplete != "" || limitReached(resp) {
			r.Refuse(driver.ReplyTruncated, fmt.Sprintf("the response says status %q, and it was cut off (%s)", status, cutOff(resp, rr)))
		}
		if resp.JSON.Error.Valid() && (resp.Error.Code != "" || resp.Error.Message != "") {
			r.Refuse(driver.ReplyMalformed, fmt.Sprintf("the response says status %q, and it holds an error (code %q)", status, llm.Redact(string(resp.Error.Code), d.cfg.APIKey)))
		}
	case "incomplete":
		why := resp.IncompleteDetails.Reason
		if why == "content_filter" {
			r.Refuse(driver.ReplyFiltered, fmt.Sprintf("the model's answer was filtered (status %q, incomplete_details.reason %q)", status, why))
		} else {
			r.Refuse(driver.ReplyTruncated, fmt.Sprintf("the model's answer was cut off (status %q, incomplete_details.reason %q)", status, why))
		}
	case "failed":
		code, msg := string(resp.Error.Code), llm.Redact(strings.TrimSpace(resp.Error.Message), d.cfg.APIKey)
		if n == 0 {
			return d.failed(code, msg)
		}
		r.Refuse(driver.ReplyMalformed, fmt.Sprintf("the response failed (error code %q: %s) and holds %d function call(s)", code, msg, n))
	case "":
		if n > 0 {
			r.Refuse(driver.ReplyMalformed, fmt.Sprintf("the response has no status and holds %d function call(s); only status \"completed\" lets them run", n))
		}
	default:
		r.Refuse(driver.ReplyMalformed, fmt.Sprintf("the response's status %q is not one the driver can use (the driver never asks for background responses; only \"completed\" lets function calls run)", status))
	}
	if refusal := llm.Redact(rr.refusal, d.cfg.APIKey); refusal != "" && (n > 0 || rr.text == "") {
		r.Refuse(driver.ReplyRefused, fmt.Sprintf("the model refused (status %q): %s", status, refusal))
	}
	if rr.other != "" {
		r.Refuse(driver.ReplyMalformed, fmt.Sprintf("the response holds an output item of type %q, which the driver never asks for (it offers functions only)", rr.other))
	}
	if rr.unfinished != "" {
		r.Refuse(driver.ReplyMalformed, fmt.Sprintf("a function_call item has status %q, not \"completed\"", rr.unfinished))
	}
	if rr.shape != "" {
		r.Refuse(driver.ReplyMalformed, rr.shape)
	}
	return nil
}

// limitReached reports whether resp says it used all of its
// max_output_tokens (when it names a limit).
func limitReached(resp *responses.Response) bool {
	return resp.MaxOutputTokens > 0 && resp.JSON.Usage.Valid() && resp.Usage.OutputTokens >= resp.MaxOutputTokens
}

// cutOff says which signal of a "completed" response says it was cut off.
func cutOff(resp *responses.Response, r reply) string {
	switch {
	case resp.IncompleteDetails.Reason != "":
		return fmt.Sprintf("incomplete_details.reason %q", resp.IncompleteDetails.Reason)
	case r.incomplete != "":
		return r.incomplete
	}
	return fmt.Sprintf("usage.output_tokens %d of max_output_tokens %d", resp.Usage.OutputTokens, resp.MaxOutputTokens)
}

// failed is the error of a response with status "failed" and no function
// call: the model could not answer. It is transient (see
// [driver.Transient]) for error codes server_error and
// rate_limit_exceeded.
func (d *Driver) failed(code, msg string) error {
	text := fmt.Sprintf("%s: model %q at %s: the response failed", Name, d.cfg.Model, d.ep.Base)
	if code != "" {
		text += fmt.Sprintf(" (%s)", llm.Redact(code, d.cfg.APIKey))
	}
	if msg != "" {
		text += ": " + msg
	}
	return &llm.RedactedError{Msg: text, Err: errors.New(text), Retry: code == "server_error" || code == "rate_limit_exceeded"}
}

// functionTool returns the function tool's definition as JSON, with the
// schema as the document has it (the SDK would reorder it).
func functionTool(t llm.Tool) ([]byte, error) {
	type def struct {
		Type        string         `json:"type"`
		Name        string         `json:"name"`
		Description string         `json:"description,omitempty"`
		Parameters  jsontext.Value `json:"parameters"`
		Strict      bool           `json:"strict"`
	}
	return jsonv2.Marshal(def{Type: "function", Name: t.Wire, Description: t.Description, Parameters: t.Schema})
}

// Probe checks that the API is reachable, accepts the key and lists the
// model: one GET {BaseURL}/models (OpenAI's "List models"), not retried.
// It returns nil, a *[driver.UnknownModelError] when the model is not
// listed, a *[driver.ProviderError] for an error status (401: the key is
// refused; 404: the server lists no models), or the request's error
// (unreachable, out of Config.Timeout). No error holds the API key.
func (d *Driver) Probe(ctx context.Context) error {
	return d.ep.Probe(ctx, d.models)
}

var (
	_ driver.Driver = (*Driver)(nil)
	_ driver.Prober = (*Driver)(nil)
)
