package obs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/store"
)

// Check is one readiness check: nil when ready. Its error is logged, never
// shown to the prober.
type Check struct {
	Name string
	Fn   func(context.Context) error
}

// StoreWritable checks that st commits a write transaction.
func StoreWritable(st store.Store) Check {
	return Check{Name: "store", Fn: func(ctx context.Context) error {
		return st.Tx(ctx, func(store.Tx) error { return nil })
	}}
}

// MCPServersReachable checks each MCP server of h: a server at a URL
// accepts a TCP connection at its host and port; a command server's
// program is found (on PATH, or at its path relative to its cwd). Nothing
// is sent and no process is started.
func MCPServersReachable(h *harness.Harness) []Check {
	if h == nil {
		return nil
	}
	var cs []Check
	for name, s := range h.MCPServers {
		s := s
		cs = append(cs, Check{Name: "mcp:" + name, Fn: func(ctx context.Context) error {
			if s.URL != "" {
				u, err := url.Parse(s.URL)
				if err != nil || u.Host == "" {
					return fmt.Errorf("URL %q has no host", s.URL)
				}
				hostport := u.Host
				if u.Port() == "" {
					port := "80"
					if u.Scheme == "https" {
						port = "443"
					}
					hostport = net.JoinHostPort(u.Hostname(), port)
				}
				var d net.Dialer
				c, err := d.DialContext(ctx, "tcp", hostport)
				if err != nil {
					return err
				}
				return c.Close()
			}
			cmd := s.Command
			if strings.ContainsRune(cmd, filepath.Separator) && !filepath.IsAbs(cmd) && s.Cwd != "" {
				cmd = filepath.Join(s.Cwd, cmd)
			}
			_, err := exec.LookPath(cmd)
			return err
		}})
	}
	return cs
}

// Health serves /healthz (the process answers: 200 "ok") and /readyz
// (every check passed within 3 s: 200 "ready"; else 503 "not ready").
// Neither needs authentication nor says more than that; the failing
// checks are logged at warn level with their errors.
type Health struct {
	O      *Obs
	Checks []Check
	// Timeout bounds each check; zero is 3 s.
	Timeout time.Duration
}

// Healthz is the liveness handler.
func (h *Health) Healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte("ok\n"))
}

// Readyz is the readiness handler.
func (h *Health) Readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := h.Ready(r.Context()); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("not ready\n"))
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// Ready runs the checks concurrently and returns their errors joined
// (each prefixed with its check's name), or nil.
func (h *Health) Ready(ctx context.Context) error {
	to := h.Timeout
	if to <= 0 {
		to = 3 * time.Second
	}
	errs := make([]error, len(h.Checks))
	var wg sync.WaitGroup
	for i, c := range h.Checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, to)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- c.Fn(cctx) }()
			select {
			case err := <-done:
				if err != nil {
					errs[i] = fmt.Errorf("%s: %w", c.Name, err)
				}
			case <-cctx.Done():
				errs[i] = fmt.Errorf("%s: no answer within %s", c.Name, to)
			}
		}()
	}
	wg.Wait()
	err := errors.Join(errs...)
	if err != nil && h.O != nil {
		h.O.Log.Warn("not ready", "problems", err.Error())
	}
	return err
}
