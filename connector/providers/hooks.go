package providers

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net/mail"
	"strings"

	gomail "github.com/emersion/go-message/mail"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/connector/httpconn"
)

// Hooks returns the Go hooks provider files may name. The list is
// explicit: a new hook is one more line here.
func Hooks() map[string]httpconn.Hook {
	return map[string]httpconn.Hook{
		"gmail.rfc2822": gmailMessage,
	}
}

// gmailArgs are the arguments of Gmail's send and draft tools.
type gmailArgs struct {
	To        []string `json:"to"`
	Cc        []string `json:"cc"`
	Bcc       []string `json:"bcc"`
	Subject   string   `json:"subject"`
	Body      string   `json:"body"`
	HTML      string   `json:"html"`
	ThreadID  string   `json:"threadId"`
	InReplyTo string   `json:"inReplyTo"`
}

// gmailMessage builds the RFC 5322 message Gmail's messages.send and
// drafts.create take in "raw" (base64url, RFC 4648 section 5), with
// github.com/emersion/go-message: addresses parsed (RFC 5322 section
// 3.4), non-ASCII headers encoded (RFC 2047), a text/plain body, and a
// multipart/alternative one when html is given. It returns the arguments
// with "raw" added.
//
// Source: https://developers.google.com/gmail/api/guides/sending
func gmailMessage(args jsontext.Value) (jsontext.Value, error) {
	var a gmailArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, fmt.Errorf("the arguments do not make a message: %v", err)
	}
	var h gomail.Header
	h.SetContentType("text/plain", map[string]string{"charset": "utf-8"})
	for _, f := range []struct {
		key   string
		addrs []string
	}{{"To", a.To}, {"Cc", a.Cc}, {"Bcc", a.Bcc}} {
		if len(f.addrs) == 0 {
			continue
		}
		list := make([]*gomail.Address, 0, len(f.addrs))
		for _, s := range f.addrs {
			addr, err := mail.ParseAddress(s)
			if err != nil {
				return nil, fmt.Errorf("%s address %q is not an RFC 5322 address: %v", strings.ToLower(f.key), s, err)
			}
			list = append(list, (*gomail.Address)(addr))
		}
		h.SetAddressList(f.key, list)
	}
	if len(a.To) == 0 {
		return nil, errors.New("the message has no recipient in \"to\"")
	}
	if strings.ContainsAny(a.Subject, "\r\n") || strings.ContainsAny(a.InReplyTo, "\r\n") {
		return nil, errors.New("subject and inReplyTo must be one line")
	}
	h.SetSubject(a.Subject)
	if a.InReplyTo != "" {
		h.Set("In-Reply-To", a.InReplyTo)
		h.Set("References", a.InReplyTo)
	}
	var buf bytes.Buffer
	if a.HTML == "" {
		w, err := gomail.CreateSingleInlineWriter(&buf, h)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write([]byte(a.Body)); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	} else {
		w, err := gomail.CreateInlineWriter(&buf, h)
		if err != nil {
			return nil, err
		}
		for _, part := range []struct{ typ, text string }{{"text/plain", a.Body}, {"text/html", a.HTML}} {
			var ph gomail.InlineHeader
			ph.SetContentType(part.typ, map[string]string{"charset": "utf-8"})
			pw, err := w.CreatePart(ph)
			if err != nil {
				return nil, err
			}
			if _, err := pw.Write([]byte(part.text)); err != nil {
				return nil, err
			}
			if err := pw.Close(); err != nil {
				return nil, err
			}
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	}
	var obj map[string]jsontext.Value
	if err := json.Unmarshal(args, &obj); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(base64.URLEncoding.EncodeToString(buf.Bytes()))
	if err != nil {
		return nil, err
	}
	obj["raw"] = raw
	return json.Marshal(obj, json.Deterministic(true))
}
