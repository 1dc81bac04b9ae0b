package credential

import (
	"regexp"
	"slices"
	"sync"
)

// The rules below are written from each provider's published token
// format; the comment above each names where the format is documented.
// Where a provider documents no format of its own (Teller, Gusto's OAuth
// tokens, Clover's merchant API tokens, a Plaid secret), its credentials
// are found by what carries them: an HTTP Basic or Authorization header,
// a PEM private key (Teller's mTLS key), a URL's user info, or an
// assignment to a name such as access_token or PLAID_SECRET ([Secret]).

// Kinds, as [Find] and [Span] name them and [Redact] writes them.
const (
	StripeSecretKey          = "Stripe secret key"
	StripeRestrictedKey      = "Stripe restricted key"
	StripeWebhookSecret      = "Stripe webhook signing secret"
	GitHubToken              = "GitHub token"
	GitHubFineGrainedPAT     = "GitHub fine-grained personal access token"
	GitLabToken              = "GitLab token"
	SlackToken               = "Slack token"
	SlackWebhookURL          = "Slack webhook URL"
	VercelToken              = "Vercel token"
	PostHogPersonalAPIKey    = "PostHog personal API key"
	GoogleAPIKey             = "Google API key"
	GoogleOAuthAccessToken   = "Google OAuth access token"
	GoogleOAuthRefreshToken  = "Google OAuth refresh token"
	GoogleOAuthClientSecret  = "Google OAuth client secret"
	GCPServiceAccountKey     = "Google Cloud service account key"
	ResendAPIKey             = "Resend API key"
	LinearAPIKey             = "Linear API key"
	NotionToken              = "Notion integration token"
	MercuryAPIToken          = "Mercury API token"
	SquareToken              = "Square token"
	PlaidAccessToken         = "Plaid access token"
	ShopifyToken             = "Shopify token"
	RampToken                = "Ramp API credential"
	CloverRefreshToken       = "Clover refresh token"
	BrexToken                = "Brex user token"
	PayPalAccessToken        = "PayPal access token"
	BraintreeAccessToken     = "Braintree access token"
	EtsyOAuthToken           = "Etsy OAuth token"
	AWSAccessKeyID           = "AWS access key id"
	AWSSecretAccessKey       = "AWS secret access key"
	AWSSessionToken          = "AWS session token"
	AmazonLWAClientSecret    = "Login with Amazon client secret"
	AmazonLWAToken           = "Login with Amazon token"
	AmazonMWSAuthToken       = "Amazon MWS auth token"
	AzureStorageAccountKey   = "Azure storage account key"
	AzureSharedAccessKey     = "Azure shared access key"
	AzureSharedAccessSig     = "Azure shared access signature"
	NpmToken                 = "npm access token"
	PyPIToken                = "PyPI API token"
	HuggingFaceToken         = "Hugging Face token"
	AnthropicAPIKey          = "Anthropic API key"
	OpenAIAPIKey             = "OpenAI API key"
	SendGridAPIKey           = "SendGrid API key"
	TwilioAccountSID         = "Twilio account SID"
	TwilioAPIKey             = "Twilio API key"
	VaultToken               = "HashiCorp Vault token"
	PEMPrivateKey            = "PEM private key block"
	PuTTYPrivateKey          = "PuTTY private key"
	BearerToken              = "bearer token"
	AuthorizationCredentials = "Authorization header credentials"
	JSONWebToken             = "JSON Web Token"
	BasicCredentials         = "HTTP Basic credentials"
	URLWithCredentials       = "URL with credentials"
	Password                 = "password"
	Secret                   = "secret"
)

// prefixed returns the kind of a key that starts with a fixed prefix:
// prefix (a pattern) then body (a pattern for the random part, which must
// pass [randomRun] and not be a placeholder), after [keyStart]. lits are
// literal strings one of which every match contains.
func prefixed(name, what string, lits []string, prefix, body string) kind {
	return kind{
		name: name, what: what, lits: lits,
		re:    lazyRegexp(keyStart + `(` + prefix + `(` + body + `))`),
		token: 2, cred: 1,
	}
}

