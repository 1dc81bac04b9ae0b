package mcphost

import (
	"context"
	"fmt"
	"sync"
)

// Result is the outcome of connecting to one server in [ConnectAll].
type Result struct {
	// Server is the live session, nil when Err is set. The caller closes
	// it.
	Server *Server
	// Tools is the server's tools as Connect listed them (listed again
	// only when the server announced a change since; see [Server.Tools]
	// for problems). The slice is shared with the server's cache: do not
	// modify it or its Tools.
	Tools []Tool
	// Err says why the server could not be used.
	Err error
}

// ConnectAll connects to every server in cfgs concurrently, each within
// its own Timeout and ctx, and returns the results by logical name. It
// returns when every server is connected or has failed. Names must be
// unique: every entry of a name given twice fails, and none of them is
// started.
func ConnectAll(ctx context.Context, cfgs []ServerConfig) map[string]Result {
	out := make(map[string]Result, len(cfgs))
	count := map[string]int{}
	for _, c := range cfgs {
		count[c.Name]++
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for name, n := range count {
		if n > 1 {
			out[name] = Result{Err: &Error{Server: name, Op: "config", Msg: fmt.Sprintf("the server name is configured %d times", n)}}
		}
	}
	for _, c := range cfgs {
		if count[c.Name] > 1 {
			continue
		}
		wg.Go(func() {
			var r Result
			r.Server, r.Err = Connect(ctx, c)
			if r.Err == nil {
				r.Tools, r.Err = r.Server.connected(ctx)
				if r.Err != nil {
					r.Server.Close()
					r.Server = nil
				}
			}
			mu.Lock()
			out[c.Name] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}
