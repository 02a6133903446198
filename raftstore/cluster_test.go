package raftstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/internal/vfsutil"
	"github.com/vigildb/vigil/raftstore"
)

// The cluster test: three raft nodes in one process (in-memory transport),
// each with a raftstore.Store and a raftstore.FSM. Two keep their Vigil
// DBs on the real file system, one on a strict in-memory file system that
// can crash. Concurrent clients commit commands while the leader is
// stopped and restarted, a follower's data is deleted (it rejoins from a
// snapshot), and the strict node crashes mid-write and recovers. At the end
// every acknowledged command is on every node, and the FSMs' checksums over
// the whole key space are equal.

const (
	clusterCommands = 10000
	clusterClients  = 8
	// progressWait bounds every wait for progress: a stuck cluster fails
	// the test instead of hanging it.
	progressWait = 30 * time.Second
)

type node struct {
	id      raft.ServerID
	addr    raft.ServerAddress
	fs      vfs.FS
	mem     *vfs.MemFS // the strict in-memory FS, for the node that crashes
	root    string     // its Vigil DBs: root/log and root/fsm
	snapDir string     // raft's file snapshot store (real disk)

	store *raftstore.Store
	fsm   *raftstore.FSM
	trans *raft.InmemTransport
	crash *crashTransport // the strict node's transport
	r     *raft.Raft
}

type cluster struct {
	t     *testing.T
	log   *lockedBuffer
	mu    sync.Mutex // guards the nodes' fields while they restart
	nodes []*node
}

func vigilOptions(fs vfs.FS) *vigil.Options {
	// Small memtables so that the FSM's checkpoints hold tables and WAL.
	return &vigil.Options{FS: fs, WriteBufferSize: 256 << 10, BlockCacheSize: 4 << 20}
}

func (c *cluster) raftConfig(n *node) *raft.Config {
	conf := raft.DefaultConfig()
	conf.LocalID = n.id
	conf.HeartbeatTimeout = 300 * time.Millisecond
	conf.ElectionTimeout = 300 * time.Millisecond
	conf.LeaderLeaseTimeout = 150 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.SnapshotThreshold = 800
	conf.SnapshotInterval = 200 * time.Millisecond
	conf.TrailingLogs = 200
	// BatchApplyCh stays off: with it, Apply may leave a future in a
	// buffered channel that a shutdown never answers.
	conf.Logger = hclog.New(&hclog.LoggerOptions{Name: string(n.id), Level: hclog.Warn, Output: c.log})
	return conf
}

func (c *cluster) configuration() raft.Configuration {
	var conf raft.Configuration
	for _, n := range c.nodes {
		conf.Servers = append(conf.Servers, raft.Server{ID: n.id, Address: n.addr, Suffrage: raft.Voter})
	}
	return conf
}

// start opens n's stores and starts its raft, connected to the running
// nodes.
func (c *cluster) start(n *node, bootstrap bool) {
	c.t.Helper()
	store, err := raftstore.Open(n.fs.PathJoin(n.root, "log"), &raftstore.Options{Vigil: vigilOptions(n.fs)})
	if err != nil {
		c.t.Fatalf("%s: %v", n.id, err)
	}
	fsm, err := raftstore.OpenFSM(n.fs.PathJoin(n.root, "fsm"), &raftstore.FSMOptions{Vigil: vigilOptions(n.fs)})
	if err != nil {
		c.t.Fatalf("%s: %v", n.id, err)
	}
	snaps, err := raft.NewFileSnapshotStore(n.snapDir, 2, io.Discard)
	if err != nil {
		c.t.Fatalf("%s: %v", n.id, err)
	}
	_, trans := raft.NewInmemTransportWithTimeout(n.addr, 500*time.Millisecond)
	var tr raft.Transport = trans
	var ct *crashTransport
	if n.mem != nil {
		ct = newCrashTransport(trans)
		tr = ct
	}
	conf := c.raftConfig(n)
	if bootstrap {
		if err := raft.BootstrapCluster(conf, store, store, snaps, trans, c.configuration()); err != nil {
			c.t.Fatalf("%s: bootstrap: %v", n.id, err)
		}
	}
	r, err := raft.NewRaft(conf, fsm, store, store, snaps, tr)
	if err != nil {
		c.t.Fatalf("%s: NewRaft: %v", n.id, err)
	}
	c.mu.Lock()
	n.store, n.fsm, n.trans, n.crash, n.r = store, fsm, trans, ct, r
	for _, m := range c.nodes {
		if m != n && m.r != nil {
			m.trans.Connect(n.addr, trans)
			trans.Connect(m.addr, m.trans)
		}
	}
	c.mu.Unlock()
}

