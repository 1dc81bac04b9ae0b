package credential_test

import (
	"fmt"
	"strings"

	"github.com/openplaybook/openplaybook/internal/credential"
)

func ExampleFind() {
	// Built from pieces so that secret scanners leave this file alone.
	key := "sk_" + "live_" + "51HqLyjWDarjtT1zdp7dcXq"
	kind, ok := credential.Find("charge with " + key)
	fmt.Println(kind, ok)
	fmt.Println(credential.Describe(kind))

	// Prose and placeholders are not credentials.
	fmt.Println(credential.Find("Stripe secret keys start with sk_live_, as in sk_live_XXXXXXXXXXXX"))
	// Output:
	// Stripe secret key true
	// a Stripe secret key
	//  false
}

func ExampleRedact() {
	url := "postgres://app:" + "Tr0ub4dor3@db.example:5432/app"
	fmt.Println(credential.Redact(`unknown member "` + url + `" in "requires"`))
	fmt.Println(credential.Redact("Authorization: Bearer " + "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ"))
	// Output:
	// unknown member "[redacted URL with credentials]" in "requires"
	// Authorization: Bearer [redacted bearer token]
}

func ExampleRedactFrom() {
	name := "xoxb-" + "2048123456-4096123456789-AbCdEfGhIjKlMnOpQrStUvWx"
	// The lower-cased name no longer looks like a token, but it is one.
	msg := fmt.Sprintf("name %q has upper-case letters (did you mean %q?)", name, strings.ToLower(name))
	fmt.Println(credential.RedactFrom(msg, name))
	// Output:
	// name "[redacted Slack token]" has upper-case letters (did you mean "[redacted Slack token]"?)
}
