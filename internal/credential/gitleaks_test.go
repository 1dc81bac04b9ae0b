package credential

import (
	"encoding/base64"
	"strings"
	"testing"
)

// Independent samples of the kinds translated from gitleaks' rules
// (kinds_gitleaks.go): fake tokens written for this test in each
// provider's documented format (their bodies are digests of phrases, not
// credentials; prefixes are split so that secret scanners pass this file
// over), and near misses that must not be found.

var (
	b64json = func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	b64url  = func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	// fakeJWT is a JWT with a GitHub App's claims and a made-up signature.
	fakeJWT = b64url(`{"alg":"RS256","typ":"JWT"}`) + "." + b64url(`{"iss":"1234567","iat":1764547200,"exp":1764550800,"installation":98765432}`) +
		".H89RnXzM1n0PtY3qzbvD-h0XmDl4Hi_0vZiiPwP6MCN"
	sentryOrgClaims = b64json(`{"iat":1764547200.123456,"url":"https://sentry.io","region_url":"https://us.sentry.io","org":"acme-fake"}`)
)

var gitleaksSamples = []struct {
	kind   string
	sample string
	misses []string
}{
	{GitHubToken, "gh" + "s_1234567_" + fakeJWT, []string{
		"gh" + "s_1234567_not-a-jwt-at-all-here",
		"the stateless format is gh" + "s_<app id>_<JWT>",
	}},
	{DigitalOceanToken, "do" + "p_v1_bcfd949db56a1f8ccd144cbb20cf83e641a5ad8a8cf4ca45151ec8d94c123b0c", []string{
		"do" + "p_v1_bcfd949db56a1f8ccd144cbb20cf83e641a5ad8a",                         // 40 digits, not 64
		"do" + "p_v1_BCFD949DB56A1F8CCD144CBB20CF83E641A5AD8A8CF4CA45151EC8D94C123B0C", // upper case
		"do" + "p_v1_" + strings.Repeat("0", 64),
		"DigitalOcean personal access tokens start with do" + "p_v1_.",
	}},
	{DigitalOceanToken, "do" + "o_v1_3f47ec9f01cb6aad5b6f2c2aec73354a4520fb90cd891377f23d9448267c6ef0", nil},
	{DigitalOceanToken, "do" + "r_v1_99d0a1e0b0471d23a3ae9201364ee8df1fe0c3536546e1cb4de9fa2d48dc048e", nil},
	{DopplerToken, "dp" + ".pt.ymycsbx6TyGwnUFPyKbNvCasUPr3xJ5jZYIdI9vuFCx", []string{
		"dp" + ".pt.ymycsbx6TyGwnUFPyKb", // too short
		"Doppler tokens look like dp" + ".pt. or dp" + ".st. followed by 43 characters.",
	}},
	{DopplerToken, "dp" + ".st.prd.n0pei2LqTGlBAJxuek70GaXiZxjMkqRwLUtyK9ymyc5", nil},
	{PulumiAccessToken, "pu" + "l-3f47ec9f01cb6aad5b6f2c2aec73354a4520fb90", []string{
		"pu" + "l-3f47ec9f01cb6aad5b6f", // 20 digits
		"pu" + "l-request-handler-for-billing-2026",
	}},
	{TerraformCloudToken, "BWYqVeM14KVoos" + ".atlas" + "v1.FmgUFrb7BcWuENoQRiGZOn_vQtiMdqk-z14E-RpXA4XZdjv-OK_moKqITS0P-okpWuE", []string{
		"BWYqVeM14KVoos" + ".atlas" + "v2.FmgUFrb7BcWuENoQRiGZOn_vQtiMdqk-z14E-RpXA4XZdjv-OK_moKqITS0P-okpWuE",
		"BWYqVeM14KVoos" + ".atlas" + "v1.FmgUFrb7BcWuENoQRiG", // too short
	}},
	{AtlassianAPIToken, "ATA" + "TT3oQ1nEUbcW_H-PwpCEg-M8nhsoEMl1JhvPQs-Kwsfsdo1AwKlFwNxDEwJbkdje-_qIcrZ0gsSS4dYULhj8ffPJztTzR78r9QSdln3hquzrvd1cVRNy5tFOGjaBCHAHXLuKAldjr3LO0t1i9GapU4YfQCer8JXDtEoFFhdxhnlBz6gPj6g6=692A4F94", []string{
		"ATA" + "TT3oQ1nEUbcW_H-PwpCEg-M8nhsoEMl1Jhv", // too short
	}},
	{HerokuAPIKey, "HRK" + "U-AAzaBwPpR6XnfaxWMfbApHYbS0dSiOd9QZoTjLNyLluEgmPROlzNEdNhyJPs", []string{
		"HRK" + "U-AAzaBwPpR6XnfaxWMfbApHYbS0", // too short
	}},
	{HerokuAPIKey, "HEROKU_API_KEY=" + "3f47ec9f-01cb-4aad-9b6f-2c2aec73354a", []string{
		"HEROKU_APP_ID=" + "3f47ec9f-01cb-4aad-9b6f-2c2aec73354a", // an app id is no secret
		"heroku_region: 3f47ec9f-01cb-4aad-9b6f-2c2aec73354a",
	}},
	{GrafanaServiceAccountToken, "gl" + "sa_lEIRfykiZiXMHzDyWWcohNH2y6YvWdCA_57deb6d8", []string{
		"gl" + "sa_lEIRfykiZiXMHzDyWWcohNH2y6YvWdCA", // no checksum
		"gl" + "sa_lEIRfykiZiXMHzDyWWcohNH2y6YvWdCA_57deXYZ8",
	}},
	{GrafanaCloudToken, "gl" + "c_eyJ88tILHLnFH3Gm19OOovz4vWmn6jMxYWheAE09M2aXDZgi57Joz4lhjnr+jKNSSr+inqIRl9WViEW2RgaBlG7z55yxukdHTUydhSP3864OpCasngTM1t/dRns=", []string{
		"gl" + "c_eyJ88tILHLnFH3Gm19", // too short
	}},
	{GrafanaAPIKey, "eyJrI" + "joicSxNUwKqmyf7iRJES1tY4IWZB4yEcgYfhAsImXQ3kTQJ4wxBAlnPDm4fnY58kI5gPgKxkMbywyZH4ilj9Oma", []string{
		"eyJrI" + "joicSxNUwKqmyf7iRJES1tY4IWZB4y", // too short
	}},
	{DatabricksToken, "da" + "pi99d0a1e0b0471d23a3ae9201364ee8df", []string{
		"rapida" + "pi99d0a1e0b0471d23a3ae9201364ee8df", // inside a word
		"da" + "pi99d0a1e0b0471d23a3ae92",               // too short
	}},
	{DatabricksToken, "da" + "pie3e75911a8de7f879af5f0c296f22ece-2", nil},
	{PostmanAPIKey, "PM" + "AK-e3e75911a8de7f879af5f0c2-96f22eceecca2a73720ea7b8c716c16dc5", []string{
		"PM" + "AK-e3e75911a8de7f879af5f0c2",            // no second part
		"12345678-3f47ec9f-01cb-4aad-9b6f-2c2aec73354a", // a Postman collection uid
	}},
	{AgeSecretKey, "AGE-SECRET-" + "KEY-1657WMDMN4TG22EPTYFHUD9E2LKHP0NTRXVHKNR3G9QV0ZJ4J0H4NWWXETN", []string{
		"age1657wmdmn4tg22eptyfhud9e2lkhp0ntrxvhknr3g9qv0zj4j0h4nwwxetn",                  // a recipient: public
		"AGE-SECRET-" + "KEY-1657WMDMN4TG22EPTYFHUD9E2LKHP0NTRXVHK",                       // too short
		"AGE-SECRET-" + "KEY-1657WMDMN4TG22EPTYFHUD9E2LKHP0NTRXVHKNR3G9QV0ZJ4J0H4NWWXETB", // B is not Bech32
	}},
	{FlyioToken, "FlyV1 fm" + "2_ot/i2lEeOD3y6pIgpcK3Lx7c/MrkPmtDaRVojOjbOJxjg2PzeFtSvYGIunwZwF6Njd+D0MQj/LF+wEcyrbOlv8pYl8aN7z2bOi7hYkWAJhx6btQL8VKDFF3rgW8TC6trZzFHk1IKgfZacW/PhXReIlIq4oO5BtySoTxr49bZJT3Hax1chvD2", []string{
		"fm" + "2_ot/i2lEeOD3y6pIgpcK3Lx7c", // too short
	}},
	{FlyioToken, "fo" + "1_bjSn-iniG6SCWpfEmpdcdCieJJFGNnV_AqpFpDMlK5m", nil},
	{PlanetScaleToken, "pscale_" + "tkn_7ZLzYCTEgNq4QO4yGDXjiv3wxdbKXkgoQrOUj9H5BIw", []string{
		"pscale_" + "tkn_7ZLzYCTEgNq4QO4y", // too short
		"pscale_" + "database_name_for_the_billing_service_2026",
	}},
	{PlanetScaleToken, "pscale_" + "oauth_n0pei2LqTGlBAJxuek70GaXiZxjMkqRwLUty", nil},
	{PlanetScalePassword, "pscale_" + "pw_ymycsbx6TyGwnUFPyKbNvCasUPr3xJ5jZYIdI9vuFCx", nil},
	{SentryAuthToken, "sn" + "tryu_cd891377f23d9448267c6ef063d82c375961b03e22bd5d842f30589b64c2bff5", []string{
		"sn" + "tryu_cd891377f23d9448267c6ef063d82c3", // too short
	}},
	{SentryAuthToken, "sn" + "trys_" + sentryOrgClaims + "_oucrQCLdMZ4SO9O26WO3qJzoJlcT44HRMJmdO+m0aYG", []string{
		"sn" + "trys_" + b64json(`{"iat":1764547200.123456,"url":"https://sentry.io","org":"acme-fake"}`) + "_oucrQCLdMZ4SO9O26WO3qJzoJlcT44HRMJmdO+m0aYG", // no region_url
	}},
	{OnePasswordServiceToken, "op" + "s_eyJTJdbhSqV9WBKsNHthr5SHp+yhq5nLQjJIG7jo52Y9/JgulFXqd3d6OB0PKUW7g9rQCheRxeGGSyqIAaB8IZ2Sq0mIATDyrz+BLWGBXGvjn8JRVbAreRGMxmBVoutru0YF0S5iOSAsPA1e1Z/8uOAP4oQXCVFI6RtSKHpjwLDiUhrb5XTqZH0cSrliwITHT8xSNFKr3RG3q2XJXr+s+1F8mWNgLbRGW84I7QxqI9qTlNOIv5CUl2O72us+LqcvXjYBhImiSkWBfsRGYjHahB0nnIU16L4rKmNq/gC2SVjsENH", []string{
		"op" + "s_eyJTJdbhSqV9WBKsNHthr5SHp", // too short
	}},
	{RubyGemsAPIKey, "ruby" + "gems_1fe0c3536546e1cb4de9fa2d48dc048eae054bcf332da96d", []string{
		"ruby" + "gems_1fe0c3536546e1cb4de9", // too short
	}},
	{PrefectAPIKey, "pn" + "u_n0pei2LqTGlBAJxuek70GaXiZxjMkqRwLUty", []string{"pn" + "u_n0pei2LqTGlBAJxuek"}},
	{NewRelicAPIKey, "NR" + "AK-YK1JIQGCM0ARUIZPTQAJHMRYCPX", []string{"NR" + "AK-YK1JIQGCM0AR"}},
	{DynatraceToken, "dt0" + "c01.GQUMDRRXYMNEKCMCMPB34TCE.YZPIFVQYRPIQPP3TGEXXYKBRITRVPCOIJVT2MIMHTC3G3HPTBP51WYXBGCSAF7Q5", []string{
		"dt0" + "c01.GQUMDRRXYMNEKCMCMPB34TCE", // no secret part
	}},
	{SourcegraphToken, "sg" + "p_955b5df9d8e760ed_6c8bdbcafa976e2e02ef81fd5e2dacb6941b4a3a", []string{
		"sg" + "p_955b5df9d8e760ed_6c8bdbcafa97", // too short
	}},
	{SourcegraphToken, "sg" + "p_local_6c8bdbcafa976e2e02ef81fd5e2dacb6941b4a3a", nil},
}

// TestGitleaksKinds: each sample is found and named for its kind, alone,
// assigned in a dotenv line and inside a JSON string; Redact leaves none
// of it; no near miss is found.
func TestGitleaksKinds(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range gitleaksSamples {
		seen[c.kind] = true
		for _, in := range []string{c.sample, "export SVC_CREDENTIAL=" + c.sample + "\n", `{"value": "` + c.sample + `", "n": 1}`} {
			if kind, ok := Find(in); !ok || kind != c.kind {
				t.Errorf("Find(%q) = %q, %v; want %q", in, kind, ok, c.kind)
			}
			red := Redact(in)
			if _, ok := Find(red); ok {
				t.Errorf("Redact(%q) = %q still holds a credential", in, red)
			}
			body := c.sample[len(c.sample)-16:]
			if strings.Contains(red, body) {
				t.Errorf("Redact(%q) = %q keeps part of the credential", in, red)
			}
		}
		for _, m := range c.misses {
			if kind, ok := Find(m); ok {
				t.Errorf("near miss of %s: Find(%q) = %q", c.kind, m, kind)
			}
		}
	}
	for _, k := range gitleaksKinds {
		if !seen[k.name] {
			t.Errorf("kind %q has no sample", k.name)
		}
	}
}
