//go:build !unix

package pgtest

import (
	"fmt"
	"runtime"
)

// cluster is not made on this system: set [EnvURL] instead.
type cluster struct{}

func startCluster() (*cluster, error) {
	return nil, fmt.Errorf("%w: pgtest starts a local cluster only on unix systems, not %s; set %s", errUnavailable, runtime.GOOS, EnvURL)
}

func newCluster(durable bool) (*cluster, error) { return startCluster() }

func (c *cluster) url() string { return "" }

func (c *cluster) stop() error { return nil }
