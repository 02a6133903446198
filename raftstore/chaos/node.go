package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/raftstore"
)

// NodeConfig is one node process: a raft server with its log and stable
// store in a raftstore.Store and its key-value data in a raftstore.FSM,
// serving the replicated KV over HTTP.
type NodeConfig struct {
	ID       string
	Dir      string // the node's data: Dir/raft, Dir/fsm, raft's snapshots
	RaftAddr string // where it listens for raft, and its address in the configuration
	HTTPAddr string // where it serves clients and the test
	// Peers maps every voter's ID to its raft address; a node started
	// with Bootstrap makes them the first configuration.
	Peers map[string]string
	// Dial maps a peer's raft address to the address this node dials for
	// it: the test's proxy for the link from this node to that peer.
	Dial      map[string]string
	Bootstrap bool
	// UnsafeLocalReads serves reads from the local replica without
	// confirming leadership: a bug on purpose, for the test that shows the
	// checker catches stale reads.
	UnsafeLocalReads bool
}

// args encodes c as the command-line arguments that RunNodeArgs parses.
func (c NodeConfig) args() []string {
	a := []string{"-id", c.ID, "-dir", c.Dir, "-raft", c.RaftAddr, "-http", c.HTTPAddr,
		"-peers", joinMap(c.Peers), "-dial", joinMap(c.Dial)}
	if c.Bootstrap {
		a = append(a, "-bootstrap")
	}
	if c.UnsafeLocalReads {
		a = append(a, "-unsafe-local-reads")
	}
	return a
}