// isolated is [prefixed] for a key whose prefix is also common inside
// base64 text ("EAAA", "A21AA"): it must stand apart from any base64 or
// base64url character on both sides, so a run inside an encoded blob is
// not taken for a key.
func isolated(name, what string, lits []string, prefix, body string) kind {
	return kind{
		name: name, what: what, lits: lits,
		re:    lazyRegexp(`(?:^|[^0-9A-Za-z+/=_-])(` + prefix + `(` + body + `))(?:[^0-9A-Za-z+/=_-]|$)`),
		token: 2, cred: 1,
	}
}

// uuid is the pattern of a lower-case hexadecimal UUID.
const uuid = `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`

// assignment is what joins a name to its value: an optional closing
// quote, then '=', ':', ":=" or "=>" between optional blanks, then an
// optional opening quote.
const assignment = `["']?[ \t]*(?:=|:=|=>|:)[ \t]*["']?`

// kinds are tried in order: where two match the same text ("sk-ant-..."
// is also an OpenAI-shaped key), the first names it. Several entries may
// share a name (one kind written two ways). The providers' own formats
// come first (those of [gitleaksKinds] after the ones written here), then
// the shapes any credential may take.
var kinds = slices.Concat(providerKinds, gitleaksKinds, genericKinds)

// providerKinds are the formats of the providers the spec's connectors
// reach, and of other common services.
var providerKinds = []kind{
	// Stripe: https://docs.stripe.com/keys ("sk_live_", "sk_test_",
	// "rk_live_", "rk_test_"); webhook signing secrets "whsec_":
	// https://docs.stripe.com/webhooks#verify-events. Stripe Financial
	// Connections is reached with the same secret and restricted keys.
	prefixed(StripeSecretKey, "a Stripe secret key", []string{"sk_live_", "sk_test_"}, `sk_(?:live|test)_`, `[0-9A-Za-z]{10,}`),
	prefixed(StripeRestrictedKey, "a Stripe restricted key", []string{"rk_live_", "rk_test_"}, `rk_(?:live|test)_`, `[0-9A-Za-z]{10,}`),
	prefixed(StripeWebhookSecret, "a Stripe webhook signing secret", []string{"whsec_"}, `whsec_`, `[0-9A-Za-z]{20,}`),

	// GitHub: ghp_ (personal), gho_ (OAuth), ghu_ (user-to-server), ghs_
	// (server-to-server), ghr_ (refresh):
	// https://github.blog/engineering/platform-security/behind-githubs-new-authentication-token-formats/;
	// github_pat_: https://docs.github.com/en/authentication/keeping-your-account-and-data-secure/managing-your-personal-access-tokens
	prefixed(GitHubToken, "a GitHub token", []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, `gh[pousr]_`, `[0-9A-Za-z]{20,}`),
	prefixed(GitHubFineGrainedPAT, "a GitHub fine-grained personal access token", []string{"github_pat_"}, `github_pat_`, `[0-9A-Za-z_]{22,}`),

	// GitLab token prefixes (glpat-, gldt-, glrt-, glptt-, glft-, glsoat-,
	// glcbt-, glimt-, gloas-, glagent-, glffct-, glwt- ...) and runner
	// registration tokens (GR1348941):
	// https://docs.gitlab.com/security/tokens/#token-prefixes (and
	// https://docs.gitlab.com/development/secure_coding_guidelines/#token-prefixes);
	// newer tokens are routable, with '.'-separated parts after the prefix.
	prefixed(GitLabToken, "a GitLab token", []string{"glpat-", "gldt-", "glrt-", "glrtr-", "glptt-", "glft-", "glsoat-", "glcbt-", "glimt-", "gloas-", "glagent-", "glffct-", "glwt-"},
		`gl(?:pat|dt|rtr|rt|ptt|ft|soat|cbt|imt|oas|agent|ffct|wt)-`, `[0-9A-Za-z_.-]{20,}`),
	prefixed(GitLabToken, "a GitLab token", []string{"GR1348941"}, `GR1348941`, `[0-9A-Za-z_-]{20,}`),

	// Slack tokens xoxb-, xoxp-, xoxa-, xoxr-, xoxs-, xoxo-, app-level
	// xapp-, configuration xoxe.xoxp- and refresh xoxe- tokens:
	// https://docs.slack.dev/authentication/tokens; incoming webhooks
	// https://hooks.slack.com/services/T.../B.../...:
	// https://docs.slack.dev/messaging/sending-messages-using-incoming-webhooks
	prefixed(SlackToken, "a Slack token", []string{"xox", "xapp-"}, `(?:xox[abposr]-|xoxe\.xox[bp]-|xoxe-|xapp-)`, `[0-9]+-[0-9A-Za-z-]{10,}`),
	{
		name: SlackWebhookURL, what: "a Slack webhook URL", lits: []string{"hooks.slack.com/"},
		re:    lazyRegexp(`(https?://hooks\.slack\.com/(?:services|workflows|triggers)/T[0-9A-Z]{6,}/([0-9A-Za-z/_-]{20,}))`),
		token: 2, cred: 1,
	},

	// Vercel: vcp_ (personal), vci_ (integration), vca_ (app access),
	// vcr_ (app refresh), vck_ (API key), each with 56 characters:
	// https://vercel.com/changelog/new-token-formats-and-secret-scanning
	prefixed(VercelToken, "a Vercel token", []string{"vcp_", "vci_", "vca_", "vcr_", "vck_"}, `vc[pikar]_`, `[0-9A-Za-z]{40,}`),

	// PostHog personal API keys start with phx_ (project keys, phc_, are
	// public by design and not reported):
	// https://posthog.com/docs/api/personal-api-keys
	prefixed(PostHogPersonalAPIKey, "a PostHog personal API key", []string{"phx_"}, `phx_`, `[0-9A-Za-z]{30,}`),

	// Google (Gmail and every Google API): API keys AIza + 35:
	// https://cloud.google.com/docs/authentication/api-keys; OAuth access
	// tokens ya29., refresh tokens 1//, client secrets GOCSPX-:
	// https://developers.google.com/identity/protocols/oauth2
	prefixed(GoogleAPIKey, "a Google API key", []string{"AIza"}, `AIza`, `[0-9A-Za-z_-]{35}`),
	prefixed(GoogleOAuthAccessToken, "a Google OAuth access token", []string{"ya29."}, `ya29\.`, `[0-9A-Za-z_-]{20,}`),
	prefixed(GoogleOAuthRefreshToken, "a Google OAuth refresh token", []string{"1//"}, `1//`, `0[0-9A-Za-z_-]{30,}`),
	prefixed(GoogleOAuthClientSecret, "a Google OAuth client secret", []string{"GOCSPX-"}, `GOCSPX-`, `[0-9A-Za-z_-]{24,}`),
	// A service account key file is JSON with "type": "service_account"
	// and its key as a PEM block in "private_key":
	// https://cloud.google.com/iam/docs/keys-create-delete. Before the PEM
	// kind, so that a key inside such a file is named for it.
	{
		name: GCPServiceAccountKey, what: "a Google Cloud service account key", lits: []string{"service_account"},
		trigger: func(s string) bool { return containsString(s, `"private_key"`) },
		re:      lazyRegexp(`"private_key"\s*:\s*"(-----BEGIN[^"]*)`),
		token:   -1, cred: 1,
		valid: func(s string, start, end int) bool { return base64Run(s[start:end], 24) },
	},

	// Resend API keys: re_ + an id + _ + the secret:
	// https://resend.com/docs/dashboard/api-keys/introduction
	prefixed(ResendAPIKey, "a Resend API key", []string{"re_"}, `re_`, `[0-9A-Za-z]{6,12}_[0-9A-Za-z_]{16,}`),

	// Linear personal API keys lin_api_ and OAuth tokens lin_oauth_:
	// https://linear.app/developers/graphql#personal-api-keys
	prefixed(LinearAPIKey, "a Linear API key", []string{"lin_api_", "lin_oauth_"}, `lin_(?:api|oauth)_`, `[0-9A-Za-z]{32,}`),

	// Notion integration tokens ntn_ (and the earlier secret_ + 43):
	// https://developers.notion.com/docs/authorization
	prefixed(NotionToken, "a Notion integration token", []string{"ntn_"}, `ntn_`, `[0-9A-Za-z]{40,}`),
	prefixed(NotionToken, "a Notion integration token", []string{"secret_"}, `secret_`, `[0-9A-Za-z]{43}`),

	// Mercury API tokens: secret-token:mercury_production_... or
	// ..._sandbox_...: https://docs.mercury.com/reference/getting-started-with-your-api
	prefixed(MercuryAPIToken, "a Mercury API token", []string{"secret-token:mercury_"}, `secret-token:mercury_(?:production|sandbox)_`, `[0-9A-Za-z_]{20,}`),

	// Square access tokens EAAA + 60 (sandbox and production), legacy
	// personal tokens sq0atp-, OAuth application secrets sq0csp-:
	// https://developer.squareup.com/docs/build-basics/access-tokens
	isolated(SquareToken, "a Square token", []string{"EAAA"}, `EAAA`, `[0-9A-Za-z_-]{60}`),
	prefixed(SquareToken, "a Square token", []string{"sq0atp-", "sq0csp-"}, `sq0(?:atp|csp)-`, `[0-9A-Za-z_-]{22,}`),

	// Plaid access tokens access-<environment>-<uuid>:
	// https://plaid.com/docs/api/items/#item-access-tokens (a Plaid
	// secret has no prefix: see [Secret]).
	prefixed(PlaidAccessToken, "a Plaid access token", []string{"access-"}, `access-(?:sandbox|development|production)-`, uuid),

	// Shopify: shpat_ (Admin API), shpca_ (custom app), shppa_ (private
	// app), shpss_ (app secret), each + 32 hexadecimal digits:
	// https://shopify.dev/changelog/length-of-the-shopify-access-token-is-increasing,
	// https://shopify.dev/changelog/app-secret-key-length-has-increased
	prefixed(ShopifyToken, "a Shopify token", []string{"shpat_", "shpca_", "shppa_", "shpss_"}, `shp(?:at|ca|pa|ss)_`, `[0-9a-fA-F]{32}`),

	// Ramp: OAuth access tokens ramp_tok_ and client secrets ramp_sec_
	// (client ids, ramp_id_, are not secret):
	// https://docs.ramp.com/developer-api/v1/authorization
	prefixed(RampToken, "a Ramp API credential", []string{"ramp_tok_", "ramp_sec_"}, `ramp_(?:tok|sec)_`, `[0-9A-Za-z]{30,}`),

	// Clover refresh tokens clvroar- + 32 hexadecimal digits (access
	// tokens are JWTs):
	// https://docs.clover.com/dev/docs/use-refresh-token-to-generate-new-expiring-token
	prefixed(CloverRefreshToken, "a Clover refresh token", []string{"clvroar-"}, `clvroar-`, `[0-9a-f]{32}`),

	// Brex user tokens bxt_: https://developer.brex.com/docs/authentication
	prefixed(BrexToken, "a Brex user token", []string{"bxt_"}, `bxt_`, `[0-9A-Za-z]{30,}`),

	// PayPal OAuth access tokens A21AA...:
	// https://developer.paypal.com/api/rest/authentication/; Braintree
	// access tokens access_token$<environment>$<merchant>$<secret>:
	// https://developer.paypal.com/braintree/docs/guides/extend/oauth/access-tokens
	isolated(PayPalAccessToken, "a PayPal access token", []string{"A21AA"}, `A21AA`, `[0-9A-Za-z_-]{50,}`),
	prefixed(BraintreeAccessToken, "a Braintree access token", []string{"access_token$"}, `access_token\$(?:production|sandbox)\$[0-9a-z]{16}\$`, `[0-9a-f]{32}`),

	// Etsy OAuth 2.0 access and refresh tokens: the numeric user id, '.',
	// then the token:
	// https://developers.etsy.com/documentation/essentials/authentication
	{
		name: EtsyOAuthToken, what: "an Etsy OAuth token",
		trigger: func(s string) bool { return containsString(s, ".") },
		re:      lazyRegexp(`(?:^|[^0-9A-Za-z._-])([0-9]{5,12}\.([0-9A-Za-z_-]{60,}))`),
		token:   2, cred: 1,
	},

	// AWS access key ids: AKIA (long-term), ASIA (temporary), ABIA, ACCA,
	// + 16: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-unique-ids;
	// secret access keys (40 characters of base64) are found next to
	// their id or assigned to aws_secret_access_key and kin, session
	// tokens assigned to aws_session_token or by their encoded start:
	// https://docs.aws.amazon.com/cli/latest/userguide/cli-configure-files.html
	{
		name: AWSAccessKeyID, what: "an AWS access key id", lits: []string{"AKIA", "ASIA", "ABIA", "ACCA"},
		re:    lazyRegexp(keyStart + `((?:AKIA|ASIA|ABIA|ACCA)([0-9A-Z]{16}))\b`),
		token: 2, cred: 1,
	},
	{
		name: AWSSecretAccessKey, what: "an AWS secret access key", lits: []string{"AKIA", "ASIA"},
		re:    lazyRegexp(`(?:AKIA|ASIA)[0-9A-Z]{16}[\s"',;:|=]{1,8}([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)`),
		token: 1, cred: 1,
	},
	{
		name: AWSSecretAccessKey, what: "an AWS secret access key", foldLits: []string{"secret"},
		re:    lazyRegexp(`(?i:aws_?secret_?access_?key|aws_?secret_?key|secret_?access_?key|aws_?secret)` + assignment + `([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)`),
		token: 1, cred: 1,
	},
	{
		name: AWSSessionToken, what: "an AWS session token", lits: []string{"IQoJb3JpZ2lu", "FwoGZXIvYXdz"},
		re:    lazyRegexp(keyStart + `((?:IQoJb3JpZ2lu|FwoGZXIvYXdz)([A-Za-z0-9/+=]{80,}))`),
		token: 2, cred: 1,
	},
	{
		name: AWSSessionToken, what: "an AWS session token", foldLits: []string{"token"},
		re:    lazyRegexp(`(?i:aws_?session_?token|aws_?security_?token)` + assignment + `([A-Za-z0-9/+=]{80,})`),
		token: 1, cred: 1,
	},

	// Amazon SP-API and Login with Amazon: client secrets
	// amzn1.oa2-cs.v1. + 64 hexadecimal digits, access tokens Atza|,
	// refresh tokens Atzr|:
	// https://developer-docs.amazon.com/sp-api/docs/connecting-to-the-selling-partner-api;
	// MWS auth tokens amzn.mws.<uuid>:
	// https://developer-docs.amazon.com/sp-api/docs/glossary
	prefixed(AmazonLWAClientSecret, "a Login with Amazon client secret", []string{"amzn1.oa2-cs.v1."}, `amzn1\.oa2-cs\.v1\.`, `[0-9a-f]{64}`),
	prefixed(AmazonLWAToken, "a Login with Amazon token", []string{"Atza|", "Atzr|"}, `Atz[ar]\|`, `[0-9A-Za-z_-]{40,}`),
	prefixed(AmazonMWSAuthToken, "an Amazon MWS auth token", []string{"amzn.mws."}, `amzn\.mws\.`, uuid),

	// Azure: storage (and Cosmos DB) connection strings carry
	// AccountKey=<88 characters of base64>:
	// https://learn.microsoft.com/azure/storage/common/storage-configure-connection-string;
	// Service Bus, Event Hubs and IoT Hub ones SharedAccessKey=<44>:
	// https://learn.microsoft.com/azure/service-bus-messaging/service-bus-sas;
	// a shared access signature is a query with sv= and sig=:
	// https://learn.microsoft.com/azure/storage/common/storage-sas-overview
	{
		name: AzureStorageAccountKey, what: "an Azure storage account key", foldLits: []string{"accountkey="},
		re:    lazyRegexp(`(?i:AccountKey)=([A-Za-z0-9+/]{86}==)`),
		token: 1, cred: 1,
	},
	{
		name: AzureSharedAccessKey, what: "an Azure shared access key", foldLits: []string{"sharedaccesskey="},
		re:    lazyRegexp(`(?i:SharedAccessKey)=([A-Za-z0-9+/]{42,44}=?)`),
		token: 1, cred: 1,
	},
	{
		name: AzureSharedAccessSig, what: "an Azure shared access signature", lits: []string{"sig="},
		trigger: func(s string) bool { return containsString(s, "sv=") },
		re:      lazyRegexp(`(?:^|[?&;])sig=([A-Za-z0-9%+/]{30,}(?:=|%3[Dd]){0,2})`),
		token:   1, cred: 1,
	},

	// npm access tokens npm_ + 36:
	// https://github.blog/changelog/2021-09-23-npm-has-a-new-access-token-format/
	prefixed(NpmToken, "an npm access token", []string{"npm_"}, `npm_`, `[0-9A-Za-z]{36}`),

	// PyPI API tokens: pypi- and a macaroon whose base64 starts "AgE"
	// (AgEIcHlwaS5vcmc for pypi.org): https://pypi.org/help/#apitoken
	prefixed(PyPIToken, "a PyPI API token", []string{"pypi-AgE"}, `pypi-`, `AgE[0-9A-Za-z_-]{50,}`),

	// Hugging Face user access tokens hf_ (and organisation tokens
	// api_org_): https://huggingface.co/docs/hub/security-tokens
	prefixed(HuggingFaceToken, "a Hugging Face token", []string{"hf_", "api_org_"}, `(?:hf_|api_org_)`, `[0-9A-Za-z]{30,}`),

	// Anthropic API keys sk-ant-api03-, admin keys sk-ant-admin01-,
	// OAuth tokens sk-ant-oat01-:
	// https://docs.anthropic.com/en/api/overview#authentication. Before
	// OpenAI, whose keys have the same shape.
	prefixed(AnthropicAPIKey, "an Anthropic API key", []string{"sk-ant-"}, `sk-ant-[a-z]+[0-9]*-`, `[0-9A-Za-z_-]{20,}`),
	// OpenAI API keys sk-, project keys sk-proj-, service account keys
	// sk-svcacct-, admin keys sk-admin-:
	// https://platform.openai.com/docs/api-reference/authentication
	prefixed(OpenAIAPIKey, "an OpenAI API key", []string{"sk-"}, `sk-(?:proj-|svcacct-|admin-)?`, `[0-9A-Za-z_-]{20,}`),

	// SendGrid API keys SG.<22>.<43>:
	// https://www.twilio.com/docs/sendgrid/ui/account-and-settings/api-keys
	prefixed(SendGridAPIKey, "a SendGrid API key", []string{"SG."}, `SG\.`, `[0-9A-Za-z_-]{22}\.[0-9A-Za-z_-]{43}`),

	// Twilio account SIDs AC and API key SIDs SK, + 32 hexadecimal digits
	// (the auth token, 32 hexadecimal digits, has no prefix: see
	// [Secret]): https://www.twilio.com/docs/glossary/what-is-a-sid,
	// https://www.twilio.com/docs/iam/api-keys
	{
		name: TwilioAccountSID, what: "a Twilio account SID", lits: []string{"AC"},
		re:    lazyRegexp(keyStart + `(AC([0-9a-f]{32}))\b`),
		token: 2, cred: 1,
	},
	{
		name: TwilioAPIKey, what: "a Twilio API key", lits: []string{"SK"},
		re:    lazyRegexp(keyStart + `(SK([0-9a-f]{32}))\b`),
		token: 2, cred: 1,
	},

	// HashiCorp Vault tokens hvs. (service), hvb. (batch), hvr.
	// (recovery), and before Vault 1.10 s. and b. + 24:
	// https://developer.hashicorp.com/vault/docs/concepts/tokens#token-prefixes
	prefixed(VaultToken, "a HashiCorp Vault token", []string{"hvs.", "hvb.", "hvr."}, `hv[sbr]\.`, `[0-9A-Za-z_-]{24,}`),
	{
		name: VaultToken, what: "a HashiCorp Vault token", lits: []string{"s.", "b."},
		re:    lazyRegexp(keyStart + `([sb]\.([0-9A-Za-z]{24}))\b`),
		token: 2, cred: 1,
	},
}

