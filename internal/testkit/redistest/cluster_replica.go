package redistest

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartClusterReplica adds a replica to a one-node cluster from
// StartCluster and waits until it is in sync, so that a test can WAIT for
// a replica on Cluster.
func StartClusterReplica(tb testing.TB, primary *Server) *Server {
	tb.Helper()
	r := Start(tb, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	id, err := bulk(primary.Addr, "CLUSTER MYID")
	if err != nil {
		tb.Fatalf("CLUSTER MYID: %v", err)
	}
	if got := primary.Do(tb, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(r.Port())); got != "+OK" {
		tb.Fatalf("CLUSTER MEET = %q", got)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		// The new node must know the primary before it can replicate it.
		if got := r.Do(tb, "CLUSTER", "REPLICATE", id); got == "+OK" {
			break
		} else if time.Now().After(deadline) {
			tb.Fatalf("CLUSTER REPLICATE %s = %q after 20s", id, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		info, err := bulk(primary.Addr, "INFO replication")
		if err == nil && strings.Contains(info, "state=online") {
			return r
		}
		if time.Now().After(deadline) {
			tb.Fatalf("cluster replica of %s not online after 20s: %v %q", primary.Addr, err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
