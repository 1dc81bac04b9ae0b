package serve

// consoleRoutes registers the web console at / (package serve/console).
func (s *Server) consoleRoutes() {}
