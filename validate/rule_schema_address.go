package validate

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/openplaybook/openplaybook/syntax"
)

// ruleSchemaAddress reports a URL, a host name or an IP address in a
// schema value that is data rather than prose: "default", "examples",
// "const" and "enum" (descriptions and titles are prose and are not
// looked at). A document says what a tool does, not where it connects:
// an address in a default is one a model will send unless told otherwise,
// so it is a warning naming the place. Cloud metadata and link-local
// addresses (169.254.169.254 and all of 169.254.0.0/16, fd00:ec2::254,
// fe80::/10, 100.100.100.200, metadata.google.internal), bare or as a
// URL's host, in any spelling a URL parser accepts (an IPv4-mapped IPv6
// address, a decimal, hex or octal IPv4 host), are errors: pointing a tool
// there reads the machine's cloud credentials (server-side request
// forgery). A URL with user info is credential's, and e-mail addresses are
// not reported.
type ruleSchemaAddress struct{}

func (ruleSchemaAddress) Name() string { return "schema-address" }
func (ruleSchemaAddress) Description() string {
	return `no URL, host or IP address in a schema's "default", "examples", "const" or "enum"; cloud metadata and link-local addresses are errors`
}

var dataKeywords = []string{"default", "examples", "const", "enum"}

func (ruleSchemaAddress) Check(c *Context) {
	// Which strings hold no address, remembered: the same enum values and
	// defaults recur in thousands of schemas.
	clean := map[string]bool{}
	for _, s := range c.embedded() {
		walkSchema(s.n, func(n *syntax.Node) {
			for _, kw := range dataKeywords {
				v := n.Member(kw)
				if v == nil {
					continue
				}
				syntax.Walk(v, func(x *syntax.Node) bool {
					if x.Kind == syntax.String && !clean[x.Text()] {
						if !checkAddress(c, x, func() string { return fmt.Sprintf("%q in %s", kw, s.label()) }) {
							clean[x.Text()] = true
						}
					}
					return true
				})
			}
		})
	}
}

// checkAddress reports the first address in the string x, and whether
// there was one (or a credential, which is credential's to report). place
// names where x is, for the message.
func checkAddress(c *Context, x *syntax.Node, placeOf func() string) bool {
	if credentialIn(x.Text()) != "" {
		return true // credential's, which does not echo it
	}
	what, addr, danger := findAddress(x.Text())
	if what == "" {
		return false
	}
	place := placeOf()
	if danger {
		c.Errorf(x, "%s holds the %s %s, a cloud metadata or link-local address: a tool sent there reads the machine's cloud credentials; remove it (addresses belong to the harness, never to a document)",
			place, what, strconv.Quote(addr))
		return true
	}
	c.Warnf(x, "%s holds the %s %s; a document does not say where tools connect (the harness does): remove it, or mention it in a %q",
		place, what, strconv.Quote(addr), "description")
	return true
}

var urlInText = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s"'<>]+`)

// findAddress returns what s holds ("URL", "host", "IP address" or
// "address range"), the address, and whether it is a metadata or
// link-local one; what is "" when s holds none. A URL anywhere in s
// counts; a host, address or range only as the whole of s.
func findAddress(s string) (what, addr string, danger bool) {
	for _, u := range urlInText.FindAllString(s, -1) {
		p, err := url.Parse(u)
		if err != nil || p.Host == "" {
			continue
		}
		if hostDanger(p.Hostname(), true) {
			return "URL", u, true
		}
		if what == "" {
			what, addr = "URL", u
		}
	}
	if what != "" {
		return what, addr, false
	}
	t := strings.TrimSpace(s)
	if pfx, err := netip.ParsePrefix(t); err == nil {
		return "address range", t, pfx.Overlaps(linkLocal4) || pfx.Overlaps(linkLocal6) || pfx.Contains(ec2v6) || pfx.Contains(aliyun)
	}
	host := t
	if ap, err := netip.ParseAddrPort(t); err == nil {
		host = ap.Addr().String()
	} else if h, port, ok := strings.Cut(t, ":"); ok && !strings.Contains(port, ":") && isPort(port) {
		host = h
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return "IP address", t, addrDanger(a)
	}
	if isHostName(host) {
		return "host", t, hostDanger(host, false)
	}
	return "", "", false
}

var (
	linkLocal4 = netip.MustParsePrefix("169.254.0.0/16")
	linkLocal6 = netip.MustParsePrefix("fe80::/10")
	ec2v6      = netip.MustParseAddr("fd00:ec2::254")
	aliyun     = netip.MustParseAddr("100.100.100.200")
)

func addrDanger(a netip.Addr) bool {
	a = a.Unmap()
	return linkLocal4.Contains(a) || linkLocal6.Contains(a.WithZone("")) || a == ec2v6 || a == aliyun
}

// hostDanger reports whether a host name or address is a metadata or
// link-local one. inURL also reads the IPv4 forms URL parsers accept
// besides dotted decimal (2852039166, 0xa9fea9fe, 0251.0376.0251.0376).
func hostDanger(host string, inURL bool) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "metadata.google.internal" || h == "metadata.goog" {
		return true
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return addrDanger(a)
	}
	if inURL {
		if a, ok := looseIPv4(h); ok {
			return addrDanger(a)
		}
	}
	return false
}

// looseIPv4 reads the inet_aton forms of an IPv4 address: one to four
// parts, each decimal, 0x hex or 0 octal, the last filling the remaining
// bytes.
func looseIPv4(h string) (netip.Addr, bool) {
	parts := strings.Split(h, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var vals []uint64
	for _, p := range parts {
		v, err := strconv.ParseUint(p, 0, 32)
		if err != nil || p == "" {
			return netip.Addr{}, false
		}
		vals = append(vals, v)
	}
	var n uint64
	for i, v := range vals {
		if i < len(vals)-1 {
			if v > 255 {
				return netip.Addr{}, false
			}
			n |= v << (8 * (3 - i))
			continue
		}
		if v >= 1<<(8*(4-i)) {
			return netip.Addr{}, false
		}
		n |= v
	}
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

func isPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0 && n < 65536 && s[0] != '0'
}

var hostLabel = regexp.MustCompile(`^(?i)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$`)

// hostTLDs are the last labels a bare string must end in to be read as a
// host name: common top-level domains and the names private networks use.
// It is a short list on purpose: "order.created" or "notes.md" are not
// hosts, and a missed host in a default is only a missed warning (any
// metadata host is in the list).
var hostTLDs = map[string]bool{
	"com": true, "net": true, "org": true, "io": true, "dev": true, "app": true, "co": true, "ai": true,
	"cloud": true, "gov": true, "edu": true, "info": true, "biz": true, "us": true, "uk": true, "de": true,
	"fr": true, "eu": true, "nl": true, "jp": true, "ca": true, "au": true, "xyz": true, "tech": true,
	"internal": true, "local": true, "localhost": true, "lan": true, "corp": true, "home": true,
	"example": true, "test": true, "invalid": true, "arpa": true, "goog": true,
}

// isHostName reports whether s reads as a host name: "localhost", or
// dot-separated labels ending in one of hostTLDs.
func isHostName(s string) bool {
	s = strings.TrimSuffix(strings.ToLower(s), ".")
	if s == "localhost" {
		return true
	}
	labels := strings.Split(s, ".")
	if len(labels) < 2 || !hostTLDs[labels[len(labels)-1]] {
		return false
	}
	for _, l := range labels {
		if !hostLabel.MatchString(l) {
			return false
		}
	}
	return true
}
