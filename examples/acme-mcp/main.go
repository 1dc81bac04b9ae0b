// Command acme-mcp is the "acme" MCP server of the bundled examples: a
// stand-in for a shop's own order system, which
// examples/failed-charge-recovery.json reads through the tool
// mcp.acme.search_orders. It speaks MCP over stdio (one JSON-RPC message a
// line) and serves one read-only tool, search_orders, from a JSON file of
// orders (examples/data/orders.json: an array of {orderId, customerEmail,
// status, total, currency, placedAt}).
//
//	go run ./examples/acme-mcp -orders examples/data/orders.json
//
// It refuses to start unless ACME_MCP_TOKEN is set (the credential a real
// order system would need; the harness passes it as
// ${secret:ACME_MCP_TOKEN}, and this server only checks that it is there).
// examples/harness.yaml binds it; examples/demo.sh builds it once into its
// temporary directory.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// order is one record of the orders file, and one element of the tool's
// answer (without customerEmail).
type order struct {
	OrderID       string `json:"orderId"`
	CustomerEmail string `json:"customerEmail,omitempty"`
	Status        string `json:"status"`
	Total         int64  `json:"total"`
	Currency      string `json:"currency"`
	PlacedAt      string `json:"placedAt"`
}

const inputSchema = `{
  "type": "object",
  "properties": {
    "customerEmail": {"type": "string", "format": "email", "description": "Customer email to search by."},
    "status": {"type": "string", "enum": ["pending_payment", "paid", "shipped", "cancelled"], "description": "Only orders in this status."}
  },
  "required": ["customerEmail"],
  "additionalProperties": false
}`

const outputSchema = `{
  "type": "object",
  "properties": {
    "orders": {
      "type": "array",
      "description": "Orders, newest first.",
      "items": {
        "type": "object",
        "properties": {
          "orderId": {"type": "string", "description": "Acme order id."},
          "status": {"type": "string", "description": "Order status."},
          "total": {"type": "integer", "minimum": 0, "description": "Order total. In the currency's smallest unit (e.g. cents)."},
          "currency": {"type": "string", "pattern": "^[a-z]{3}$", "description": "ISO 4217 currency code, lowercase."},
          "placedAt": {"type": "string", "format": "date-time", "description": "When the order was placed."}
        },
        "required": ["orderId", "status"],
        "additionalProperties": false
      }
    }
  },
  "required": ["orders"],
  "additionalProperties": false
}`

func main() {
	file := flag.String("orders", "examples/data/orders.json", "the orders file (relative to the working directory)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("acme-mcp: ")
	if os.Getenv("ACME_MCP_TOKEN") == "" {
		log.Fatal("ACME_MCP_TOKEN is not set")
	}
	orders, err := load(*file)
	if err != nil {
		log.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "acme", Version: "1.0.0"}, nil)
	server.AddTool(&mcp.Tool{
		Name:         "search_orders",
		Title:        "Search orders",
		Description:  "Search Acme's order system for a customer's orders, with status and the payment they are waiting on.",
		InputSchema:  json.RawMessage(inputSchema),
		OutputSchema: json.RawMessage(outputSchema),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			CustomerEmail string `json:"customerEmail"`
			Status        string `json:"status"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, fmt.Errorf("search_orders: %w", err)
		}
		found := []order{}
		for _, o := range orders {
			if strings.EqualFold(o.CustomerEmail, args.CustomerEmail) && (args.Status == "" || o.Status == args.Status) {
				o.CustomerEmail = ""
				found = append(found, o)
			}
		}
		result := map[string]any{"orders": found}
		text, _ := json.Marshal(result)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}, StructuredContent: result}, nil
	})
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

// load reads the orders file, newest first.
func load(path string) ([]order, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var orders []order
	if err := json.Unmarshal(src, &orders); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i, o := range orders {
		if o.OrderID == "" || o.CustomerEmail == "" || o.Status == "" {
			return nil, errors.New(path + ": order " + fmt.Sprint(i) + " lacks orderId, customerEmail or status")
		}
	}
	sort.SliceStable(orders, func(i, j int) bool { return orders[i].PlacedAt > orders[j].PlacedAt })
	return orders, nil
}