// stop shuts n down cleanly (crashed: its transport already dropped
// everything, and errors closing the stores are expected).
func (c *cluster) stop(n *node, crashed bool) {
	c.t.Helper()
	c.mu.Lock()
	r := n.r
	n.r = nil
	for _, m := range c.nodes {
		if m != n && m.trans != nil {
			m.trans.Disconnect(n.addr)
		}
	}
	c.mu.Unlock()
	if err := r.Shutdown().Error(); err != nil {
		c.t.Fatalf("%s: shutdown: %v", n.id, err)
	}
	errF, errS := n.fsm.Close(), n.store.Close()
	if !crashed && (errF != nil || errS != nil) {
		c.t.Fatalf("%s: closing: %v, %v", n.id, errF, errS)
	}
}

func (c *cluster) leader() *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.r != nil && n.r.State() == raft.Leader {
			return n
		}
	}
	return nil
}

func (c *cluster) waitLeader() *node {
	c.t.Helper()
	deadline := time.Now().Add(progressWait)
	for time.Now().Before(deadline) {
		if n := c.leader(); n != nil {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatal("no leader")
	return nil
}

// follower returns a running node that is not the leader, preferring one
// that is not the strict node.
func (c *cluster) follower(avoidStrict bool) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var pick *node
	for _, n := range c.nodes {
		if n.r != nil && n.r.State() != raft.Leader && (pick == nil || (avoidStrict && pick.mem != nil)) {
			pick = n
		}
	}
	return pick
}

// client commits commands taken from next until there are none left,
// retrying each until raft acknowledges it.
type client struct {
	c     *cluster
	id    int
	next  *atomic.Int64
	acked *atomic.Int64
	done  map[int]bool // the commands this client had acknowledged
	last  int
	err   error
}

func commandKV(i int) (key, value []byte) {
	return fmt.Appendf(nil, "cmd/%05d", i), fmt.Appendf(nil, "value-%05d-%x", i, bytes.Repeat([]byte{byte(i)}, 20))
}

func (cl *client) run() {
	lastKey := fmt.Appendf(nil, "client/%d/last", cl.id)
	for {
		i := int(cl.next.Add(1)) - 1
		if i >= clusterCommands {
			return
		}
		key, value := commandKV(i)
		cmd := raftstore.AppendCommand(nil,
			raftstore.Op{Kind: raftstore.OpPut, Key: key, Value: value},
			raftstore.Op{Kind: raftstore.OpPut, Key: lastKey, Value: key})
		deadline := time.Now().Add(progressWait)
		for {
			if time.Now().After(deadline) {
				cl.err = fmt.Errorf("client %d: command %d not acknowledged within %v", cl.id, i, progressWait)
				return
			}
			n := cl.c.leader()
			if n == nil {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			cl.c.mu.Lock()
			r := n.r
			cl.c.mu.Unlock()
			if r == nil {
				continue
			}
			f := r.Apply(cmd, 2*time.Second)
			if err := futureError(f, 10*time.Second); err != nil {
				// Not the leader any more, shut down, timed out: the
				// command may or may not be committed; retry it
				// (putting the same values again is harmless).
				time.Sleep(5 * time.Millisecond)
				continue
			}
			if resp := f.Response(); resp != nil {
				cl.err = fmt.Errorf("client %d: command %d: FSM response %v", cl.id, i, resp)
				return
			}
			break
		}
		cl.done[i] = true
		cl.last = i
		cl.acked.Add(1)
	}
}

func TestClusterFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test skipped in -short mode")
	}
	tmp := t.TempDir()
	c := &cluster{t: t, log: &lockedBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("raft log (last 16 KiB):\n%s", c.log.tail(16<<10))
			if os.Getenv("RAFTSTORE_DUMP") != "" {
				buf := make([]byte, 8<<20)
				os.WriteFile(os.Getenv("RAFTSTORE_DUMP"), buf[:runtime.Stack(buf, true)], 0o644)
			}
		}
	})
	mem := vfs.NewStrictMem()
	for i := range 3 {
		n := &node{
			id:      raft.ServerID(fmt.Sprintf("n%d", i)),
			addr:    raft.ServerAddress(fmt.Sprintf("node%d", i)),
			fs:      vfs.Default,
			root:    filepath.Join(tmp, fmt.Sprintf("n%d", i)),
			snapDir: filepath.Join(tmp, fmt.Sprintf("n%d-snapshots", i)),
		}
		if i == 2 {
			n.fs, n.mem, n.root = mem, mem, "/n2"
			if err := mem.MkdirAll("/n2", 0o755); err != nil {
				t.Fatal(err)
			}
			// The directory entry must survive the crash too.
			if err := vfsutil.SyncDir(mem, "/"); err != nil {
				t.Fatal(err)
			}
		}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		c.start(n, true)
	}
	defer func() {
		for _, n := range c.nodes {
			if n.r != nil {
				c.stop(n, false)
			}
		}
	}()
	c.waitLeader()

	var next, acked atomic.Int64
	clients := make([]*client, clusterClients)
	var wg sync.WaitGroup
	for i := range clients {
		clients[i] = &client{c: c, id: i, next: &next, acked: &acked, done: map[int]bool{}, last: -1}
		wg.Add(1)
		go func() { defer wg.Done(); clients[i].run() }()
	}
	clientsDone := make(chan struct{})
	go func() { wg.Wait(); close(clientsDone) }()
	waitAcked := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(progressWait)
		for acked.Load() < n {
			select {
			case <-clientsDone:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("stuck at %d acknowledged commands, waiting for %d", acked.Load(), n)
			}
		}
	}
	start := time.Now()

	// 1. The leader stops; the other two go on; it comes back.
	waitAcked(1500)
	l := c.waitLeader()
	t.Logf("%v: %d acked; stopping the leader %s", time.Since(start).Round(time.Millisecond), acked.Load(), l.id)
	c.stop(l, false)
	waitAcked(acked.Load() + 1000)
	t.Logf("%v: %d acked; restarting %s", time.Since(start).Round(time.Millisecond), acked.Load(), l.id)
	c.start(l, false)

	// 2. A follower loses its data directory and rejoins from a snapshot:
	// the leader has compacted its log by then, so it must send one.
	waitAcked(4500)
	l = c.waitLeader()
	waitFor(t, "the leader compacting its log", func() bool { first, _ := l.store.FirstIndex(); return first > 1 })
	f := c.follower(true)
	t.Logf("%v: %d acked; deleting the data of follower %s", time.Since(start).Round(time.Millisecond), acked.Load(), f.id)
	c.stop(f, false)
	if err := f.fs.RemoveAll(f.root); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(f.snapDir); err != nil {
		t.Fatal(err)
	}
	c.start(f, false)
	waitFor(t, "the wiped follower restoring a snapshot", func() bool { return f.fsm.Stats().Restores > 0 })
	t.Logf("%v: %d acked; %s restored a snapshot at index %d", time.Since(start).Round(time.Millisecond), acked.Load(), f.id, f.fsm.AppliedIndex())

	// 3. The strict node crashes while writes go on: from the crash on,
	// nothing it writes reaches the disk and nothing it answers reaches
	// the others; then its file system keeps only what was synced.
	s := c.nodes[2]
	if c.leader() == s {
		if err := s.r.LeadershipTransfer().Error(); err != nil {
			t.Fatalf("leadership transfer: %v", err)
		}
	}
	waitAcked(acked.Load() + 1500)
	before, _ := s.store.LastIndex()
	t.Logf("%v: %d acked; crashing %s (last log index %d)", time.Since(start).Round(time.Millisecond), acked.Load(), s.id, before)
	s.crash.crash()
	s.mem.SetIgnoreSyncs(true)
	waitAcked(acked.Load() + 300) // it keeps "running" on a disk that forgets
	c.stop(s, true)
	s.mem.ResetToSyncedState()
	s.mem.SetIgnoreSyncs(false)
	c.start(s, false)
	after, _ := s.store.LastIndex()
	t.Logf("%v: %d acked; %s recovered with last log index %d", time.Since(start).Round(time.Millisecond), acked.Load(), s.id, after)

	// 4. The clients finish; every node catches up.
	select {
	case <-clientsDone:
	case <-time.After(2 * progressWait):
		t.Fatal("clients did not finish")
	}
	for _, cl := range clients {
		if cl.err != nil {
			t.Fatal(cl.err)
		}
	}
	l = c.waitLeader()
	if err := l.r.Barrier(progressWait).Error(); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	want := l.fsm.AppliedIndex()
	for _, n := range c.nodes {
		waitFor(t, fmt.Sprintf("%s applying up to %d", n.id, want), func() bool { return n.fsm.AppliedIndex() >= want })
	}
	t.Logf("%v: all %d commands acknowledged; every node applied up to index %d", time.Since(start).Round(time.Millisecond), acked.Load(), want)

	// No acknowledged command is missing anywhere, and the replicas agree.
	var sums []uint64
	for _, n := range c.nodes {
		for _, cl := range clients {
			for i := range cl.done {
				key, value := commandKV(i)
				got, err := n.fsm.Get(key)
				if err != nil || !bytes.Equal(got, value) {
					t.Fatalf("%s: acknowledged command %d: Get(%s) = %q, %v", n.id, i, key, got, err)
				}
			}
			if cl.last >= 0 {
				lastKey, _ := commandKV(cl.last)
				got, err := n.fsm.Get(fmt.Appendf(nil, "client/%d/last", cl.id))
				if err != nil || !bytes.Equal(got, lastKey) {
					t.Fatalf("%s: client %d's last command is %q (%v), want %s", n.id, cl.id, got, err, lastKey)
				}
			}
		}
		sum, err := n.fsm.Checksum()
		if err != nil {
			t.Fatalf("%s: checksum: %v", n.id, err)
		}
		sums = append(sums, sum)
	}
	total := 0
	for _, cl := range clients {
		total += len(cl.done)
	}
	if total != clusterCommands {
		t.Fatalf("%d commands acknowledged, want %d", total, clusterCommands)
	}
	if sums[0] != sums[1] || sums[1] != sums[2] {
		t.Fatalf("replicas differ: checksums %x", sums)
	}
	t.Logf("checksum of every replica: %016x", sums[0])
}

