package serve

// APIRoute is one endpoint of the API as the tests see it.
type APIRoute struct {
	Method, Path string
	Public       bool
	Query        []string
}

// APIRoutes returns the API's endpoints, from the table apiRoutes
// registers.
func APIRoutes() []APIRoute {
	var out []APIRoute
	for _, rt := range apiTable() {
		out = append(out, APIRoute{Method: rt.method, Path: rt.path, Public: rt.public, Query: rt.query})
	}
	return out
}

// OpenAPIDescription returns the embedded OpenAPI description.
func OpenAPIDescription() []byte { return openAPIDescription }
