package serve

// apiRoutes registers the HTTP API under /api/v1/ (docs/api.md).
func (s *Server) apiRoutes() {}
