package credential

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/internal/credential/credtest"
)

// fakes maps each fake credential of [credtest] to its kind.
var fakes = []struct{ secret, kind string }{
	{credtest.StripeLive, StripeSecretKey},
	{credtest.StripeTest, StripeSecretKey},
	{credtest.StripeRK, StripeRestrictedKey},
	{credtest.Webhook, StripeWebhookSecret},
	{credtest.GitHubPAT, GitHubToken},
	{credtest.GitHubOAuth, GitHubToken},
	{credtest.GitHubApp, GitHubToken},
	{credtest.GitHubFine, GitHubFineGrainedPAT},
	{credtest.Slack, SlackToken},
	{credtest.AWS, AWSAccessKeyID},
	{credtest.OpenAI, OpenAIAPIKey},
	{credtest.OpenAIOld, OpenAIAPIKey},
	{credtest.Anthropic, AnthropicAPIKey},
	{credtest.BearerHeader, BearerToken},
	{credtest.PEM, PEMPrivateKey},
	{credtest.URLPass, URLWithCredentials},
	{credtest.URLToken, URLWithCredentials},
	{credtest.URLAtInPass, URLWithCredentials},
	{credtest.StripeJoined, StripeSecretKey},
	{credtest.GitHubJoined, GitHubToken},
	{credtest.Basic, BasicCredentials},
	{credtest.BasicShort, BasicCredentials},
	{credtest.JWT, JSONWebToken},
	{credtest.GitLab, GitLabToken},
	{credtest.GoogleAPIKey, GoogleAPIKey},
	{credtest.SlackHook, SlackWebhookURL},
	{credtest.Shopify, ShopifyToken},
	{credtest.SendGrid, SendGridAPIKey},
	{credtest.Vault, VaultToken},
	{credtest.PuTTY, PuTTYPrivateKey},
}

