// Package credtest holds fake credentials of every kind package credential
// recognises, for the tests that check credentials are found and never
// echoed.
//
// None of them is real. Each is built from pieces so that secret scanners
// do not mistake this file for a leak.
package credtest

// Fake credentials, one or more of each kind.
var (
	StripeLive   = "sk_" + "live_" + "51HqLyjWDarjtT1zdp7dcXq"
	StripeTest   = "sk_" + "test_" + "4eC39HqLyjWDarjtT1zdp7dc"
	StripeRK     = "rk_" + "live_" + "51HqLyjWDarjtT1zdp7dcRk"
	Webhook      = "whsec_" + "5WbX5kEWLlfzsGNjH64I8lOOqUB6e8FH"
	GitHubPAT    = "ghp_" + "R2d2C3p0BB8aLuKeSkYwAlKeR0123456789"
	GitHubOAuth  = "gho_" + "16C7e42F292c6912E7710c838347Ae178B4a"
	GitHubApp    = "ghs_" + "16C7e42F292c6912E7710c838347Ae178B4a"
	GitHubFine   = "github_" + "pat_" + "11eRqhqWJYAXeRpzds3mOj_AqnJcXKV5NDk0MEgr0VrZz1FB6D06qgOFb8cHqbIiU4njKs4DjKg0FZmaqm"
	Slack        = "xoxb-" + "2048123456-4096123456789-AbCdEfGhIjKlMnOpQrStUvWx"
	AWS          = "AKIA" + "Z3MNQ7RT5XK2PL4W"
	OpenAI       = "sk-" + "proj-" + "Qx7Lm2Vb9TzR4cWd8Kp3Hn6Ys1Ga5Ef0"
	OpenAIOld    = "sk-" + "Qx7Lm2Vb9TzR4cWd8Kp3Hn6Ys1Ga5Ef0T3BlbkFJ"
	Anthropic    = "sk-" + "ant-" + "api03-" + "Qx7Lm2Vb9TzR4cWd8Kp3Hn6Ys1Ga5Ef0_AbCdEf-012345"
	BearerToken  = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJl"
	BearerHeader = "Bearer " + BearerToken
	PEMBody      = "MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\nz8Hn3Kq0Vb2Lm5Tr7Wd9Xc1Ys4Ga6Ef8Jh0Pk2Nq5Rs7Tu9Vw1Xy3Za5Bc7De9Fg"
	PEM          = "-----BEGIN " + "RSA PRIVATE KEY-----\n" + PEMBody + "\n-----END RSA PRIVATE KEY-----"
	URLPass      = "postgres://app:" + "Tr0ub4dor3@db.internal.example:5432/app"
	URLToken     = "https://" + "x9TqLm2VbR7cWd4Kz8Hn" + "@git.example.com/acme/repo.git"
	URLAtInPass  = "https://app:" + "p@ssW0rd-Secret@mcp.example.com/sse"
	// Keys joined to a word by '_', as in a member name.
	StripeJoined = "x_" + "sk_" + "live_" + "51Hq8ZtLkR9vXw2Yp4Nm7QcB3dF6gJ"
	GitHubJoined = "key_" + "ghp_" + "R2d2C3p0BB8aLuKeSkYwAlKeR0123456789"
	// "Basic " and the base64 of "user:password", and of "ab:cdef".
	Basic      = "Basic " + "dXNlcjpwYXNzd29yZA=="
	BasicShort = "basic\t" + "YWI6Y2RlZg=="
	// Kinds added with the corpus of testdata/credentials.
	GitLab       = "glpat-" + "Qx7Lm2Vb9TzR4cWd8Kp3"
	GoogleAPIKey = "AIza" + "SyQx7Lm2Vb9TzR4cWd8Kp3Hn6Ys1Ga5Ef0T"
	SlackHook    = "https://hooks.slack.com/" + "services/TQ7LM2VB9/BZR4CWD8K/Qx7Lm2Vb9TzR4cWd8Kp3Hn6Y"
	Shopify      = "shpat_" + "9f2c4e6a8b0d1f3e5a7c9b1d3f5e7a9c"
	SendGrid     = "SG." + "Qx7Lm2Vb9TzR4cWd8Kp3Hn" + "." + "Ys1Ga5Ef0T3bLkFJr8Wq2Zc5Xv1Nb7Mh4Gd9Sa6Pe0U"
	Vault        = "hvs." + "CAESIQx7Lm2Vb9TzR4cWd8Kp3Hn6Ys1Ga5Ef0T3bLkFJr8Wq"
	PuTTY        = "PuTTY-User-Key-File-3: " + "ssh-ed25519\nEncryption: none\nComment: ci\nPublic-Lines: 1\nQx7Lm2Vb9TzR4cWd8Kp3Hn6Ys1Ga5Ef0T3bLkFJr8Wq2Zc5Xv1Nb7Mh4G\nPrivate-Lines: 1\nYs1Ga5Ef0T3bLkFJr8Wq2Zc5Xv1Nb7Mh4Gd9Sa6Pe0UQx7Lm2Vb9\nPrivate-MAC: 4f1e9a3c7b2d8e6f0a5c"
	// header {"alg":"HS256","typ":"JWT"}, payload {"sub":"1234567890"}.
	JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + "." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0" + "." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)
