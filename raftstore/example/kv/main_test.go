package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestKVService(t *testing.T) {
	c, err := startCluster(clusterConfig{Dir: t.TempDir(), Nodes: 3, Host: "127.0.0.1", LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.close(); err != nil {
			t.Error(err)
		}
	}()
	// Every node must know the leader, not just the leader itself: a
	// follower that has not yet heard from it answers a write with 503.
	waitUntil(t, "a leader every node knows", func() bool {
		leaders := 0
		for _, n := range c.nodes {
			if n.r.State() == raft.Leader {
				leaders++
			}
			if addr, _ := n.r.LeaderWithID(); addr == "" {
				return false
			}
		}
		return leaders == 1
	})
	do := func(method, url string, body []byte) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req) // follows a follower's redirect to the leader
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	// Writes through every node, followers included.
	for i := range 30 {
		n := c.nodes[i%len(c.nodes)]
		if code, b := do("PUT", fmt.Sprintf("http://%s/kv/key/%02d", n.httpAddr, i), fmt.Appendf(nil, "value %d", i)); code != http.StatusNoContent {
			t.Fatalf("PUT through %s: %d %s", n.id, code, b)
		}
	}
	if code, b := do("DELETE", fmt.Sprintf("http://%s/kv/key/07", c.nodes[1].httpAddr), nil); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", code, b)
	}
	// A consistent read sees every acknowledged write at once.
	if code, b := do("GET", fmt.Sprintf("http://%s/kv/key/29?consistent", c.nodes[2].httpAddr), nil); code != http.StatusOK || string(b) != "value 29" {
		t.Fatalf("consistent GET: %d %q", code, b)
	}
	// Every replica gets there, with the same checksum.
	waitUntil(t, "every replica", func() bool {
		var sums []string
		for _, n := range c.nodes {
			code, b := do("GET", fmt.Sprintf("http://%s/kv/key/28", n.httpAddr), nil)
			gone, _ := do("GET", fmt.Sprintf("http://%s/kv/key/07", n.httpAddr), nil)
			if code != http.StatusOK || string(b) != "value 28" || gone != http.StatusNotFound {
				return false
			}
			_, st := do("GET", fmt.Sprintf("http://%s/status", n.httpAddr), nil)
			var s struct{ Checksum string }
			if err := json.Unmarshal(st, &s); err != nil {
				t.Fatal(err)
			}
			sums = append(sums, s.Checksum)
		}
		return sums[0] == sums[1] && sums[1] == sums[2]
	})
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freeRun returns a base port p such that p..p+n-1 are free now.
func freeRun(t *testing.T, n int) int {
	t.Helper()
	for range 100 {
		base := 20000 + rand.IntN(40000)
		var lns []net.Listener
		for i := range n {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		for _, ln := range lns {
			ln.Close()
		}
		if len(lns) == n {
			return base
		}
	}
	t.Fatal("no run of free ports")
	return 0
}

// TestKVServiceNodePerProcess starts the three nodes as -node 1, 2 and 3
// would (here in one test process, each its own cluster value knowing the
// others only by the port scheme): they bootstrap one cluster, a write
// through one is read through another.
func TestKVServiceNodePerProcess(t *testing.T) {
	dir := t.TempDir()
	raftPort, httpPort := freeRun(t, 3), freeRun(t, 3)
	var cs []*cluster
	for i := 1; i <= 3; i++ {
		c, err := startCluster(clusterConfig{Dir: dir, Nodes: 3, Host: "127.0.0.1", RaftPort: raftPort, HTTPPort: httpPort, Only: i, LogOutput: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := c.close(); err != nil {
				t.Error(err)
			}
		}()
		if len(c.nodes) != 1 || len(c.httpOf) != 3 {
			t.Fatalf("-node %d runs %d nodes and knows %d", i, len(c.nodes), len(c.httpOf))
		}
		cs = append(cs, c)
	}
	waitUntil(t, "a leader every node knows", func() bool {
		for _, c := range cs {
			if addr, _ := c.nodes[0].r.LeaderWithID(); addr == "" {
				return false
			}
		}
		return true
	})
	url := func(i int, path string) string { return fmt.Sprintf("http://%s%s", cs[i].nodes[0].httpAddr, path) }
	req, _ := http.NewRequest("PUT", url(1, "/kv/hello"), bytes.NewReader([]byte("world")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT through node2: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get(url(2, "/kv/hello?consistent"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "world" {
		t.Fatalf("consistent GET through node3: %d %q", resp.StatusCode, b)
	}
	if _, err := startCluster(clusterConfig{Dir: t.TempDir(), Nodes: 3, Host: "127.0.0.1", Only: 1}); err == nil {
		t.Fatal("-node without fixed ports started")
	}
}