// futureError waits for f, at most d (a future raft never answers must not
// hang the test: the command is then retried like any other failure).
func futureError(f raft.Future, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return errors.New("no answer from raft")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(progressWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// crashTransport stands between a node's raft and its in-memory transport.
// After crash, the node neither receives nor answers nor sends anything:
// an answer to a request that its crashed disk "synced" never leaves, so
// no other node counts on a write that the crash will undo.
type crashTransport struct {
	*raft.InmemTransport
	crashed atomic.Bool
	ch      chan raft.RPC
	stop    chan struct{}
	once    sync.Once
}

var errCrashed = errors.New("crashed")

func newCrashTransport(in *raft.InmemTransport) *crashTransport {
	t := &crashTransport{InmemTransport: in, ch: make(chan raft.RPC), stop: make(chan struct{})}
	go t.forward()
	return t
}

func (t *crashTransport) crash() { t.crashed.Store(true) }

func (t *crashTransport) forward() {
	for {
		var rpc raft.RPC
		select {
		case rpc = <-t.InmemTransport.Consumer():
		case <-t.stop:
			return
		}
		if t.crashed.Load() {
			continue // the sender times out
		}
		orig := rpc.RespChan
		resp := make(chan raft.RPCResponse, 1)
		rpc.RespChan = resp
		select {
		case t.ch <- rpc:
		case <-t.stop:
			return
		}
		go func() {
			select {
			case r := <-resp:
				// The node answered after its writes for the request
				// returned: if it had crashed by then, they may be lost.
				if !t.crashed.Load() {
					orig <- r
				}
			case <-t.stop:
			}
		}()
	}
}

func (t *crashTransport) Consumer() <-chan raft.RPC { return t.ch }

func (t *crashTransport) Close() error {
	t.once.Do(func() { close(t.stop) })
	return t.InmemTransport.Close()
}

func (t *crashTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if t.crashed.Load() {
		return nil, errCrashed
	}
	return t.InmemTransport.AppendEntriesPipeline(id, target)
}

func (t *crashTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if t.crashed.Load() {
		return errCrashed
	}
	return t.InmemTransport.AppendEntries(id, target, args, resp)
}

func (t *crashTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if t.crashed.Load() {
		return errCrashed
	}
	return t.InmemTransport.RequestVote(id, target, args, resp)
}

func (t *crashTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if t.crashed.Load() {
		return errCrashed
	}
	return t.InmemTransport.RequestPreVote(id, target, args, resp)
}

func (t *crashTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if t.crashed.Load() {
		return errCrashed
	}
	return t.InmemTransport.InstallSnapshot(id, target, args, resp, data)
}

func (t *crashTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	if t.crashed.Load() {
		return errCrashed
	}
	return t.InmemTransport.TimeoutNow(id, target, args, resp)
}

// lockedBuffer collects raft's log lines from every node.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 1<<20 {
		b.buf.Next(b.buf.Len() / 2)
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.Bytes()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return string(s)
}
