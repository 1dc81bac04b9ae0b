package credential

// The kinds below are translated from rules of gitleaks' default
// configuration (https://github.com/gitleaks/gitleaks, config/gitleaks.toml;
// MIT License, Copyright (c) 2019 Zachary Rice). Each entry names the
// gitleaks rule id it comes from. They are written in this package's own
// form: the fixed prefix as a literal that gates the pattern, the random
// part as a group that must look generated and be no placeholder
// ([randomRun], [placeholder]), and [keyStart] in place of gitleaks' \b
// (a key joined to a word by '_' is still found). RE2 has no lookaround;
// none of the rules needs one. Where gitleaks ends a match with a
// delimiter class, the pattern here stops at its fixed length instead:
// a key with more characters after it is still a key. Each rule passes
// the look-alike corpus with no false positive (corpus_test.go) and has
// an independent sample and near misses (gitleaks_test.go).

// Kinds from gitleaks' rules, as [Find] and [Span] name them.
const (
	DigitalOceanToken          = "DigitalOcean token"
	DopplerToken               = "Doppler token"
	PulumiAccessToken          = "Pulumi access token"
	TerraformCloudToken        = "Terraform Cloud API token"
	AtlassianAPIToken          = "Atlassian API token"
	HerokuAPIKey               = "Heroku API key"
	GrafanaServiceAccountToken = "Grafana service account token"
	GrafanaCloudToken          = "Grafana Cloud API token"
	GrafanaAPIKey              = "Grafana API key"
	DatabricksToken            = "Databricks access token"
	PostmanAPIKey              = "Postman API key"
	AgeSecretKey               = "age secret key"
	FlyioToken                 = "Fly.io token"
	PlanetScaleToken           = "PlanetScale token"
	PlanetScalePassword        = "PlanetScale password"
	SentryAuthToken            = "Sentry auth token"
	OnePasswordServiceToken    = "1Password service account token"
	RubyGemsAPIKey             = "RubyGems API key"
	PrefectAPIKey              = "Prefect API key"
	NewRelicAPIKey             = "New Relic user API key"
	DynatraceToken             = "Dynatrace API token"
	SourcegraphToken           = "Sourcegraph access token"
)

