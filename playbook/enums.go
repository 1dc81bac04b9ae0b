package playbook

// The enumerations of the specification ("Tools & capabilities") and of
// docs/format.md, in the order the spec lists them.
var (
	// Providers are the values of connectorType, connections[].provider and
	// manifest.requiredConnectors.
	Providers = []string{"stripe", "github", "vercel", "posthog", "gmail", "resend", "linear", "slack", "notion", "mercury", "square", "plaid", "shopify", "ramp", "clover", "brex", "stripe_financial_connections", "teller", "paypal", "etsy", "amazon", "gusto"}
	// AuthKinds are the values of connections[].authKind.
	AuthKinds = []string{"oauth", "api_token", "aggregator_link"}
	// Sources are the values of tools[].source.
	Sources = []string{"primitive", "connector", "mcp"}
	// RiskClasses are the values of tools[].riskClass, from least to most
	// risky: read < internal < customer_comms < money (docs/format.md,
	// "Drift").
	RiskClasses = []string{"read", "internal", "customer_comms", "money"}
	// Scopes are the values of tools[].scope.
	Scopes = []string{"app", "workspace"}
	// StepKinds are the step kinds of format 1.6.
	StepKinds = []string{"agent", "gate"}
)

// RiskRank returns the position of class in [RiskClasses] (0 for read, 3
// for money), or -1 for an unknown class.
func RiskRank(class string) int {
	for i, c := range RiskClasses {
		if c == class {
			return i
		}
	}
	return -1
}