// genericKinds are shapes any credential may take: key blocks, header
// values, JSON Web Tokens, assignments to a name that says "secret".
var genericKinds = []kind{
	// PEM private keys: PKCS #1 (RSA), SEC 1 (EC), PKCS #8 (PRIVATE KEY,
	// ENCRYPTED PRIVATE KEY), OpenSSH, DSA, and OpenPGP private key
	// blocks: RFC 7468 section 10 and section 11; RFC 9580 section 6.2.
	{
		name: PEMPrivateKey, what: "a PEM private key block", lits: []string{"PRIVATE KEY"},
		// The header alone (as in "paste the block that starts with
		// -----BEGIN PRIVATE KEY-----") is not a key; it must be followed
		// by key material.
		re:     lazyRegexp(`-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?[A-Za-z0-9+/=]{24,}`),
		token:  -1,
		extend: pemBlockEnd,
	},
	// PuTTY private key files (PPK versions 2 and 3): a
	// "PuTTY-User-Key-File-N: <algorithm>" header, then "Private-Lines: N"
	// and the key: https://the.earth.li/~sgtatham/putty/0.80/htmldoc/AppendixC.html
	{
		name: PuTTYPrivateKey, what: "a PuTTY private key", lits: []string{"PuTTY-User-Key-File-"},
		re:     lazyRegexp(`PuTTY-User-Key-File-[0-9]+:[ \t]*[0-9A-Za-z@.-]+`),
		token:  -1,
		extend: puttyEnd,
	},

	{
		name: BearerToken, what: "a bearer token (an Authorization header value)", foldLits: []string{"bearer"},
		re:    lazyRegexp(`\b(?i:bearer)(?:[ \t]|\\+t)+([A-Za-z0-9._~+/-]{16,}=*)`),
		token: 1, cred: 1,
	},
	// Authorization header values in schemes other than Bearer and Basic
	// ("Token <key>", as Gusto's API tokens are sent:
	// https://docs.gusto.com/embedded-payroll/docs/authentication;
	// "ApiKey", "Key").
	{
		name: AuthorizationCredentials, what: "credentials in an Authorization header", foldLits: []string{"authorization"},
		re:    lazyRegexp(`(?i:authorization)` + assignment + `(?i:token|apikey|api-key|key|sso-key)[ \t]+([A-Za-z0-9._~+/=-]{16,})`),
		token: 1, cred: 1,
	},
	{
		// header.payload.signature, each base64url; the header is a JSON
		// object naming its "alg", so it always starts with "eyJ" ('{"'):
		// RFC 7519. After the bearer token, so that "Bearer eyJ..." is
		// named that.
		name: JSONWebToken, what: "a JSON Web Token (JWT)", lits: []string{"eyJ"},
		re:    lazyRegexp(keyStart + `(eyJ[0-9A-Za-z_-]+\.[0-9A-Za-z_-]+\.[0-9A-Za-z_-]*)`),
		token: -1, cred: 1,
		valid: func(s string, start, end int) bool { return jwtHeader(s[start:end]) },
	},

	// Assignments to a name that says it holds a secret
	// (api_key=..., "token": "...", CLIENT_SECRET: ...), whose value looks
	// generated and is no placeholder. Last, so that a key of a known kind
	// is named for it.
	{
		name: Secret, what: "a secret (a generated-looking value assigned to a name such as api_key, token or secret)",
		foldLits: []string{"secret", "key", "token", "credential", "auth"},
		re:       lazyRegexp(`(?i:secret|secret[_-]?key|api[_-]?key|apikey|access[_-]?key|private[_-]?key|token|credentials?|auth)` + assignment + `([^\s"'\x60,;&<>(){}\[\]\\]{8,})`),
		token:    -1, cred: 1,
		valid: func(s string, start, end int) bool { return secretValue(s[start:end]) },
	},
	// Passwords assigned to a name such as password=, DB_PASSWORD: or
	// "passphrase": a value of eight or more characters that looks
	// generated or mixes three of lower case, upper case, digits and
	// symbols. Tried on strings with no generated-looking run too.
	{
		name: Password, what: "a password (a value assigned to a name such as password)",
		foldLits: []string{"passw", "passphrase"}, anyString: true,
		re:    lazyRegexp(`(?i:password|passwd|passphrase)` + assignment + `([^\s"'\x60,;<>(){}\[\]\\]{8,})`),
		token: -1, cred: 1,
		valid: func(s string, start, end int) bool { return passwordValue(s[start:end]) },
	},
}

// lazyRegexp returns a function that compiles pattern on its first call
// (safe for concurrent callers; [sync.OnceValue]) and returns the same
// *regexp.Regexp on every call. A kind's pattern runs only on strings
// holding one of its literals or passing its trigger, so most kinds'
// patterns are never compiled by a process that scans a few documents
// (`openplaybook validate`): compiling all of them at package
// initialisation cost about 2.6 ms and 1.7 MB of each process's start-up
// (BENCHMARKS.md, issue 20). An invalid pattern panics on the first
// call, as [regexp.MustCompile] does; TestPatternsCompile compiles them
// all.
func lazyRegexp(pattern string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })
}