// gitleaksKinds are tried after the kinds of [providerKinds] and before
// the generic shapes (so that a JSON Web Token inside a GitHub
// installation token is named for the token).
var gitleaksKinds = []kind{
	// GitHub App installation tokens in the stateless format: ghs_, the
	// app id, '_', then a JWT (GitHub recommends ghs_[A-Za-z0-9._]{36,}
	// for both formats: https://github.blog/changelog/2026-05-15-github-app-installation-tokens-per-request-override-header/).
	// Not a gitleaks rule (its github-app-token rule has the opaque
	// format only, which [providerKinds] covers).
	prefixed(GitHubToken, "a GitHub token", []string{"ghs_"}, `ghs_[0-9]{1,20}_`, `eyJ[0-9A-Za-z_-]{10,}\.[0-9A-Za-z_-]{10,}\.[0-9A-Za-z_-]{10,}`),

	// digitalocean-pat, digitalocean-access-token,
	// digitalocean-refresh-token: dop_v1_, doo_v1_, dor_v1_ + 64
	// hexadecimal digits.
	prefixed(DigitalOceanToken, "a DigitalOcean token", []string{"dop_v1_", "doo_v1_", "dor_v1_"}, `do[por]_v1_`, `[0-9a-f]{64}`),

	// doppler-api-token: dp.pt. + 43. Doppler's other token types share
	// the scheme (dp.st. service, dp.sa. service account, dp.ct. CLI,
	// dp.scim., dp.audit.: https://docs.doppler.com/docs/token-formats);
	// a service token may carry its config's name before the random part.
	prefixed(DopplerToken, "a Doppler token", []string{"dp.pt.", "dp.st.", "dp.sa.", "dp.ct.", "dp.scim.", "dp.audit."},
		`dp\.(?:pt|st|sa|ct|scim|audit)\.`, `(?:[0-9A-Za-z_-]{1,40}\.)?[0-9A-Za-z]{40,}`),

	// pulumi-api-token: pul- + 40 hexadecimal digits.
	prefixed(PulumiAccessToken, "a Pulumi access token", []string{"pul-"}, `pul-`, `[0-9a-f]{40}`),

	// hashicorp-tf-api-token: 14 characters, .atlasv1., then 60 to 70
	// (HCP Terraform user, team and organization tokens).
	{
		name: TerraformCloudToken, what: "a Terraform Cloud API token", lits: []string{".atlasv1."},
		re:    lazyRegexp(keyStart + `([0-9A-Za-z]{14}\.atlasv1\.([0-9A-Za-z_=-]{60,70}))`),
		token: 2, cred: 1,
	},

	// atlassian-api-token (its prefixed form): ATATT3 + 186 (Jira,
	// Confluence and Bitbucket Cloud API tokens). Its other form, 24
	// characters after a name such as JIRA_TOKEN, is what [Secret] finds.
	prefixed(AtlassianAPIToken, "an Atlassian API token", []string{"ATATT3"}, `ATATT3`, `[0-9A-Za-z_=-]{150,}`),

	// heroku-api-key-v2: HRKU-AA + 58. heroku-api-key: a UUID assigned to
	// a name with "heroku" in it; here only to a name that says it holds
	// a key (HEROKU_API_KEY, heroku_auth_token), not to HEROKU_APP_ID,
	// which is a UUID too.
	prefixed(HerokuAPIKey, "a Heroku API key", []string{"HRKU-"}, `HRKU-`, `AA[0-9A-Za-z_-]{58}`),
	{
		name: HerokuAPIKey, what: "a Heroku API key", foldLits: []string{"heroku"},
		re: lazyRegexp(`(?i:heroku[_.-]?(?:api[_.-]?)?(?:key|token|auth[_.-]?token|password|secret))` + assignment +
			`(` + uuid + `)`),
		token: 1, cred: 1,
	},

	// grafana-service-account-token: glsa_ + 32 + _ + 8 hexadecimal
	// digits; grafana-cloud-api-token: glc_ + base64;
	// grafana-api-key: the legacy keys, base64 of {"k":" ...
	prefixed(GrafanaServiceAccountToken, "a Grafana service account token", []string{"glsa_"}, `glsa_`, `[0-9A-Za-z]{32}_[0-9A-Fa-f]{8}`),
	prefixed(GrafanaCloudToken, "a Grafana Cloud API token", []string{"glc_"}, `glc_`, `[0-9A-Za-z+/]{32,400}={0,3}`),
	prefixed(GrafanaAPIKey, "a Grafana API key", []string{"eyJrIjoi"}, `eyJrIjoi`, `[0-9A-Za-z+/]{70,400}={0,3}`),

	// databricks-api-token: dapi + 32 hexadecimal digits, and an optional
	// -N.
	prefixed(DatabricksToken, "a Databricks access token", []string{"dapi"}, `dapi`, `[0-9a-f]{32}(?:-[0-9])?`),

	// postman-api-token: PMAK- + 24 + '-' + 34 hexadecimal digits.
	prefixed(PostmanAPIKey, "a Postman API key", []string{"PMAK-"}, `PMAK-`, `[0-9a-fA-F]{24}-[0-9a-fA-F]{34}`),

	// age-secret-key: AGE-SECRET-KEY-1 + 58 characters of Bech32's
	// alphabet (https://age-encryption.org/v1); the post-quantum keys
	// AGE-SECRET-KEY-PQ-1 are longer.
	prefixed(AgeSecretKey, "an age secret key", []string{"AGE-SECRET-KEY-"}, `AGE-SECRET-KEY-(?:PQ-)?1`, `[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58,}`),

	// flyio-access-token: fo1_ + 43; fm1a_, fm1r_, fm2_ + base64
	// (macaroons, sent as "FlyV1 fm2_...").
	prefixed(FlyioToken, "a Fly.io token", []string{"fo1_"}, `fo1_`, `[0-9A-Za-z_-]{43}`),
	prefixed(FlyioToken, "a Fly.io token", []string{"fm1a_", "fm1r_", "fm2_"}, `(?:fm1[ar]|fm2)_`, `[0-9A-Za-z+/]{100,}={0,3}`),

	// planetscale-api-token, planetscale-oauth-token: pscale_tkn_,
	// pscale_oauth_; planetscale-password: pscale_pw_; each + 32 to 64.
	prefixed(PlanetScaleToken, "a PlanetScale token", []string{"pscale_tkn_", "pscale_oauth_"}, `pscale_(?:tkn|oauth)_`, `[0-9A-Za-z_=.-]{32,64}`),
	prefixed(PlanetScalePassword, "a PlanetScale password", []string{"pscale_pw_"}, `pscale_pw_`, `[0-9A-Za-z_=.-]{32,64}`),

	// sentry-user-token: sntryu_ + 64 hexadecimal digits;
	// sentry-org-token: sntrys_, base64 of a JSON object with "iat" and
	// "region_url", '_' and 43. The older tokens (64 hexadecimal digits
	// after a name such as SENTRY_AUTH_TOKEN) are what [Secret] finds.
	prefixed(SentryAuthToken, "a Sentry auth token", []string{"sntryu_"}, `sntryu_`, `[0-9a-f]{64}`),
	prefixed(SentryAuthToken, "a Sentry auth token", []string{"sntrys_"}, `sntrys_`,
		`eyJpYXQiO[0-9A-Za-z+/]{10,200}(?:LCJyZWdpb25fdXJs|InJlZ2lvbl91cmwi|cmVnaW9uX3VybCI6)[0-9A-Za-z+/]{10,200}={0,2}_[0-9A-Za-z+/]{43}`),

	// 1password-service-account-token: ops_ + base64 of a JSON object.
	prefixed(OnePasswordServiceToken, "a 1Password service account token", []string{"ops_eyJ"}, `ops_`, `eyJ[0-9A-Za-z+/]{250,}={0,3}`),

	// rubygems-api-token: rubygems_ + 48 hexadecimal digits.
	prefixed(RubyGemsAPIKey, "a RubyGems API key", []string{"rubygems_"}, `rubygems_`, `[0-9a-f]{48}`),

	// prefect-api-token: pnu_ + 36.
	prefixed(PrefectAPIKey, "a Prefect API key", []string{"pnu_"}, `pnu_`, `[0-9A-Za-z]{36}`),

	// new-relic-user-api-key: NRAK- + 27 (gitleaks also wants a name
	// such as NEW_RELIC nearby; the prefix is distinctive enough).
	prefixed(NewRelicAPIKey, "a New Relic user API key", []string{"NRAK-"}, `NRAK-`, `[0-9A-Za-z]{27}`),

	// dynatrace-api-token: dt0c01. + 24 + '.' + 64.
	prefixed(DynatraceToken, "a Dynatrace API token", []string{"dt0c01."}, `dt0c01\.`, `[0-9A-Za-z]{24}\.[0-9A-Za-z]{64}`),

	// sourcegraph-access-token (its prefixed forms): sgp_, an optional
	// instance id (16 hexadecimal digits or "local") and '_', then 40
	// hexadecimal digits.
	prefixed(SourcegraphToken, "a Sourcegraph access token", []string{"sgp_"}, `sgp_`, `(?:[0-9a-fA-F]{16}_|local_)?[0-9a-fA-F]{40}`),
}