func joinMap(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func splitMap(s string) (map[string]string, error) {
	m := map[string]string{}
	if s == "" {
		return m, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		m[k] = v
	}
	return m, nil
}

// RunNodeArgs parses a node's command line (as NodeConfig.args writes it)
// and runs the node until SIGTERM or SIGINT; a SIGKILL is the test's crash.
func RunNodeArgs(args []string) error {
	fl := flag.NewFlagSet("node", flag.ContinueOnError)
	var c NodeConfig
	var peers, dial string
	fl.StringVar(&c.ID, "id", "", "node ID")
	fl.StringVar(&c.Dir, "dir", "", "data directory")
	fl.StringVar(&c.RaftAddr, "raft", "", "raft listen address")
	fl.StringVar(&c.HTTPAddr, "http", "", "HTTP listen address")
	fl.StringVar(&peers, "peers", "", "id=raftaddr,... of the voters")
	fl.StringVar(&dial, "dial", "", "raftaddr=dialaddr,... (the proxies)")
	fl.BoolVar(&c.Bootstrap, "bootstrap", false, "bootstrap the cluster if there is no state")
	fl.BoolVar(&c.UnsafeLocalReads, "unsafe-local-reads", false, "serve reads without confirming leadership (a deliberate bug)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	var err error
	if c.Peers, err = splitMap(peers); err != nil {
		return fmt.Errorf("-peers: %w", err)
	}
	if c.Dial, err = splitMap(dial); err != nil {
		return fmt.Errorf("-dial: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return RunNode(ctx, c)
}

// node is a running NodeConfig.
type node struct {
	cfg   NodeConfig
	store *raftstore.Store
	fsm   *raftstore.FSM
	trans *raft.NetworkTransport
	r     *raft.Raft

	snapMu sync.Mutex // serializes snapshotAll's changes to raft's reloadable config
}

// Raft timing, faster than raft's defaults (1 s) so that a short test sees
// many elections, slow enough for 5 nodes under the race detector on two
// cores.
const (
	heartbeatTimeout = 500 * time.Millisecond
	applyTimeout     = 2 * time.Second
)

// RunNode runs the node until ctx is done, then shuts it down cleanly.
func RunNode(ctx context.Context, c NodeConfig) (err error) {
	n := &node{cfg: c}
	defer func() { err = errors.Join(err, n.close()) }()
	if err := n.open(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.HTTPAddr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: n.handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// vigilOptions keeps each DB small: ten of them share two cores.
func vigilOptions() *vigil.Options {
	return &vigil.Options{WriteBufferSize: 1 << 20, BlockCacheSize: 4 << 20}
}

func (n *node) open() error {
	c := n.cfg
	var err error
	if n.store, err = raftstore.Open(filepath.Join(c.Dir, "raft"), &raftstore.Options{Vigil: vigilOptions()}); err != nil {
		return err
	}
	if n.fsm, err = raftstore.OpenFSM(filepath.Join(c.Dir, "fsm"), &raftstore.FSMOptions{Vigil: vigilOptions(), Apply: n.apply}); err != nil {
		return err
	}
	logOut := io.Writer(os.Stderr)
	snaps, err := raft.NewFileSnapshotStore(c.Dir, 2, logOut)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.RaftAddr)
	if err != nil {
		return err
	}
	layer := &dialLayer{Listener: ln, dial: c.Dial}
	n.trans = raft.NewNetworkTransport(layer, 3, 2*time.Second, logOut)
	conf := raft.DefaultConfig()
	conf.LocalID = raft.ServerID(c.ID)
	conf.HeartbeatTimeout = heartbeatTimeout
	conf.ElectionTimeout = heartbeatTimeout
	conf.LeaderLeaseTimeout = heartbeatTimeout / 2
	conf.CommitTimeout = 10 * time.Millisecond
	// Small snapshot thresholds: nodes that were down or wiped catch up
	// from snapshots, not only from the log.
	conf.SnapshotThreshold = 256
	conf.SnapshotInterval = time.Second
	conf.TrailingLogs = 128
	conf.Logger = hclog.New(&hclog.LoggerOptions{Name: c.ID, Level: hclog.Warn, Output: logOut})
	exists, err := raft.HasExistingState(n.store, n.store, snaps)
	if err != nil {
		return err
	}
	if c.Bootstrap && !exists {
		var servers []raft.Server
		for id, addr := range c.Peers {
			servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addr), Suffrage: raft.Voter})
		}
		if err := raft.BootstrapCluster(conf, n.store, n.store, snaps, n.trans, raft.Configuration{Servers: servers}); err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
	}
	n.r, err = raft.NewRaft(conf, n.fsm, n.store, n.store, snaps, n.trans)
	return err
}

func (n *node) close() error {
	var errs []error
	if n.r != nil {
		errs = append(errs, n.r.Shutdown().Error())
	} else if n.trans != nil {
		errs = append(errs, n.trans.Close())
	}
	if n.fsm != nil {
		errs = append(errs, n.fsm.Close())
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	return errors.Join(errs...)
}

// dialLayer is raft's TCP stream layer with the dialled addresses
// replaced: a node reaches each peer through the test's proxy for that
// link, while the configuration keeps the peers' own addresses.
type dialLayer struct {
	net.Listener
	dial map[string]string
}

func (l *dialLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	target := string(addr)
	if p, ok := l.dial[target]; ok {
		target = p
	}
	return net.DialTimeout("tcp", target, timeout)
}

// command is one client operation in the raft log.
type command struct {
	Op    string `json:"op"` // "put", "get" or "cas"
	Key   string `json:"key"`
	Value string `json:"value,omitempty"` // put: the value; cas: the new value
	Old   string `json:"old,omitempty"`   // cas: the value expected ("" = absent)
}

// result is the FSM's answer to a command, and the node's to a client.
type result struct {
	Value string `json:"value"` // get: the value ("" = absent); cas: the value found
	OK    bool   `json:"ok"`    // cas: swapped
}

// apply is the FSM's ApplyFunc for commands.
func (n *node) apply(l *raft.Log, b *vigil.Batch) any {
	var c command
	if err := json.Unmarshal(l.Data, &c); err != nil {
		return fmt.Errorf("entry %d: %w", l.Index, err)
	}
	key := []byte(c.Key)
	switch c.Op {
	case "put":
		b.Put(key, []byte(c.Value))
		return result{OK: true}
	case "get", "cas":
		v, err := n.fsm.GetPending(b, key)
		if err != nil && !errors.Is(err, vigil.ErrNotFound) {
			return err
		}
		res := result{Value: string(v)}
		if c.Op == "cas" && res.Value == c.Old {
			b.Put(key, []byte(c.Value))
			res.OK = true
		}
		return res
	}
	return fmt.Errorf("entry %d: unknown op %q", l.Index, c.Op)
}
