package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/raftstore"
)

type clusterConfig struct {
	Dir      string
	Nodes    int
	Host     string
	RaftPort int // 0: any free port (then a restart cannot find the same addresses)
	HTTPPort int // 0: any free port
	// Only, if not 0, runs node Only (1-based) alone in this process; the
	// others are other processes, found by the port scheme (RaftPort and
	// HTTPPort must be set).
	Only      int
	LogOutput io.Writer
}

type node struct {
	id       raft.ServerID
	raftAddr raft.ServerAddress
	httpAddr string

	store *raftstore.Store
	fsm   *raftstore.FSM
	trans *raft.NetworkTransport
	r     *raft.Raft
	srv   *http.Server
	ln    net.Listener
}

type cluster struct {
	nodes []*node
	// httpOf maps a node's raft address to its HTTP address, for
	// redirecting writes to the leader (the nodes share one process).
	httpOf map[raft.ServerAddress]string
	wg     sync.WaitGroup
}

func port(base, i int) int {
	if base == 0 {
		return 0
	}
	return base + i
}

// startCluster starts cfg.Nodes nodes and bootstraps them if their data
// directories are new.
func startCluster(cfg clusterConfig) (c *cluster, err error) {
	if cfg.Only != 0 && (cfg.RaftPort == 0 || cfg.HTTPPort == 0 || cfg.Only < 0 || cfg.Only > cfg.Nodes) {
		return nil, fmt.Errorf("node %d of %d: a node of its own needs fixed raft and HTTP ports and a number from 1 to %d", cfg.Only, cfg.Nodes, cfg.Nodes)
	}
	c = &cluster{httpOf: map[raft.ServerAddress]string{}}
	defer func() {
		if err != nil {
			_ = c.close()
		}
	}()
	// The transports first: the bootstrap configuration needs every
	// node's address. A node of another process is only its addresses.
	var servers []raft.Server
	for i := range cfg.Nodes {
		id := raft.ServerID(fmt.Sprintf("node%d", i+1))
		raftAddr := raft.ServerAddress(net.JoinHostPort(cfg.Host, fmt.Sprint(port(cfg.RaftPort, i))))
		httpAddr := net.JoinHostPort(cfg.Host, fmt.Sprint(port(cfg.HTTPPort, i)))
		if cfg.Only == 0 || cfg.Only == i+1 {
			n := &node{id: id}
			c.nodes = append(c.nodes, n)
			if n.trans, err = raft.NewTCPTransport(string(raftAddr), nil, 3, 10*time.Second, cfg.LogOutput); err != nil {
				return nil, fmt.Errorf("%s: raft transport: %w", n.id, err)
			}
			n.raftAddr = n.trans.LocalAddr()
			if n.ln, err = net.Listen("tcp", httpAddr); err != nil {
				return nil, fmt.Errorf("%s: HTTP listener: %w", n.id, err)
			}
			n.httpAddr = n.ln.Addr().String()
			raftAddr, httpAddr = n.raftAddr, n.httpAddr
		}
		c.httpOf[raftAddr] = httpAddr
		servers = append(servers, raft.Server{ID: id, Address: raftAddr, Suffrage: raft.Voter})
	}
	for _, n := range c.nodes {
		if err := c.startNode(n, cfg, raft.Configuration{Servers: servers}); err != nil {
			return nil, fmt.Errorf("%s: %w", n.id, err)
		}
	}
	return c, nil
}

func (c *cluster) startNode(n *node, cfg clusterConfig, servers raft.Configuration) error {
	dir := filepath.Join(cfg.Dir, string(n.id))
	var err error
	// The raft log and stable store: one Vigil DB, every write synced.
	if n.store, err = raftstore.Open(filepath.Join(dir, "raft"), nil); err != nil {
		return err
	}
	// The key-value data: another Vigil DB, restored from raft snapshots.
	if n.fsm, err = raftstore.OpenFSM(filepath.Join(dir, "fsm"), nil); err != nil {
		return err
	}
	snaps, err := raft.NewFileSnapshotStore(dir, 2, cfg.LogOutput)
	if err != nil {
		return err
	}
	conf := raft.DefaultConfig()
	conf.LocalID = n.id
	conf.SnapshotThreshold = 4096
	conf.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft-" + string(n.id), Level: hclog.Info, Output: cfg.LogOutput})
	exists, err := raft.HasExistingState(n.store, n.store, snaps)
	if err != nil {
		return err
	}
	if !exists {
		if err := raft.BootstrapCluster(conf, n.store, n.store, snaps, n.trans, servers); err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
	}
	if n.r, err = raft.NewRaft(conf, n.fsm, n.store, n.store, snaps, n.trans); err != nil {
		return err
	}
	n.srv = &http.Server{Handler: c.handler(n), ReadHeaderTimeout: 10 * time.Second}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		_ = n.srv.Serve(n.ln)
	}()
	return nil
}

