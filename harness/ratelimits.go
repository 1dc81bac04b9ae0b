package harness

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

// RateLimit is a connection's client-side rate limit as the harness
// writes it (connections.<provider>.rateLimits): a token bucket of
// Burst tokens (Requests when 0) refilled at Requests per Per, taken by
// every request the connection sends for the tools Calls and Tools
// select. The connector compiles it ([connector.RateLimit] has the same
// fields; docs/connectors.md, "Rate limits").
type RateLimit struct {
	// Requests per Per, at least 1.
	Requests int
	// Per is the window, more than zero and at most 24h.
	Per time.Duration
	// Burst is how many requests may go at once; 0 means Requests.
	Burst int
	// Calls is "" (all), "reads" or "writes".
	Calls string
	// Tools are exact tool names of the provider's catalog; empty means
	// every tool Calls selects.
	Tools []string
	Pos   Pos
}

// MaxRateLimits bounds a connection's rateLimits list.
const MaxRateLimits = 32

var (
	rateLimitKeys  = []string{"requests", "per", "burst", "calls", "tools"}
	rateLimitCalls = []string{"all", "reads", "writes"}
)

// rateLimits decodes a connection's "rateLimits": a list (empty: send
// without client-side limits) of {requests, per, burst?, calls?, tools?}.
// It returns nil when the list has errors.
func (d *decoder) rateLimits(n *node, where string) []RateLimit {
	label := where + "'s \"rateLimits\""
	if !d.want(n, kList, label) {
		return nil
	}
	if len(n.elems) > MaxRateLimits {
		d.errN(n, RuleValue, "%s lists %d limits; at most %d", label, len(n.elems), MaxRateLimits)
		return nil
	}
	out := []RateLimit{}
	ok := true
	for i, e := range n.elems {
		at := fmt.Sprintf("%s[%d]", label, i)
		if !d.want(e, kMap, at) {
			ok = false
			continue
		}
		f := d.fields(e, at, rateLimitKeys)
		l := RateLimit{Pos: pos(e)}
		if v := f["requests"]; v == nil {
			d.errN(e, RuleRequired, "%s needs \"requests\": how many requests the provider allows per \"per\", such as 100", at)
			ok = false
		} else if r, good := wholeNumber(v, 1); good {
			l.Requests = r
		} else {
			d.errN(v, RuleValue, "%s: \"requests\" must be a whole number of at least 1, such as 100", at)
			ok = false
		}
		if v := f["per"]; v == nil {
			d.errN(e, RuleRequired, "%s needs \"per\": the window the requests are counted in, such as \"1s\", \"1m\" or \"1h\"", at)
			ok = false
		} else if p, good := d.duration(v, at+"'s \"per\""); !good {
			ok = false
		} else if p > 24*time.Hour {
			d.errN(v, RuleValue, "%s: \"per\" is at most \"24h\"", at)
			ok = false
		} else {
			l.Per = p
		}
		if v := f["burst"]; v != nil {
			if b, good := wholeNumber(v, 0); good {
				l.Burst = b
			} else {
				d.errN(v, RuleValue, "%s: \"burst\" must be a whole number, 0 (the same as \"requests\") or more", at)
				ok = false
			}
		}
		if v := f["calls"]; v != nil {
			if c, good := d.str(v, at+"'s \"calls\""); !good {
				ok = false
			} else if !slices.Contains(rateLimitCalls, c) {
				d.errN(v, RuleValue, "%s: \"calls\" is %q; it is one of %s", at, clip(c), quoteList(rateLimitCalls))
				ok = false
			} else if c != "all" {
				l.Calls = c
			}
		}
		if v := f["tools"]; v != nil && d.want(v, kList, at+"'s \"tools\"") {
			for _, te := range v.elems {
				name, good := d.nonEmpty(te, "each tool of "+at)
				if !good {
					ok = false
					continue
				}
				if slices.Contains(l.Tools, name) {
					d.warnN(te, RuleDuplicate, "tool %q is listed twice", clip(name))
					continue
				}
				l.Tools = append(l.Tools, name)
			}
		}
		out = append(out, l)
	}
	if !ok {
		return nil
	}
	return out
}

// wholeNumber reads a JSON/YAML integer of at least lo (and at most a
// billion: no provider counts more requests than that in a window).
func wholeNumber(n *node, lo int) (int, bool) {
	if n.kind != kNumber {
		return 0, false
	}
	v, err := strconv.Atoi(n.text)
	if err != nil || v < lo || v > 1_000_000_000 {
		return 0, false
	}
	return v, true
}
