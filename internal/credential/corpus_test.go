package credential

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The corpus: testdata/credentials/secrets.txt holds fake credentials,
// one a line as "<label>\t<value>" (the value Go-quoted when it holds a
// line break or a tab), and lookalikes.txt holds strings that resemble
// credentials but are none. Both are written by
//
//	go test ./internal/credential -run TestCorpus -update-corpus
//
// from the templates below, with random bodies drawn from a fixed seed:
// none is a real credential, and every one has its provider's format.
var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/credentials from the templates")

const corpusDir = "../../testdata/credentials"

// A secretTemplate makes fake credentials of one label.
type secretTemplate struct {
	label string
	// kind, when not "", is the kind Find must name.
	kind string
	// stretch: a credential with no documented shape and no context,
	// which the detector is not expected to find; it counts in the overall
	// recall, not in the per-kind requirement.
	stretch bool
	gen     func(g *gen) string
}

// gen draws random bodies.
type gen struct{ r *rand.Rand }

const (
	alnumChars  = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	lowerAlnum  = "abcdefghijklmnopqrstuvwxyz0123456789"
	upperAlnum  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	hexChars    = "0123456789abcdef"
	b64Chars    = alnumChars + "+/"
	b64urlChars = alnumChars + "-_"
	letters     = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	base32Lower = "abcdefghijklmnopqrstuvwxyz234567"
	digitChars  = "0123456789"
	bech32Upper = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
)

// from returns n bytes drawn from chars that look generated and are no
// placeholder (a draw that does not is drawn again).
func (g *gen) from(chars string, n int) string {
	for {
		b := make([]byte, n)
		for i := range b {
			b[i] = chars[g.r.IntN(len(chars))]
		}
		s := string(b)
		if n < 10 || chars == digitChars || randomRun(s) && !placeholder(s) {
			return s
		}
	}
}

func (g *gen) alnum(n int) string  { return g.from(alnumChars, n) }
func (g *gen) hex(n int) string    { return g.from(hexChars, n) }
func (g *gen) b64url(n int) string { return g.from(b64urlChars, n) }
func (g *gen) digits(n int) string { return g.from(digitChars, n) }
func (g *gen) uuid() string {
	h := g.hex(32)
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:]
}

// b64 returns n bytes of standard base64 (without padding).
func (g *gen) b64(n int) string { return g.from(b64Chars, n) }

// pemBody returns n lines of 64 base64 characters.
func (g *gen) pemBody(first string, n int) string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = g.b64(64)
	}
	lines[0] = first + lines[0][len(first):]
	return strings.Join(lines, "\n")
}

func (g *gen) pem(label, first string, headers string) string {
	return "-----BEGIN " + label + "-----\n" + headers + g.pemBody(first, 6) + "\n" + g.b64(20) + "==\n-----END " + label + "-----"
}

func (g *gen) jwt(alg string) string {
	enc := base64.RawURLEncoding.EncodeToString
	head := enc([]byte(`{"alg":"` + alg + `","typ":"JWT"}`))
	payload := enc([]byte(`{"sub":"` + g.digits(10) + `","iat":17` + g.digits(8) + `,"scope":"read"}`))
	return head + "." + payload + "." + g.b64url(43)
}

func (g *gen) putty(version string) string {
	pub := []string{g.b64(64), g.b64(64), g.b64(40)}
	priv := []string{g.b64(64), g.b64(64), g.b64(64), g.b64(28)}
	return "PuTTY-User-Key-File-" + version + ": ssh-rsa\nEncryption: none\nComment: rsa-key-2026\nPublic-Lines: 3\n" +
		strings.Join(pub, "\n") + "\nPrivate-Lines: 4\n" + strings.Join(priv, "\n") + "\nPrivate-MAC: " + g.hex(40)
}

