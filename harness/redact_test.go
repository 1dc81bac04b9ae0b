package harness

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// The redactor's own tests are in internal/redact.

func ExampleRedactor() {
	redact := Redactor([]string{"s3cr3t-t0ken"})
	fmt.Println(redact("Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("bot:s3cr3t-t0ken"))))
	fmt.Println(redact("hex " + strings.ToUpper(hex.EncodeToString([]byte("s3cr3t-t0ken")))))
	fmt.Println(redact("token=s3cr3t\n  -t0ken;"))
	fmt.Println(redact("https://api.example/?key=s3cr3t%2Dt0%6Ben"))
	// Output:
	// Authorization: Basic Ym90On[redacted]g==
	// hex [redacted]
	// token=[redacted]
	// ;
	// https://api.example/?key=[redacted]
}