// close stops the HTTP servers, then raft, then closes the DBs.
func (c *cluster) close() error {
	var errs []error
	for _, n := range c.nodes {
		if n.srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			errs = append(errs, n.srv.Shutdown(ctx))
			cancel()
		} else if n.ln != nil {
			errs = append(errs, n.ln.Close())
		}
	}
	c.wg.Wait()
	for _, n := range c.nodes {
		if n.r != nil {
			errs = append(errs, n.r.Shutdown().Error())
		} else if n.trans != nil {
			errs = append(errs, n.trans.Close())
		}
	}
	for _, n := range c.nodes {
		if n.fsm != nil {
			errs = append(errs, n.fsm.Close())
		}
		if n.store != nil {
			errs = append(errs, n.store.Close())
		}
	}
	return errors.Join(errs...)
}

const applyTimeout = 5 * time.Second

// handler serves one node:
//
//	GET /kv/KEY[?consistent]   the value (404 if absent); consistent: the
//	                           leader confirms its leadership and applies
//	                           everything committed before it reads
//	PUT /kv/KEY                sets KEY to the request body (on the leader;
//	                           a follower answers 307 with the leader's URL)
//	DELETE /kv/KEY             removes KEY (likewise)
//	GET /status                JSON: id, state, leader, applied index, checksum
func (c *cluster) handler(n *node) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /kv/{key...}", func(w http.ResponseWriter, req *http.Request) {
		key := []byte(req.PathValue("key"))
		if _, ok := req.URL.Query()["consistent"]; ok {
			if n.r.State() != raft.Leader {
				c.redirect(w, req, n)
				return
			}
			if err := n.r.VerifyLeader().Error(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			if err := n.r.Barrier(applyTimeout).Error(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		v, err := n.fsm.Get(key)
		switch {
		case errors.Is(err, vigil.ErrNotFound):
			http.Error(w, "not found", http.StatusNotFound)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			w.Header().Set("X-Raft-Applied-Index", fmt.Sprint(n.fsm.AppliedIndex()))
			_, _ = w.Write(v)
		}
	})
	write := func(w http.ResponseWriter, req *http.Request, op raftstore.Op) {
		if n.r.State() != raft.Leader {
			c.redirect(w, req, n)
			return
		}
		f := n.r.Apply(raftstore.AppendCommand(nil, op), applyTimeout)
		if err := f.Error(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if resp, ok := f.Response().(error); ok && resp != nil {
			http.Error(w, resp.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Raft-Index", fmt.Sprint(f.Index()))
		w.WriteHeader(http.StatusNoContent)
	}
	mux.HandleFunc("PUT /kv/{key...}", func(w http.ResponseWriter, req *http.Request) {
		value, err := io.ReadAll(http.MaxBytesReader(w, req.Body, 16<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		write(w, req, raftstore.Op{Kind: raftstore.OpPut, Key: []byte(req.PathValue("key")), Value: value})
	})
	mux.HandleFunc("DELETE /kv/{key...}", func(w http.ResponseWriter, req *http.Request) {
		write(w, req, raftstore.Op{Kind: raftstore.OpDelete, Key: []byte(req.PathValue("key"))})
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, req *http.Request) {
		leader, leaderID := n.r.LeaderWithID()
		sum, err := n.fsm.Checksum()
		st := map[string]any{
			"id": n.id, "state": n.r.State().String(), "leader": leaderID,
			"leader_http": c.httpOf[leader], "applied_index": n.fsm.AppliedIndex(),
			"checksum": fmt.Sprintf("%016x", sum),
		}
		if err != nil {
			st["error"] = err.Error()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})
	return mux
}

// redirect sends a request that needs the leader to the leader's HTTP
// address, or answers 503 while there is none.
func (c *cluster) redirect(w http.ResponseWriter, req *http.Request, n *node) {
	leader, _ := n.r.LeaderWithID()
	addr, ok := c.httpOf[leader]
	if !ok {
		http.Error(w, "no leader", http.StatusServiceUnavailable)
		return
	}
	u := *req.URL
	u.Scheme, u.Host = "http", addr
	if !strings.HasPrefix(u.Path, "/") {
		u.Path = "/" + u.Path
	}
	http.Redirect(w, req, u.String(), http.StatusTemporaryRedirect)
}