func TestFind(t *testing.T) {
	tests := []struct {
		s    string
		want string
	}{
		{"key=" + credtest.StripeTest, StripeSecretKey},
		{"token " + credtest.GitHubOAuth, GitHubToken},
		{"authorization: BEARER " + "eemYiBpuF9MyqQW8X3sYrT", BearerToken},
		{"PEM without its END line: -----BEGIN " + "PRIVATE KEY-----\n" + credtest.PEMBody, PEMPrivateKey},

		// Prose and placeholders are not credentials.
		{"Stripe secret keys start with sk_live_ and restricted keys with rk_live_.", ""},
		{"Use a test key (sk_test_...) while developing.", ""},
		{"sk_live_XXXXXXXXXXXXXXXX", ""},
		{"sk_live_your_key_here", ""},
		{"GitHub personal access tokens look like ghp_ followed by 36 characters.", ""},
		{"xoxb-your-bot-token-here", ""},
		{"OpenAI keys start with sk-proj- and Anthropic keys with sk-ant-api03-.", ""},
		{"sk-proj-XXXXXXXXXXXXXXXXXXXXXXXX", ""},
		{"risk-assessment-for-the-quarterly-review", ""},
		{"Send the Bearer token-based-authentication header.", ""},
		{"Authorization: Bearer <token>", ""},
		{"Authorization: Bearer ${ACME_MCP_TOKEN}", ""},
		{"Paste the block that starts with -----BEGIN PRIVATE KEY----- into the harness.", ""},
		{"ssh://git@github.com/acme/repo.git", ""},
		{"postgres://${DB_USER}:${DB_PASSWORD}@db:5432/app", ""},
		{"https://user:<password>@host.example", ""},
		{"https://user:****@host.example", ""},
		{"https://user:@host.example", ""},
		{"Email ops@example.com or see https://example.com/docs", ""},
		{"https://example.com/users/a@b", ""},
		{"://user:pass@host", ""},
		{"AKIA is the prefix of an AWS access key id", ""},
		{"desk_live_0123456789abcdefABCDEF", ""},
		{"ask_test_0123456789abcdefABCDEF and risk-x0123456789abcdefABCDEFGH", ""},
		// A key joined to a word by '_' or '-' is still a key.
		{`{"key_sk_live_51Hq8ZtLkR9vXw2Yp4Nm7QcB3dF6gJ": 1}`, StripeSecretKey},
		{"see risk-x_sk-" + "proj-Qx7Lm2Vb9TzR4cWd8Kp3Hn6Ys1Ga5Ef0", OpenAIAPIKey},
		{"id-AKIA" + "Z3MNQ7RT5XK2PL4W", AWSAccessKeyID},
		{"x_sk_live_XXXXXXXXXXXXXXXX", ""},
		// HTTP Basic credentials decode to text with a ':'.
		{"Authorization: Basic " + "YWI6Y2Rl", BasicCredentials},
		{`"Authorization: Bearer\t` + "eemYiBpuF9MyqQW8X3sYrT" + `"`, BearerToken}, // a tab, quoted
		{"Use HTTP Basic authentication over TLS.", ""},
		{"Send Basic base64(user:pass) in the Authorization header.", ""},
		{"Authorization: Basic <credentials>", ""},
		{"Authorization: Basic ${BASIC_AUTH}", ""},
		{"Basic " + "YWJjZGVmZ2hpams=", ""},       // "abcdefghijk": no ':'
		{"Basic " + "AQID" + "OgQF" + "BgcI", ""}, // binary
		{"basically nothing", ""},
		// A JSON Web Token's header names its "alg".
		{"token: " + credtest.JWT + ".", JSONWebToken},
		{"eyJ is how the base64 of a JSON object starts, as in eyJhbGciOi", ""},
		{"eyJub3QiOiJhIGp3dCJ9" + ".eyJzdWIiOiIxIn0.c2ln", ""}, // header {"not":"a jwt"}
		{"eyJhbGciOiJIUzI1NiJ9" + ".%%%.sig", ""},
		{"additionalProperties", ""},
		{"", ""},
		// Placeholders: templates, masks, doc examples, dummy bodies.
		{"api_key=${API_KEY}", ""},
		{"PASSWORD=$DB_PASSWORD", ""},
		{"secret: {{ secret }}", ""},
		{"token: <token>", ""},
		{"API_KEY=your-api-key-here", ""},
		{"password=changeme", ""},
		{"password: ********", ""},
		{"password: [redacted]", ""},
		{"AKIAIOSFODNN7" + "EXAMPLE", ""},
		{"sk_" + "test_1234567890abcdefghij", ""},
		{"sk_" + "test_abc123abc123abc123", ""},
		{"ghp_" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", ""},
		{"sk_" + "live_dummyKey0123456789abcd", ""},
		// Generic assignments.
		{"api_key=" + "q7Lm2Vb9TzR4cWd8Kp3Hn6Ys1Ga5Ef0X", Secret},
		{"password: " + "Tr0ub4dor&3x", Password},
		{"password=process.env.DB_PASSWORD", ""},
		{"password: Optional[str] = None", ""},
		{"password_min_length=12", ""},
		// A PuTTY header alone, as in prose, is no key.
		{"A .ppk file starts with PuTTY-User-Key-File-3: ssh-ed25519 and then Private-Lines: 4", ""},
	}
	for _, f := range fakes {
		tests = append(tests, struct{ s, want string }{f.secret, f.kind})
	}
	for _, tc := range tests {
		got, ok := Find(tc.s)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("Find(%q) = %q, %v; want %q", tc.s, got, ok, tc.want)
		}
		if spans := Spans(tc.s); (len(spans) > 0) != ok {
			t.Errorf("Spans(%q) = %v, but Find says %v", tc.s, spans, ok)
		}
	}
}

func TestFindAssigned(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"api_key", "q7Lm2Vb9TzR4cWd8Kp3Hn6Ys1Ga5Ef0X", Secret},
		{"apiKey", "q7Lm2Vb9TzR4cWd8Kp3Hn6Ys1Ga5Ef0X", Secret},
		{"STRIPE_ACCESS_TOKEN", "q7Lm2Vb9TzR4cWd8Kp3Hn6Ys1Ga5Ef0X", Secret},
		{"client-secret", "q7Lm2Vb9TzR4cWd8Kp3Hn6Ys1Ga5Ef0X", Secret},
		{"credentials", "q7Lm2Vb9TzR4cWd8Kp3Hn6Ys1Ga5Ef0X", Secret},
		{"db_password", "Tr0ub4dor&3x", Password},
		{"Passphrase", "correct-Horse-7", Password},
		{"apiKeySecret", "OPENAI_API_KEY", ""},
		{"token", "The token is sent as a header.", ""},
		{"token", "${secret:TOKEN}", ""},
		{"password", "changeme", ""},
		{"password", "hunter2hunter2", ""},
		{"password", "DB_PASSWORD_V2", ""},
		{"description", "q7Lm2Vb9TzR4cWd8Kp3Hn6Ys1Ga5Ef0X", ""},
		{"token_type", "q7Lm2Vb9TzR4cWd8Kp3Hn6Ys1Ga5Ef0X", ""},
		{"api_key", "short1", ""},
	} {
		got, ok := FindAssigned(tc.name, tc.value)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("FindAssigned(%q, %q) = %q, %v; want %q", tc.name, tc.value, got, ok, tc.want)
		}
	}
}

