package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
