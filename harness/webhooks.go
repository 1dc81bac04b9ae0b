package harness

import (
	"net/url"
	"slices"
	"strconv"
)

// Webhook is one receiver of serve's notifications (serve.webhooks;
// docs/console.md, "Notifications"). The endpoint's address and its key
// are named secrets or, for the address, a plain URL: never a secret
// value in the file.
type Webhook struct {
	// Name identifies the endpoint in the store's outbox and in logs:
	// ^[a-z][a-z0-9_-]*$, unique in the list.
	Name string
	// URL is where deliveries are posted: https, or http on a loopback
	// host. "" when URLSecret is set.
	URL string
	// URLSecret names the secret whose value is the URL: what a Slack
	// incoming webhook needs (its URL is its credential).
	URLSecret string
	// SigningKeySecret names the secret whose value keys the
	// deliveries' HMAC-SHA256 signature (OpenPlaybook-Signature).
	// Required for Format "json"; not used by "slack".
	SigningKeySecret string
	// Events are the event types sent (WebhookEvents); empty for all.
	Events []string
	// Format is "json" (a signed event, the default) or "slack" (a
	// Slack message for an incoming webhook).
	Format string
	// IncludeArguments sends a call's argument values (off by default).
	IncludeArguments bool
	Pos              Pos
}

// WebhookEvents are the event types a webhook can ask for; package
// notify's EventTypes (a test holds them equal).
var WebhookEvents = []string{"approval.requested", "gate.waiting", "run.failed", "run.completed"}

var webhookKeys = []string{"name", "url", "urlSecret", "signingKeySecret", "events", "format", "includeArguments"}

// webhooks reads serve.webhooks.
func (d *decoder) webhooks(n *node) {
	if !d.want(n, kList, `"webhooks"`) {
		return
	}
	seen := map[string]*node{}
	for _, e := range n.elems {
		if !d.want(e, kMap, "a webhook") {
			continue
		}
		w := Webhook{Format: "json", Pos: pos(e)}
		f := d.fields(e, "a webhook", webhookKeys)
		ok := true
		if v := f["name"]; v == nil {
			d.errN(e, RuleRequired, `a webhook needs "name": a logical name such as "ops" (^[a-z][a-z0-9_-]*$), which the outbox and the logs use`)
			ok = false
		} else if s, good := d.str(v, `"name"`); good {
			switch {
			case !serverName.MatchString(s):
				d.errN(v, RuleName, "%s is not a logical name (^[a-z][a-z0-9_-]*$: a lower-case letter, then lower-case letters, digits, _ and -)", strconv.Quote(clip(s)))
				ok = false
			case seen[s] != nil:
				d.errN(v, RuleDuplicate, "webhook %q is named twice (also on line %d); give each its own name", s, seen[s].line)
				ok = false
			default:
				seen[s] = v
				w.Name = s
			}
		} else {
			ok = false
		}
		if v := f["format"]; v != nil {
			if s, good := d.str(v, `"format"`); good {
				if s != "json" && s != "slack" {
					d.errN(v, RuleValue, `"format" is "json" (a signed event, the default) or "slack" (a Slack incoming webhook's message), not %q`, clip(s))
					ok = false
				} else {
					w.Format = s
				}
			}
		}
		u, us := f["url"], f["urlSecret"]
		switch {
		case u != nil && us != nil:
			d.errN(us, RuleValue, `give "url" or "urlSecret", not both`)
			ok = false
		case u == nil && us == nil:
			d.errN(e, RuleRequired, `a webhook needs "url" (an https URL) or "urlSecret" (the name of a secret holding it, as a Slack incoming webhook's URL must be)`)
			ok = false
		case u != nil:
			if s, good := d.nonEmpty(u, `"url"`); good && d.noRefs(u, `"url"`) {
				switch {
				case !WebhookURL(s):
					d.errN(u, RuleValue, `"url" must be an https URL with no user or fragment (http only on a loopback host, such as "http://127.0.0.1:9000/hook")`)
					ok = false
				case w.Format == "slack":
					d.errN(u, RuleValue, `a Slack incoming webhook's URL is its credential: name the secret holding it in "urlSecret" instead of writing it here`)
					ok = false
				default:
					w.URL = s
				}
			} else {
				ok = false
			}
		default:
			if s, good := d.str(us, `"urlSecret"`); good && envName.MatchString(s) {
				w.URLSecret = s
			} else {
				if good {
					d.errN(us, RuleName, `"urlSecret" must be a secret's name (^[A-Za-z_][A-Za-z0-9_]*$, such as SLACK_WEBHOOK_URL), never the URL itself`)
				}
				ok = false
			}
		}
		if v := f["signingKeySecret"]; v != nil {
			if s, good := d.str(v, `"signingKeySecret"`); good {
				switch {
				case !envName.MatchString(s):
					d.errN(v, RuleName, `"signingKeySecret" must be a secret's name (^[A-Za-z_][A-Za-z0-9_]*$, such as OPS_WEBHOOK_KEY), never the key itself`)
					ok = false
				case looksLikeKey(s):
					d.flagged[v.ptr] = true
					d.errN(v, RuleCredential, `"signingKeySecret" holds what looks like the key itself, not a secret's name; remove it (and make a new key), put the key in the environment or a dotenv file as OPS_WEBHOOK_KEY and write signingKeySecret: OPS_WEBHOOK_KEY`)
					ok = false
				case w.Format == "slack":
					d.errN(v, RuleValue, `a "slack" webhook is not signed (Slack checks nothing on incoming webhooks): remove "signingKeySecret"`)
					ok = false
				default:
					w.SigningKeySecret = s
				}
			}
		} else if w.Format == "json" {
			d.errN(e, RuleRequired, `a "json" webhook needs "signingKeySecret": the name of the secret that keys its deliveries' HMAC-SHA256 signature, so that the receiver can tell them from forged ones`)
			ok = false
		}
		if v := f["events"]; v != nil && d.want(v, kList, `"events"`) {
			for _, item := range v.elems {
				ev, good := d.str(item, "an event type")
				switch {
				case !good:
					ok = false
				case !slices.Contains(WebhookEvents, ev):
					d.errN(item, RuleValue, "%q is not an event type; the types are %s", clip(ev), quoteList(WebhookEvents))
					ok = false
				default:
					w.Events = append(w.Events, ev)
				}
			}
		}
		if v := f["includeArguments"]; v != nil && d.want(v, kBool, `"includeArguments"`) {
			w.IncludeArguments = v.text == "true"
		}
		if ok {
			d.h.Serve.Webhooks = append(d.h.Serve.Webhooks, w)
		}
	}
}

// WebhookURL reports whether s may be a webhook's URL (its url, or the
// value of its urlSecret): an https URL with a host and no user or
// fragment, or http on a loopback host.
func WebhookURL(s string) bool {
	pu, err := url.Parse(s)
	return err == nil && pu.Host != "" && pu.Fragment == "" && pu.User == nil &&
		(pu.Scheme == "https" || (pu.Scheme == "http" && loopbackHost(pu.Hostname())))
}