func TestPlaceholder(t *testing.T) {
	for v, want := range map[string]bool{
		"XXXXXXXXXXXXXXXX": true, "xxxxxxxx": true, "<token>": true, "${VAR}": true, "$VAR": true, "{{ secret }}": true,
		"your-api-key-here": true, "changeme": true, "1234567890abcdef": true, "abc123abc123": true, "0000000000000000": true,
		"AAAAAAAAAAAAAAAA": true, "exampleKey12345": true, "DUMMY0123456789x": true, "[redacted]": true, "****": true,
		"q7Lm2Vb9TzR4cWd8Kp3Hn6Ys1Ga5Ef0X": false, "9f2c4e6a8b0d1f3e5a7c9b1d3f5e7a9c": false, "Tr0ub4dor&3x": false,
	} {
		if got := placeholder(v); got != want {
			t.Errorf("placeholder(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestDescribe(t *testing.T) {
	for kind, want := range map[string]string{
		StripeSecretKey:    "a Stripe secret key",
		AWSAccessKeyID:     "an AWS access key id",
		OpenAIAPIKey:       "an OpenAI API key",
		BearerToken:        "a bearer token (an Authorization header value)",
		URLWithCredentials: "a URL with credentials in its user info",
		BasicCredentials:   "HTTP Basic credentials (an Authorization header value)",
		JSONWebToken:       "a JSON Web Token (JWT)",
		GitLabToken:        "a GitLab token",
		AWSSecretAccessKey: "an AWS secret access key",
		"no such kind":     "a credential",
	} {
		if got := Describe(kind); got != want {
			t.Errorf("Describe(%q) = %q, want %q", kind, got, want)
		}
	}
}

// pieces returns every 8-byte window of a secret but those with a blank
// (the word "Bearer ", which stays, and PEM framing): the parts that must
// never survive redaction.
func pieces(secret string) []string {
	var ps []string
	for i := 0; i+8 <= len(secret); i++ {
		if w := secret[i : i+8]; !strings.ContainsAny(w, " \n") {
			ps = append(ps, w)
		}
	}
	return ps
}

// TestRedact redacts each fake credential as it is, inside prose, quoted
// by %q (as messages quote names) and twice in one string, and checks
// that no 8-byte piece survives while the text around it does.
func TestRedact(t *testing.T) {
	for _, f := range fakes {
		for _, s := range []string{
			f.secret,
			"before " + f.secret + " after",
			fmt.Sprintf("unknown member %q in %q; valid members are \"a\", \"b\"", f.secret, "tools"),
			"(" + f.secret + ")\n" + f.secret,
			strconv.Quote(strconv.Quote(f.secret)),
		} {
			got := Redact(s)
			for _, p := range pieces(f.secret) {
				if strings.Contains(got, p) {
					t.Errorf("Redact(%q) = %q: it leaves %q", s, got, p)
					break
				}
			}
			if !strings.Contains(got, "[redacted "+f.kind+"]") {
				t.Errorf("Redact(%q) = %q: no [redacted %s]", s, got, f.kind)
			}
			if strings.HasPrefix(s, "before") && (!strings.HasPrefix(got, "before ") || !strings.HasSuffix(got, " after")) {
				t.Errorf("Redact(%q) = %q: the text around the credential is lost", s, got)
			}
			if strings.HasPrefix(s, "unknown") && !strings.HasSuffix(got, ` in "tools"; valid members are "a", "b"`) {
				t.Errorf("Redact(%q) = %q: the rest of the message is lost", s, got)
			}
		}
	}
}

func TestRedactForms(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Authorization: Bearer " + credtest.BearerToken, "Authorization: Bearer [redacted bearer token]"},
		{`name "` + credtest.URLPass + `" here`, `name "[redacted URL with credentials]" here`},
		{"two: " + credtest.GitHubPAT + ", " + credtest.AWS + ".", "two: [redacted GitHub token], [redacted AWS access key id]."},
		// A token as user info is one redaction, of the whole URL.
		{"see https://" + credtest.GitHubPAT + "@github.com/acme/x.", "see [redacted URL with credentials]"},
		// sk-ant- keys also have the shape of OpenAI keys.
		{credtest.Anthropic, "[redacted Anthropic API key]"},
		{"key: " + credtest.PEM + "\nthat was it", "key: [redacted PEM private key block]\nthat was it"},
		// A replacement takes the word around it along, so that it does not
		// give a token in the same word the boundary (\b) its pattern needs
		// (a case found by FuzzRedact).
		{"292C6912gh" + "s_7Rk2Qx9Lm4Vb8Tz1Wd3A gh" + "s_7Rk2Qx9L292C6912m4Vb", "[redacted GitHub token] [redacted GitHub token]"},
		{"no credential here at all", "no credential here at all"},
		{"short", "short"},
	} {
		if got := RedactFrom(tc.in, tc.in); got != tc.want {
			t.Errorf("RedactFrom(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// TestRedactFrom checks that pieces of a credential quoted in another
// form (another case, cut short) are redacted, and that nothing else is.
func TestRedactFrom(t *testing.T) {
	for _, f := range fakes {
		for _, form := range []string{strings.ToLower(f.secret), strings.ToUpper(f.secret), f.secret[:len(f.secret)/2], f.secret[len(f.secret)/2:]} {
			msg := fmt.Sprintf("name %q is not valid (did you mean %q?)", f.secret, form)
			got := RedactFrom(msg, f.secret, "unrelated")
			left := strings.ToLower(strings.ReplaceAll(got, "[redacted "+f.kind+"]", "#"))
			for _, p := range pieces(f.secret) {
				if strings.Contains(left, strings.ToLower(p)) {
					t.Errorf("RedactFrom(%q) = %q: it leaves %q", msg, got, p)
					break
				}
			}
			if !strings.HasPrefix(got, "name ") || !strings.HasSuffix(got, `?)`) {
				t.Errorf("RedactFrom(%q) = %q: the message around it is lost", msg, got)
			}
		}
	}
	msg := `unknown member "AllowedTool" in step "investigate"; did you mean "allowedTools"?`
	if got := RedactFrom(msg, "AllowedTool", "investigate", "allowedTools"); got != msg {
		t.Errorf("RedactFrom changed a message without credentials: %q", got)
	}
}

func TestRedactPointer(t *testing.T) {
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	for _, tc := range []struct{ in, want string }{
		{"/tools/0/inputSchema/properties/" + esc.Replace(credtest.GitHubPAT) + "/type", "/tools/0/inputSchema/properties/[redacted GitHub token]/type"},
		{"/requires/mcpServers/" + esc.Replace(credtest.URLPass), "/requires/mcpServers/[redacted URL with credentials]"},
		{"/a/" + esc.Replace("x/y~z Bearer "+credtest.BearerToken) + "/b", "/a/x~1y~0z Bearer [redacted bearer token]/b"},
		{"/steps/0/allowedTools/2", "/steps/0/allowedTools/2"},
		{"/a/" + esc.Replace(credtest.Basic) + "/b", "/a/Basic [redacted HTTP Basic credentials]/b"},
		{"/properties/" + credtest.StripeJoined, "/properties/[redacted Stripe secret key]"},
		{"/a~1b/c~0d/additionalProperties", "/a~1b/c~0d/additionalProperties"},
		{"", ""},
	} {
		if got := RedactPointer(tc.in); got != tc.want {
			t.Errorf("RedactPointer(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// TestLinear checks that adversarial inputs of 512 KB take well under the
// minutes a quadratic scan would.
func TestLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: several MB of adversarial input")
	}
	const n = 1 << 19
	inputs := map[string]string{
		"urls":          strings.Repeat("a://b:c@d/", n/10),
		"schemes":       strings.Repeat("a://", n/4),
		"at signs":      "https://" + strings.Repeat("@", n),
		"authorities":   strings.Repeat("a://x@", n/6),
		"emails":        strings.Repeat("ops@example.com,", n/16),
		"pem headers":   strings.Repeat("-----BEGIN PRIVATE KEY-----\nA0b1C2d3E4f5G6h7I8j9K0l1M2\n", n/56),
		"pem no end":    "-----BEGIN PRIVATE KEY-----" + strings.Repeat("-----BEGIN PRIVATE KEY-----A0b1C2d3E4f5G6h7I8j9K0l1M2 ", n/56),
		"bearers":       strings.Repeat("bearer bearer A0b1C2d3E4f5G6h7I8j9 ", n/36),
		"random run":    strings.Repeat("A0b1C2d3E4", n/10),
		"stripe-shaped": strings.Repeat("sk_live_"+"A0b1C2d3E4f5 ", n/21),
		"joined keys":   strings.Repeat("x_sk_live_"+"A0b1C2d3E4f5_", n/23),
		"basics":        strings.Repeat("Basic YWI6Y2Rl basic ", n/21),
		"asics":         strings.Repeat("asic", n/4),
		"jwts":          strings.Repeat("eyJhbGciOiJIUzI1NiJ9.eyJ.eyJ.", n/30),
		"jwt headers":   strings.Repeat("eyJ", n/3) + ".x.y",
		"putty headers": strings.Repeat("PuTTY-User-Key-File-3: ssh-rsa\nA0b1C2d3E4f5G6h7I8j9\n", n/52),
		"putty lines":   "PuTTY-User-Key-File-3: x " + strings.Repeat("Private-Lines: 1\nPrivate-MAC: A0b1C2d3E4f5G6h7I8j9K0\n", n/56),
		"passwords":     strings.Repeat("password=Tr0ub4dor&3 passw ", n/27),
		"assignments":   strings.Repeat("api_key: A0b1C2d3E4f5 token=", n/29),
		"aws pairs":     strings.Repeat("AKIA"+"Z3MNQ7RT5XK2PL4W, ", n/22),
		"sas":           "sv=2022 " + strings.Repeat("&sig=A0b1C2d3E4f5G6h7I8j9K0l1M2n3", n/34),
		"service accts": "service_account " + strings.Repeat(`"private_key": "-----BEGIN A0b1C2d3E4f5`, n/40),
		"etsy-shaped":   strings.Repeat("12345678.A0b1C2d3E4f5G6h7I8j9", n/29),
		"literals":      strings.Repeat("sk_ghp_xoxb-AKIAeyJre0_1//s.hvs.SG.AC0 ", n/39),
	}
	for name, s := range inputs {
		start := time.Now()
		Find(s)
		Redact(s)
		RedactFrom(s, s)
		RedactPointer("/" + s)
		d := time.Since(start)
		if d > 30*time.Second {
			t.Errorf("%s: %v for 512 KB", name, d)
		}
		t.Logf("%s: %v", name, d)
	}
}

// BenchmarkFindProse runs Find over 5 MB of prose-like strings that trip
// the cheap triggers (underscores, "gh", "bearer", "sk-", "://" and "@")
// without holding a credential: the slow path.
func BenchmarkFindProse(b *testing.B) {
	line := "Bearer tokens through the high gateway: see https://example.com/a@b for sk_live_ docs, sk-proj- keys and ghp_ prefixes. "
	var ss []string
	total := 0
	for total < 5<<20 {
		ss = append(ss, line)
		total += len(line)
	}
	b.SetBytes(int64(total))
	for b.Loop() {
		for _, s := range ss {
			if _, ok := Find(s); ok {
				b.Fatal(s)
			}
		}
	}
}

// BenchmarkRedactMessage redacts a typical diagnostic message holding no
// credential: the cost every diagnostic pays.
func BenchmarkRedactMessage(b *testing.B) {
	msg := `unknown member "AllowedTool" in step "investigate"; did you mean "allowedTools"? valid members are "id", "kind", "agent", "purpose", "allowedTools", "next"`
	b.ReportAllocs()
	for b.Loop() {
		if Redact(msg) != msg {
			b.Fatal(msg)
		}
	}
}

// BenchmarkRedactPointer redacts a typical pointer holding no credential.
func BenchmarkRedactPointer(b *testing.B) {
	p := "/tools/12/inputSchema/properties/customerEmail/format"
	b.ReportAllocs()
	for b.Loop() {
		if RedactPointer(p) != p {
			b.Fatal(p)
		}
	}
}

// FuzzRedact: Spans are in bounds, sorted and apart; Find agrees with
// Spans; what Redact and RedactFrom leave holds no credential.
func FuzzRedact(f *testing.F) {
	for _, x := range fakes {
		f.Add("see " + x.secret + " and " + strings.ToLower(x.secret))
	}
	f.Add("https://a:b@c@d/e -----BEGIN PRIVATE KEY-----\nA0b1C2d3E4f5G6h7I8j9K0l1M2\n-----END")
	f.Fuzz(func(t *testing.T, s string) {
		spans := Spans(s)
		prev := 0
		for _, sp := range spans {
			if sp.Start < prev || sp.End <= sp.Start || sp.End > len(s) {
				t.Fatalf("Spans(%q): bad span %v in %v", s, sp, spans)
			}
			prev = sp.End
		}
		if _, ok := Find(s); ok != (len(spans) > 0) {
			t.Fatalf("Find(%q) = %v, Spans = %v", s, ok, spans)
		}
		for _, r := range []string{Redact(s), RedactFrom(s, s)} {
			if kind, ok := Find(r); ok {
				t.Fatalf("redacted %q is %q, which still holds a %s", s, r, kind)
			}
		}
		for _, tok := range strings.Split(RedactPointer(s), "/") {
			if kind, ok := Find(strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)); ok {
				t.Fatalf("RedactPointer(%q) has token %q, which still holds a %s", s, tok, kind)
			}
		}
	})
}
