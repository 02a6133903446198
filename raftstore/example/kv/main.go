// Command kv is a replicated key-value service: three raft nodes, each
// with its raft log and stable store in a raftstore.Store and its data in a
// raftstore.FSM (both Vigil DBs), talking over raft's TCP transport on
// localhost, each serving HTTP. A 3-node cluster on one machine, a
// process per node, in three commands (each in a terminal of its own, or
// with & at the end):
//
//	go run ./example/kv -dir /tmp/kv -node 1   # raft on :7001, HTTP on :8001
//	go run ./example/kv -dir /tmp/kv -node 2   # raft on :7002, HTTP on :8002
//	go run ./example/kv -dir /tmp/kv -node 3   # raft on :7003, HTTP on :8003
//
// or all three in one process: go run ./example/kv -dir /tmp/kv. Then:
//
//	curl -X PUT --data-binary world localhost:8001/kv/hello   # a write (a follower redirects to the leader)
//	curl localhost:8002/kv/hello                              # a read from that node's replica
//	curl 'localhost:8003/kv/hello?consistent'                 # a read the leader confirms first
//	curl -X DELETE localhost:8001/kv/hello
//	curl localhost:8001/status                                # role, leader, applied index, checksum
//
// Stop a node with Ctrl-C and start it again with the same -dir: it comes
// back from its Vigil DBs and raft snapshots (the other two go on while one
// is down: a quorum is two).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	dir := flag.String("dir", "", "data directory (required): node i keeps its DBs and snapshots in DIR/nodeI")
	nodes := flag.Int("nodes", 3, "number of nodes")
	raftPort := flag.Int("raft-port", 7001, "raft TCP port of the first node (the others follow)")
	httpPort := flag.Int("http-port", 8001, "HTTP port of the first node (the others follow)")
	only := flag.Int("node", 0, "run only node N (1-based) in this process; the others run in processes of their own (0: all in this one)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "kv: -dir is required")
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := startCluster(clusterConfig{
		Dir: *dir, Nodes: *nodes, Host: "127.0.0.1", RaftPort: *raftPort, HTTPPort: *httpPort, Only: *only,
		LogOutput: os.Stderr,
	})
	if err != nil {
		log.Fatalf("kv: %v", err)
	}
	for _, n := range c.nodes {
		log.Printf("kv: node %s: raft %s, HTTP http://%s", n.id, n.raftAddr, n.httpAddr)
	}
	<-ctx.Done()
	log.Printf("kv: shutting down")
	if err := c.close(); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatalf("kv: %v", err)
	}
}
