package serve

import (
	"encoding/json"
	"net/http"
)

func (s *Server) routes() {
	s.mux.Handle("/mcp/runs/{run}", s.gateway)
	s.apiRoutes()
	s.oauthDiscoveryRoutes()
	s.consoleRoutes()
}

// writeError writes {"error": msg} with status.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
