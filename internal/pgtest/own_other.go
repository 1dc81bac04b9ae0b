//go:build !unix

package pgtest

import "testing"

// Cluster is not made on this system; see the unix build.
type Cluster struct{}

// ClusterOptions configure [NewCluster].
type ClusterOptions struct{ Durable bool }

// NewCluster skips t (or fails it under CI): no local clusters here.
func NewCluster(t testing.TB, opt ClusterOptions) *Cluster {
	t.Helper()
	_, err := newCluster(opt.Durable)
	if inCI() {
		t.Fatalf("pgtest: %v", err)
	}
	t.Skipf("pgtest: %v", err)
	return nil
}

func (cl *Cluster) URL() string    { return "" }
func (cl *Cluster) Crash() error   { return nil }
func (cl *Cluster) Restart() error { return nil }
