module github.com/openplaybook/openplaybook

go 1.26.8

require (
	github.com/go-json-experiment/json v1.27.2
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	github.com/spf13/cobra v1.10.2
)

require (
	github.com/goccy/go-yaml v1.19.2 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/modelcontextprotocol/go-sdk v1.8.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	github.com/stripe/stripe-go/v82 v82.5.1 // indirect
	golang.org/x/text v0.14.0 // indirect
)