// secretTemplates are the fake credentials of the corpus, at least one
// label for each credential kind of each provider in the spec's connector
// list and of the other services the detector covers.
var secretTemplates = []secretTemplate{
	{"stripe-secret-key-live", StripeSecretKey, false, func(g *gen) string { return "sk_" + "live_51" + g.alnum(97) }},
	{"stripe-secret-key-test", StripeSecretKey, false, func(g *gen) string { return "sk_" + "test_51" + g.alnum(97) }},
	{"stripe-restricted-key-live", StripeRestrictedKey, false, func(g *gen) string { return "rk_" + "live_51" + g.alnum(97) }},
	{"stripe-restricted-key-test", StripeRestrictedKey, false, func(g *gen) string { return "rk_" + "test_51" + g.alnum(97) }},
	{"stripe-webhook-secret", StripeWebhookSecret, false, func(g *gen) string { return "whsec_" + g.alnum(32) }},
	{"stripe-financial-connections-key", StripeSecretKey, false, func(g *gen) string { return "STRIPE_FC_KEY=sk_" + "live_51" + g.alnum(97) }},
	{"github-pat-classic", GitHubToken, false, func(g *gen) string { return "ghp_" + g.alnum(36) }},
	{"github-oauth-token", GitHubToken, false, func(g *gen) string { return "gho_" + g.alnum(36) }},
	{"github-user-to-server-token", GitHubToken, false, func(g *gen) string { return "ghu_" + g.alnum(36) }},
	{"github-server-to-server-token", GitHubToken, false, func(g *gen) string { return "ghs_" + g.alnum(36) }},
	{"github-refresh-token", GitHubToken, false, func(g *gen) string { return "ghr_" + g.alnum(76) }},
	{"github-fine-grained-pat", GitHubFineGrainedPAT, false, func(g *gen) string { return "github_" + "pat_11" + g.alnum(20) + "_" + g.alnum(59) }},
	{"gitlab-personal-access-token", GitLabToken, false, func(g *gen) string { return "glpat-" + g.b64url(20) }},
	{"gitlab-routable-token", GitLabToken, false, func(g *gen) string { return "glpat-" + g.b64url(27) + ".01." + g.alnum(9) }},
	{"gitlab-deploy-token", GitLabToken, false, func(g *gen) string { return "gldt-" + g.b64url(20) }},
	{"gitlab-runner-token", GitLabToken, false, func(g *gen) string { return "glrt-t1_" + g.b64url(20) }},
	{"gitlab-pipeline-trigger-token", GitLabToken, false, func(g *gen) string { return "glptt-" + g.hex(40) }},
	{"gitlab-feed-token", GitLabToken, false, func(g *gen) string { return "glft-" + g.b64url(20) }},
	{"gitlab-ci-job-token", GitLabToken, false, func(g *gen) string { return "glcbt-5f_" + g.b64url(20) }},
	{"gitlab-oauth-app-secret", GitLabToken, false, func(g *gen) string { return "gloas-" + g.hex(64) }},
	{"gitlab-runner-registration-token", GitLabToken, false, func(g *gen) string { return "GR1348941" + g.b64url(20) }},
	{"vercel-personal-access-token", VercelToken, false, func(g *gen) string { return "vcp_" + g.alnum(56) }},
	{"vercel-integration-token", VercelToken, false, func(g *gen) string { return "vci_" + g.alnum(56) }},
	{"vercel-app-access-token", VercelToken, false, func(g *gen) string { return "vca_" + g.alnum(56) }},
	{"vercel-app-refresh-token", VercelToken, false, func(g *gen) string { return "vcr_" + g.alnum(56) }},
	{"vercel-api-key", VercelToken, false, func(g *gen) string { return "vck_" + g.alnum(56) }},
	{"posthog-personal-api-key", PostHogPersonalAPIKey, false, func(g *gen) string { return "phx_" + g.alnum(43) }},
	{"google-api-key", GoogleAPIKey, false, func(g *gen) string { return "AIza" + g.b64url(35) }},
	{"google-oauth-access-token", GoogleOAuthAccessToken, false, func(g *gen) string { return "ya29.a0" + g.b64url(150) }},
	{"google-oauth-refresh-token", GoogleOAuthRefreshToken, false, func(g *gen) string { return "1//0" + g.b64url(100) }},
	{"google-oauth-client-secret", GoogleOAuthClientSecret, false, func(g *gen) string { return "GOCSPX-" + g.b64url(28) }},
	{"gmail-oauth-in-json", GoogleOAuthRefreshToken, false, func(g *gen) string {
		return `{"client_id": "` + g.digits(12) + `-` + g.from(lowerAlnum, 32) + `.apps.googleusercontent.com", "refresh_token": "1//0` + g.b64url(100) + `"}`
	}},
	{"gcp-service-account-key", GCPServiceAccountKey, false, func(g *gen) string {
		key := strings.ReplaceAll(g.pem("PRIVATE KEY", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", ""), "\n", `\n`)
		return `{"type": "service_account", "project_id": "acme-` + g.from(lowerAlnum, 6) + `", "private_key_id": "` + g.hex(40) +
			`", "private_key": "` + key + `\n", "client_email": "ci@acme.iam.gserviceaccount.com"}`
	}},
	{"resend-api-key", ResendAPIKey, false, func(g *gen) string { return "re_" + g.alnum(8) + "_" + g.alnum(24) }},
	{"linear-personal-api-key", LinearAPIKey, false, func(g *gen) string { return "lin_api_" + g.alnum(40) }},
	{"linear-oauth-token", LinearAPIKey, false, func(g *gen) string { return "lin_oauth_" + g.hex(64) }},
	{"slack-bot-token", SlackToken, false, func(g *gen) string { return "xoxb-" + g.digits(12) + "-" + g.digits(13) + "-" + g.alnum(24) }},
	{"slack-user-token", SlackToken, false, func(g *gen) string {
		return "xoxp-" + g.digits(12) + "-" + g.digits(12) + "-" + g.digits(13) + "-" + g.hex(32)
	}},
	{"slack-app-token", SlackToken, false, func(g *gen) string { return "xapp-1-A" + g.from(upperAlnum, 10) + "-" + g.digits(13) + "-" + g.hex(64) }},
	{"slack-config-token", SlackToken, false, func(g *gen) string { return "xoxe.xoxp-1-" + g.alnum(140) }},
	{"slack-refresh-token", SlackToken, false, func(g *gen) string { return "xoxe-1-" + g.alnum(140) }},
	{"slack-incoming-webhook", SlackWebhookURL, false, func(g *gen) string {
		return "https://hooks.slack.com/services/T" + g.from(upperAlnum, 10) + "/B" + g.from(upperAlnum, 10) + "/" + g.alnum(24)
	}},
	{"slack-workflow-webhook", SlackWebhookURL, false, func(g *gen) string {
		return "https://hooks.slack.com/workflows/T" + g.from(upperAlnum, 10) + "/A" + g.from(upperAlnum, 10) + "/" + g.digits(18) + "/" + g.alnum(24)
	}},
	{"notion-integration-token", NotionToken, false, func(g *gen) string { return "ntn_" + g.alnum(46) }},
	{"notion-legacy-integration-token", NotionToken, false, func(g *gen) string { return "secret_" + g.alnum(43) }},
	{"mercury-production-token", MercuryAPIToken, false, func(g *gen) string {
		return "secret-token:mercury_production_wma_" + g.alnum(45) + "_yrucrem"
	}},
	{"mercury-sandbox-token", MercuryAPIToken, false, func(g *gen) string { return "secret-token:mercury_sandbox_rma_" + g.alnum(45) + "_yrucrem" }},
	{"square-access-token", SquareToken, false, func(g *gen) string { return "Authorization: Bearer EAAA" + g.b64url(60) }},
	{"square-access-token-bare", SquareToken, false, func(g *gen) string { return "EAAA" + g.b64url(60) }},
	{"square-oauth-secret", SquareToken, false, func(g *gen) string { return "sq0csp-" + g.b64url(43) }},
	{"square-legacy-personal-token", SquareToken, false, func(g *gen) string { return "sq0atp-" + g.b64url(22) }},
	{"plaid-access-token-production", PlaidAccessToken, false, func(g *gen) string { return "access-production-" + g.uuid() }},
	{"plaid-access-token-sandbox", PlaidAccessToken, false, func(g *gen) string { return "access-sandbox-" + g.uuid() }},
	{"plaid-secret-assigned", Secret, false, func(g *gen) string { return "PLAID_SECRET=" + g.hex(30) }},
	{"shopify-admin-access-token", ShopifyToken, false, func(g *gen) string { return "shpat_" + g.hex(32) }},
	{"shopify-custom-app-token", ShopifyToken, false, func(g *gen) string { return "shpca_" + g.hex(32) }},
	{"shopify-private-app-token", ShopifyToken, false, func(g *gen) string { return "shppa_" + g.hex(32) }},
	{"shopify-shared-secret", ShopifyToken, false, func(g *gen) string { return "shpss_" + g.hex(32) }},
	{"ramp-access-token", RampToken, false, func(g *gen) string { return "ramp_tok_" + g.alnum(46) }},
	{"ramp-client-secret", RampToken, false, func(g *gen) string { return "ramp_sec_" + g.alnum(48) }},
	{"clover-refresh-token", CloverRefreshToken, false, func(g *gen) string { return "clvroar-" + g.hex(32) }},
	{"clover-access-token-jwt", JSONWebToken, false, func(g *gen) string { return g.jwt("RS256") }},
	{"clover-merchant-api-token-assigned", Secret, false, func(g *gen) string { return "CLOVER_API_TOKEN=" + g.uuid() }},
	{"brex-user-token", BrexToken, false, func(g *gen) string { return "bxt_" + g.alnum(36) }},
	{"teller-access-token-basic", BasicCredentials, false, func(g *gen) string {
		return "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("token_"+g.from(base32Lower, 26)+":"))
	}},
	{"teller-access-token-assigned", Secret, false, func(g *gen) string { return "TELLER_ACCESS_TOKEN=token_" + g.from(base32Lower, 26) }},
	{"teller-mtls-private-key", PEMPrivateKey, false, func(g *gen) string { return g.pem("EC PRIVATE KEY", "MHcCAQEEI", "") }},
	{"paypal-access-token", PayPalAccessToken, false, func(g *gen) string { return "A21AA" + g.b64url(92) }},
	{"paypal-client-secret-assigned", Secret, false, func(g *gen) string { return "PAYPAL_CLIENT_SECRET=E" + g.b64url(79) }},
	{"braintree-access-token", BraintreeAccessToken, false, func(g *gen) string {
		return "access_token$production$" + g.from(lowerAlnum, 16) + "$" + g.hex(32)
	}},
	{"etsy-oauth-access-token", EtsyOAuthToken, false, func(g *gen) string { return g.digits(8) + "." + g.b64url(90) }},
	{"etsy-api-keystring-header", Secret, false, func(g *gen) string { return "x-api-key: " + g.from(lowerAlnum, 24) }},
	{"aws-access-key-id", AWSAccessKeyID, false, func(g *gen) string { return "AKIA" + g.from(upperAlnum, 16) }},
	{"aws-temporary-access-key-id", AWSAccessKeyID, false, func(g *gen) string { return "ASIA" + g.from(upperAlnum, 16) }},
	{"aws-access-key-pair", AWSAccessKeyID, false, func(g *gen) string { return "AKIA" + g.from(upperAlnum, 16) + "," + g.b64(40) }},
	{"aws-secret-access-key-assigned", AWSSecretAccessKey, false, func(g *gen) string { return "aws_secret_access_key = " + g.b64(40) }},
	{"aws-session-token-assigned", AWSSessionToken, false, func(g *gen) string { return "aws_session_token = IQoJb3JpZ2luX2VjE" + g.b64(300) }},
	{"amazon-lwa-client-secret", AmazonLWAClientSecret, false, func(g *gen) string { return "amzn1.oa2-cs.v1." + g.hex(64) }},
	{"amazon-lwa-refresh-token", AmazonLWAToken, false, func(g *gen) string { return "Atzr|IwEBI" + g.b64url(300) }},
	{"amazon-lwa-access-token", AmazonLWAToken, false, func(g *gen) string { return "Atza|IwEBI" + g.b64url(300) }},
	{"amazon-mws-auth-token", AmazonMWSAuthToken, false, func(g *gen) string { return "amzn.mws." + g.uuid() }},
	{"azure-storage-connection-string", AzureStorageAccountKey, false, func(g *gen) string {
		return "DefaultEndpointsProtocol=https;AccountName=acme" + g.from(lowerAlnum, 8) + ";AccountKey=" + g.b64(86) + "==;EndpointSuffix=core.windows.net"
	}},
	{"azure-service-bus-connection-string", AzureSharedAccessKey, false, func(g *gen) string {
		return "Endpoint=sb://acme" + g.from(lowerAlnum, 8) + ".servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + g.b64(43) + "="
	}},
	{"azure-sas-url", AzureSharedAccessSig, false, func(g *gen) string {
		return "https://acme" + g.from(lowerAlnum, 8) + ".blob.core.windows.net/reports/q3.csv?sv=2022-11-02&ss=b&srt=sco&sp=rl&se=2026-12-31T00:00:00Z&spr=https&sig=" +
			url.QueryEscape(g.b64(43)+"=")
	}},
	{"npm-access-token", NpmToken, false, func(g *gen) string { return "npm_" + g.alnum(36) }},
	{"pypi-api-token", PyPIToken, false, func(g *gen) string { return "pypi-AgEIcHlwaS5vcmc" + g.b64url(150) }},
	{"testpypi-api-token", PyPIToken, false, func(g *gen) string { return "pypi-AgENdGVzdC5weXBpLm9yZw" + g.b64url(150) }},
	{"huggingface-user-token", HuggingFaceToken, false, func(g *gen) string { return "hf_" + g.from(letters, 34) }},
	{"huggingface-org-token", HuggingFaceToken, false, func(g *gen) string { return "api_org_" + g.from(letters, 34) }},
	{"openai-legacy-key", OpenAIAPIKey, false, func(g *gen) string { return "sk-" + g.alnum(20) + "T3BlbkFJ" + g.alnum(20) }},
	{"openai-project-key", OpenAIAPIKey, false, func(g *gen) string { return "sk-proj-" + g.b64url(156) }},
	{"openai-service-account-key", OpenAIAPIKey, false, func(g *gen) string { return "sk-svcacct-" + g.b64url(156) }},
	{"openai-admin-key", OpenAIAPIKey, false, func(g *gen) string { return "sk-admin-" + g.b64url(156) }},
	{"anthropic-api-key", AnthropicAPIKey, false, func(g *gen) string { return "sk-ant-api03-" + g.b64url(93) + "AA" }},
	{"anthropic-admin-key", AnthropicAPIKey, false, func(g *gen) string { return "sk-ant-admin01-" + g.b64url(93) + "AA" }},
	{"sendgrid-api-key", SendGridAPIKey, false, func(g *gen) string { return "SG." + g.b64url(22) + "." + g.b64url(43) }},
	{"twilio-account-sid", TwilioAccountSID, false, func(g *gen) string { return "AC" + g.hex(32) }},
	{"twilio-api-key-sid", TwilioAPIKey, false, func(g *gen) string { return "SK" + g.hex(32) }},
	{"twilio-auth-token-assigned", Secret, false, func(g *gen) string { return "TWILIO_AUTH_TOKEN=" + g.hex(32) }},
	{"vault-service-token", VaultToken, false, func(g *gen) string { return "hvs." + g.b64url(91) }},
	{"vault-batch-token", VaultToken, false, func(g *gen) string { return "hvb." + g.b64url(138) }},
	{"vault-legacy-service-token", VaultToken, false, func(g *gen) string { return "s." + g.alnum(24) }},
	{"jwt-hs256", JSONWebToken, false, func(g *gen) string { return g.jwt("HS256") }},
	{"jwt-es256", JSONWebToken, false, func(g *gen) string { return g.jwt("ES256") }},
	{"pem-rsa-private-key", PEMPrivateKey, false, func(g *gen) string { return g.pem("RSA PRIVATE KEY", "MIIEpAIBAAKCAQEA", "") }},
	{"pem-rsa-private-key-encrypted", PEMPrivateKey, false, func(g *gen) string {
		return g.pem("RSA PRIVATE KEY", "", "Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,"+strings.ToUpper(g.hex(32))+"\n\n")
	}},
	{"pem-ec-private-key", PEMPrivateKey, false, func(g *gen) string { return g.pem("EC PRIVATE KEY", "MHcCAQEEI", "") }},
	{"pem-pkcs8-private-key", PEMPrivateKey, false, func(g *gen) string { return g.pem("PRIVATE KEY", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "") }},
	{"pem-pkcs8-encrypted-private-key", PEMPrivateKey, false, func(g *gen) string { return g.pem("ENCRYPTED PRIVATE KEY", "MIIFHDBOBgkqhkiG9w0BBQ0w", "") }},
	{"pem-openssh-private-key", PEMPrivateKey, false, func(g *gen) string {
		return g.pem("OPENSSH PRIVATE KEY", "b3BlbnNzaC1rZXktdjEAAAAA", "")
	}},
	{"pem-dsa-private-key", PEMPrivateKey, false, func(g *gen) string { return g.pem("DSA PRIVATE KEY", "MIIBuwIBAAKBgQ", "") }},
	{"pgp-private-key-block", PEMPrivateKey, false, func(g *gen) string { return g.pem("PGP PRIVATE KEY BLOCK", "lQOYBG", "\n") }},
	{"pem-private-key-in-json", PEMPrivateKey, false, func(g *gen) string {
		return `{"key": "` + strings.ReplaceAll(g.pem("PRIVATE KEY", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", ""), "\n", `\n`) + `"}`
	}},
	{"putty-private-key-v2", PuTTYPrivateKey, false, func(g *gen) string { return g.putty("2") }},
	{"putty-private-key-v3", PuTTYPrivateKey, false, func(g *gen) string { return g.putty("3") }},
	{"bearer-authorization-header", BearerToken, false, func(g *gen) string { return "Authorization: Bearer " + g.b64url(40) }},
	{"gusto-api-token-header", AuthorizationCredentials, false, func(g *gen) string { return "Authorization: Token " + g.hex(56) }},
	{"gusto-access-token-assigned", Secret, false, func(g *gen) string { return `"access_token": "` + g.b64url(43) + `"` }},
	{"http-basic-header", BasicCredentials, false, func(g *gen) string {
		return "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("svc-"+g.from(lowerAlnum, 6)+":"+g.alnum(20)))
	}},
	{"url-with-password", URLWithCredentials, false, func(g *gen) string {
		return "postgres://app:" + g.alnum(18) + "@db.internal.example:5432/app"
	}},
	{"url-with-token-user", URLWithCredentials, false, func(g *gen) string { return "https://" + g.alnum(32) + "@git.example.com/acme/repo.git" }},
	{"password-assignment", Password, false, func(g *gen) string { return "password=" + g.from(alnumChars+"!#%&*+-?@^~", 16) }},
	{"password-env", Password, false, func(g *gen) string { return "DB_PASSWORD: " + g.from(alnumChars+"!#%&*+-?@^~", 14) }},
	{"password-human", Password, false, func(g *gen) string { return `"passphrase": "Tr0ub4dor&` + g.digits(2) + `"` }},
	{"api-key-assignment", Secret, false, func(g *gen) string { return "api_key=" + g.alnum(32) }},
	{"api-key-header", Secret, false, func(g *gen) string { return "X-Api-Key: " + g.hex(40) }},
	{"client-secret-yaml", Secret, false, func(g *gen) string { return "client_secret: " + g.b64url(40) }},
	{"secret-key-json", Secret, false, func(g *gen) string { return `{"secretKey": "` + g.b64(44) + `"}` }},

	// The kinds translated from gitleaks' rules (kinds_gitleaks.go).
	{"github-installation-token-jwt", GitHubToken, false, func(g *gen) string { return "ghs_" + g.digits(7) + "_" + g.jwt("RS256") }},
	{"digitalocean-personal-access-token", DigitalOceanToken, false, func(g *gen) string { return "dop_v1_" + g.hex(64) }},
	{"digitalocean-oauth-token", DigitalOceanToken, false, func(g *gen) string { return "doo_v1_" + g.hex(64) }},
	{"digitalocean-refresh-token", DigitalOceanToken, false, func(g *gen) string { return "dor_v1_" + g.hex(64) }},
	{"doppler-personal-token", DopplerToken, false, func(g *gen) string { return "dp.pt." + g.alnum(43) }},
	{"doppler-service-token", DopplerToken, false, func(g *gen) string { return "DOPPLER_TOKEN=dp.st.prd." + g.alnum(43) }},
	{"doppler-service-account-token", DopplerToken, false, func(g *gen) string { return "dp.sa." + g.alnum(43) }},
	{"pulumi-access-token", PulumiAccessToken, false, func(g *gen) string { return "pul-" + g.hex(40) }},
	{"terraform-cloud-token", TerraformCloudToken, false, func(g *gen) string { return g.alnum(14) + ".atlasv1." + g.b64url(67) }},
	{"atlassian-api-token", AtlassianAPIToken, false, func(g *gen) string { return "ATATT3" + g.b64url(177) + "=" + strings.ToUpper(g.hex(8)) }},
	{"jira-api-token-assigned", Secret, false, func(g *gen) string { return "JIRA_API_TOKEN=" + g.alnum(24) }},
	{"heroku-api-key", HerokuAPIKey, false, func(g *gen) string { return "HRKU-AA" + g.b64url(58) }},
	{"heroku-api-key-assigned", HerokuAPIKey, false, func(g *gen) string { return "HEROKU_API_KEY=" + g.uuid() }},
	{"grafana-service-account-token", GrafanaServiceAccountToken, false, func(g *gen) string { return "glsa_" + g.alnum(32) + "_" + g.hex(8) }},
	{"grafana-cloud-token", GrafanaCloudToken, false, func(g *gen) string { return "glc_eyJ" + g.b64(120) + "=" }},
	{"grafana-legacy-api-key", GrafanaAPIKey, false, func(g *gen) string { return "eyJrIjoi" + g.alnum(84) + "In0=" }},
	{"databricks-access-token", DatabricksToken, false, func(g *gen) string { return "dapi" + g.hex(32) }},
	{"databricks-access-token-numbered", DatabricksToken, false, func(g *gen) string { return "DATABRICKS_HOST=x DATABRICKS_TOKEN=dapi" + g.hex(32) + "-2" }},
	{"postman-api-key", PostmanAPIKey, false, func(g *gen) string { return "PMAK-" + g.hex(24) + "-" + g.hex(34) }},
	{"age-secret-key", AgeSecretKey, false, func(g *gen) string { return "AGE-SECRET-KEY-1" + g.from(bech32Upper, 58) }},
	{"flyio-token", FlyioToken, false, func(g *gen) string { return "FlyV1 fm2_" + g.b64(200) + "==" }},
	{"flyio-oauth-token", FlyioToken, false, func(g *gen) string { return "fo1_" + g.b64url(43) }},
	{"planetscale-service-token", PlanetScaleToken, false, func(g *gen) string { return "pscale_tkn_" + g.b64url(43) }},
	{"planetscale-oauth-token", PlanetScaleToken, false, func(g *gen) string { return "pscale_oauth_" + g.b64url(43) }},
	{"planetscale-password", PlanetScalePassword, false, func(g *gen) string { return "pscale_pw_" + g.b64url(43) }},
	{"sentry-user-token", SentryAuthToken, false, func(g *gen) string { return "sntryu_" + g.hex(64) }},
	{"sentry-org-token", SentryAuthToken, false, func(g *gen) string {
		claims := `{"iat":17` + g.digits(8) + `.` + g.digits(6) + `,"url":"https://sentry.io","region_url":"https://us.sentry.io","org":"acme-` + g.from(lowerAlnum, 6) + `"}`
		return "sntrys_" + base64.StdEncoding.EncodeToString([]byte(claims)) + "_" + g.b64(43)
	}},
	{"sentry-legacy-token-assigned", Secret, false, func(g *gen) string { return "SENTRY_AUTH_TOKEN=" + g.hex(64) }},
	{"onepassword-service-account-token", OnePasswordServiceToken, false, func(g *gen) string { return "ops_eyJ" + g.b64(300) + "=" }},
	{"rubygems-api-key", RubyGemsAPIKey, false, func(g *gen) string { return "rubygems_" + g.hex(48) }},
	{"prefect-api-key", PrefectAPIKey, false, func(g *gen) string { return "pnu_" + g.alnum(36) }},
	{"newrelic-user-api-key", NewRelicAPIKey, false, func(g *gen) string { return "NRAK-" + g.from(upperAlnum, 27) }},
	{"dynatrace-api-token", DynatraceToken, false, func(g *gen) string {
		return "dt0c01." + g.from(upperAlnum, 24) + "." + g.from(upperAlnum, 64)
	}},
	{"sourcegraph-access-token", SourcegraphToken, false, func(g *gen) string { return "sgp_" + g.hex(16) + "_" + g.hex(40) }},

	// Credentials with no documented shape and nothing around them that
	// says what they are: no shape-based detector can tell them from an
	// identifier, so they are not required.
	{"teller-access-token-bare", "", true, func(g *gen) string { return "token_" + g.from(base32Lower, 26) }},
	{"gusto-access-token-bare", "", true, func(g *gen) string { return g.b64url(43) }},
	{"plaid-secret-bare", "", true, func(g *gen) string { return g.hex(30) }},
}

// lookalikes resemble credentials but are none: identifiers, hashes,
// encoded data, public keys and ids, placeholders and doc examples.
var lookalikeTemplates = []struct {
	label string
	gen   func(g *gen) string
}{
	{"uuid", func(g *gen) string { return g.uuid() }},
	{"uuid-as-id", func(g *gen) string { return "request_id=" + g.uuid() }},
	{"idempotency-key", func(g *gen) string { return "Idempotency-Key: " + g.uuid() }},
	{"git-sha1", func(g *gen) string { return g.hex(40) }},
	{"git-commit-line", func(g *gen) string { return "commit " + g.hex(40) + " (HEAD -> main)" }},
	{"sha256-hash", func(g *gen) string { return g.hex(64) }},
	{"docker-digest", func(g *gen) string { return "ghcr.io/acme/app@sha256:" + g.hex(64) }},
	{"md5-hash", func(g *gen) string { return g.hex(32) }},
	{"npm-integrity", func(g *gen) string { return "sha512-" + g.b64(86) + "==" }},
	{"base64-image", func(g *gen) string { return "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA" + g.b64(300) + "==" }},
	{"base64-text", func(g *gen) string {
		return base64.StdEncoding.EncodeToString([]byte("The quarterly report is attached; totals were reconciled on " + g.digits(4) + "."))
	}},
	{"css-color", func(g *gen) string { return "color: #" + g.hex(6) + "; background: #" + g.hex(6) + ";" }},
	{"stripe-customer-id", func(g *gen) string { return "cus_" + g.alnum(14) }},
	{"stripe-charge-id", func(g *gen) string { return "ch_3" + g.alnum(23) }},
	{"stripe-payment-intent-id", func(g *gen) string { return "pi_3" + g.alnum(23) }},
	{"stripe-price-id", func(g *gen) string { return "price_1" + g.alnum(23) }},
	{"stripe-event-id", func(g *gen) string { return "evt_1" + g.alnum(23) }},
	{"stripe-account-id", func(g *gen) string { return "acct_1" + g.alnum(15) }},
	{"stripe-financial-connections-account-id", func(g *gen) string { return "fca_1" + g.alnum(23) }},
	{"stripe-publishable-key", func(g *gen) string { return "pk_live_51" + g.alnum(97) }},
	{"posthog-project-key", func(g *gen) string { return "phc_" + g.alnum(43) }},
	{"google-oauth-client-id", func(g *gen) string {
		return g.digits(12) + "-" + g.from(lowerAlnum, 32) + ".apps.googleusercontent.com"
	}},
	{"amazon-lwa-client-id", func(g *gen) string { return "amzn1.application-oa2-client." + g.hex(32) }},
	{"ramp-client-id", func(g *gen) string { return "ramp_id_" + g.alnum(40) }},
	{"square-application-id", func(g *gen) string { return "sq0idp-" + g.b64url(22) }},
	{"plaid-link-token", func(g *gen) string { return "link-sandbox-" + g.uuid() }},
	{"plaid-item-id", func(g *gen) string { return "item_id: " + g.alnum(37) }},
	{"aws-arn", func(g *gen) string { return "arn:aws:iam::" + g.digits(12) + ":role/ci-deploy" }},
	{"aws-role-unique-id", func(g *gen) string { return "AROA" + g.from(upperAlnum, 17) }},
	{"twilio-message-sid", func(g *gen) string { return "SM" + g.hex(32) }},
	{"twilio-phone-number-sid", func(g *gen) string { return "PN" + g.hex(32) }},
	{"slack-user-id", func(g *gen) string { return "U" + g.from(upperAlnum, 10) }},
	{"github-node-id", func(g *gen) string { return "MDQ6VXNlcj" + g.digits(7) + "=" }},
	{"ulid", func(g *gen) string { return "01" + g.from("0123456789ABCDEFGHJKMNPQRSTVWXYZ", 24) }},
	{"order-id", func(g *gen) string { return "ord_" + g.alnum(24) }},
	{"ssh-public-key", func(g *gen) string { return "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + g.b64(43) + " ci@build" }},
	{"pem-public-key", func(g *gen) string {
		return "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA" + g.b64(64) + "\n-----END PUBLIC KEY-----"
	}},
	{"pem-certificate", func(g *gen) string {
		return "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIE" + g.b64(64) + "\n-----END CERTIFICATE-----"
	}},
	{"jwt-without-alg", func(g *gen) string {
		return "eyJub3QiOiJhIGp3dCJ9." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"`+g.digits(6)+`"}`)) + "." + g.b64url(20)
	}},
	{"hex-encoded-text", func(g *gen) string { return hex.EncodeToString([]byte("release-notes-" + g.digits(6))) }},
	{"version-and-build", func(g *gen) string { return "v1.26." + g.digits(1) + "+build." + g.hex(12) }},
	{"long-decimal", func(g *gen) string { return "3.14159265358979323846264338327950288419716939937510582097494459" }},
	{"url-without-credentials", func(g *gen) string { return "https://api.example.com/v1/orders?page=2&cursor=" + g.digits(10) }},
	{"ssh-url-with-user", func(g *gen) string { return "ssh://git@github.com/acme/" + g.from(lowerAlnum, 8) + ".git" }},
	{"email-address", func(g *gen) string { return "ops-" + g.from(lowerAlnum, 6) + "@example.com" }},
	// Near misses of the kinds translated from gitleaks' rules.
	{"digitalocean-short", func(g *gen) string { return "dop_v1_" + g.hex(40) }},
	{"pulumi-short", func(g *gen) string { return "pul-" + g.hex(20) }},
	{"terraform-other-version", func(g *gen) string { return g.alnum(14) + ".atlasv2." + g.b64url(67) }},
	{"heroku-app-id", func(g *gen) string { return "HEROKU_APP_ID=" + g.uuid() }},
	{"grafana-no-checksum", func(g *gen) string { return "glsa_" + g.alnum(20) }},
	{"databricks-in-word", func(g *gen) string { return "rapidapi" + g.hex(32) }},
	{"postman-collection-uid", func(g *gen) string { return g.digits(8) + "-" + g.uuid() }},
	{"age-recipient", func(g *gen) string { return "age1" + g.from(strings.ToLower(bech32Upper), 58) }},
	{"sourcegraph-short", func(g *gen) string { return "sgp_" + g.hex(20) }},
	{"newrelic-short", func(g *gen) string { return "NRAK-" + g.from(upperAlnum, 12) }},
}

// fixedLookalikes are placeholders, doc examples and prose, as they are.
var fixedLookalikes = []struct{ label, value string }{
	{"placeholder-xxxx", "sk_" + "live_XXXXXXXXXXXXXXXXXXXXXXXX"},
	{"placeholder-lower-x", "ghp_" + "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"},
	{"placeholder-angle", "Authorization: Bearer <token>"},
	{"placeholder-env-braces", "api_key=${API_KEY}"},
	{"placeholder-env-dollar", "PASSWORD=$DB_PASSWORD"},
	{"placeholder-template", "secret: {{ secret }}"},
	{"placeholder-template-password", "password: '{{ vault_db_password }}'"},
	{"placeholder-github-actions", "token: ${{ secrets.GITHUB_TOKEN }}"},
	{"placeholder-your-key", "API_KEY=your-api-key-here"},
	{"placeholder-your-key-camel", "sk_" + "test_yourSecretKeyHere123456"},
	{"placeholder-changeme", "password=changeme"},
	{"placeholder-dummy-sequential", "sk_" + "test_1234567890abcdefghij"},
	{"placeholder-dummy-repeated", "sk_" + "test_abc123abc123abc123abc123"},
	{"placeholder-dummy-zeros", "sk_" + "test_51H0000000000000000000000000"},
	{"placeholder-same-char", "ghp_" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
	{"placeholder-example", "AKIAIOSFODNN7" + "EXAMPLE"},
	{"placeholder-example-secret", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"},
	{"placeholder-dummy", "xoxb-" + "123456789012-1234567890123-dummydummydummy123"},
	{"placeholder-redacted", "password: [redacted]"},
	{"placeholder-redacted-word", "api_key=REDACTED_" + "9f8e7d6c5b4a"},
	{"placeholder-mask", "password: ********"},
	{"placeholder-mask-url", "https://user:****@db.example.com/app"},
	{"placeholder-ellipsis", "Use a test key (sk_" + "test_...) while developing."},
	{"placeholder-slack-docs-webhook", "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"},
	{"placeholder-percent", "password=%(db_password)s"},
	{"placeholder-sample", "token: sample_token_value_0123"},
	{"placeholder-fake", "client_secret: fake-client-secret-42"},
	{"name-of-secret", "apiKeySecret: OPENAI_API_KEY"},
	{"name-of-env", "password=process.env.DB_PASSWORD"},
	{"name-of-env-snake", "password: DB_PASSWORD_V2"},
	{"prose-prefix", "Stripe secret keys start with sk_" + "live_ and restricted keys with rk_" + "live_."},
	{"prose-github", "GitHub personal access tokens look like ghp_ followed by 36 characters."},
	{"prose-google", "Google API keys start with AIza; OAuth access tokens with ya29."},
	{"prose-pem-header", "Paste the block that starts with -----BEGIN PRIVATE KEY----- into the harness."},
	{"prose-putty-header", "A .ppk file starts with PuTTY-User-Key-File-3: ssh-ed25519"},
	{"prose-password-rule", "password: must be at least 12 characters"},
	{"prose-token-type", "token_type=bearer"},
	{"prose-secret-name", "secret_name=STRIPE_KEY"},
	{"prose-password-length", "password_min_length=12"},
	{"prose-type-hint", "password: Optional[str] = None"},
	{"prose-auth-kind", "auth: oauth2"},
	{"prose-bearer", "Send the Bearer token-based-authentication header."},
	{"prose-basic", "Send Basic base64(user:pass) in the Authorization header."},
	{"azure-sas-docs", "Append a SAS such as ?sv=<version>&sig=<signature> to the URL."},
	{"placeholder-digitalocean-zeros", "dop_v1_" + strings.Repeat("0", 64)},
	{"placeholder-age-key", "AGE-SECRET-KEY-1" + strings.Repeat("Q", 58)},
	{"prose-doppler", "Doppler personal tokens start with dp.pt. and service tokens with dp.st."},
	{"prose-age", "An age identity starts with AGE-SECRET-KEY-1; keep it out of the repository."},
	{"prose-ghs", "Installation tokens look like ghs_<app id>_<JWT> in the new format."},
	{"prose-pulumi", "Set PULUMI_ACCESS_TOKEN to a token starting with pul-."},
}

// corpusLine encodes a value for the corpus files.
func corpusLine(label, value string) string {
	if strings.ContainsAny(value, "\n\t\r") || strings.HasPrefix(value, `"`) || strings.TrimSpace(value) != value {
		value = strconv.Quote(value)
	}
	return label + "\t" + value
}

// readCorpus reads a corpus file into (label, value) pairs.
func readCorpus(t *testing.T, name string) [][2]string {
	t.Helper()
	f, err := os.Open(filepath.Join(corpusDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][2]string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		label, value, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("%s:%d: no tab between the label and the value", name, n)
		}
		if strings.HasPrefix(value, `"`) {
			if value, err = strconv.Unquote(value); err != nil {
				t.Fatalf("%s:%d: %v", name, n, err)
			}
		}
		out = append(out, [2]string{label, value})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// samplesPerLabel is how many fake credentials each template makes.
const samplesPerLabel = 3

func writeCorpus(t *testing.T) {
	g := &gen{rand.New(rand.NewPCG(2026, 12))}
	var secrets, looks []string
	secrets = append(secrets,
		"# Fake credentials for the credential detector's corpus test, one a line: <label> TAB <value>",
		"# (Go-quoted when it holds a line break). Random bodies from a fixed seed: none is real.",
		"# Regenerate: go test ./internal/credential -run TestCorpus -update-corpus")
	for _, tm := range secretTemplates {
		for range samplesPerLabel {
			secrets = append(secrets, corpusLine(tm.label, tm.gen(g)))
		}
	}
	looks = append(looks,
		"# Strings that resemble credentials but are none, one a line: <label> TAB <value>.",
		"# Regenerate: go test ./internal/credential -run TestCorpus -update-corpus")
	for _, tm := range lookalikeTemplates {
		for range samplesPerLabel {
			looks = append(looks, corpusLine(tm.label, tm.gen(g)))
		}
	}
	for _, l := range fixedLookalikes {
		looks = append(looks, corpusLine(l.label, l.value))
	}
	if err := os.MkdirAll(corpusDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, lines := range map[string][]string{"secrets.txt": secrets, "lookalikes.txt": looks} {
		if err := os.WriteFile(filepath.Join(corpusDir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCorpus measures the detector on the corpus: recall per label and
// overall on secrets.txt (every label but the stretch ones must be found
// in full, and overall recall must be at least 0.95), and false
// positives on lookalikes.txt (none). Each credential found must also be
// named as its template says, and redacted so that nothing recognisable
// is left. Run with -v for the table.
func TestCorpus(t *testing.T) {
	if *updateCorpus {
		writeCorpus(t)
	}
	templates := map[string]secretTemplate{}
	for _, tm := range secretTemplates {
		templates[tm.label] = tm
	}
	type tally struct{ found, total int }
	per := map[string]*tally{}
	found, total := 0, 0
	for _, e := range readCorpus(t, "secrets.txt") {
		label, value := e[0], e[1]
		tm, ok := templates[label]
		if !ok {
			t.Errorf("secrets.txt: label %q has no template (regenerate the corpus)", label)
			continue
		}
		if per[label] == nil {
			per[label] = &tally{}
		}
		per[label].total++
		total++
		kind, ok := Find(value)
		if !ok {
			if !tm.stretch {
				t.Errorf("%s: not found: %q", label, value)
			}
			continue
		}
		per[label].found++
		found++
		if tm.kind != "" && kind != tm.kind {
			t.Errorf("%s: found as %q, want %q", label, kind, tm.kind)
		}
		if red := Redact(value); red == value {
			t.Errorf("%s: Find says %s but Redact changes nothing", label, kind)
		} else if k, ok := Find(red); ok {
			t.Errorf("%s: redacted %q still holds a %s", label, red, k)
		}
	}
	labels := make([]string, 0, len(per))
	for l := range per {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	var b strings.Builder
	for _, l := range labels {
		fmt.Fprintf(&b, "%-40s %d/%d\n", l, per[l].found, per[l].total)
	}
	t.Logf("recall per label:\n%s", b.String())
	for _, tm := range secretTemplates {
		if per[tm.label] == nil {
			t.Errorf("secrets.txt has no line of label %q (regenerate the corpus)", tm.label)
		}
	}
	recall := float64(found) / float64(total)
	t.Logf("secrets: %d labels, %d credentials, %d found: recall %.3f", len(per), total, found, recall)
	if len(per) < 60 {
		t.Errorf("the corpus has %d labels, want at least 60", len(per))
	}
	if recall < 0.95 {
		t.Errorf("overall recall %.3f, want at least 0.95", recall)
	}

	fp := 0
	looks := readCorpus(t, "lookalikes.txt")
	for _, e := range looks {
		if kind, ok := Find(e[1]); ok {
			fp++
			t.Errorf("lookalike %s: %q found as %s", e[0], e[1], kind)
		}
		if len(Spans(e[1])) > 0 {
			t.Errorf("lookalike %s: Spans finds a credential in %q", e[0], e[1])
		}
	}
	t.Logf("lookalikes: %d strings, %d false positives", len(looks), fp)
}

// BenchmarkFindCorpus runs Find over every line of both corpus files:
// the cost on strings that trip the triggers and the patterns.
func BenchmarkFindCorpus(b *testing.B) {
	t := &testing.T{}
	var ss []string
	size := 0
	for _, name := range []string{"secrets.txt", "lookalikes.txt"} {
		for _, e := range readCorpus(t, name) {
			ss = append(ss, e[1])
			size += len(e[1])
		}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range ss {
			Find(s)
		}
	}
}
