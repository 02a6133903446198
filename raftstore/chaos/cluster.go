package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// proc is one node of the cluster as the test sees it: its addresses, its
// data directory and, while it runs, its process.
type proc struct {
	cfg NodeConfig

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd's process has been waited for
	// expectExit is set before the test kills or stops the process; an
	// exit without it is a failure of the node (a panic, a fatal error).
	expectExit bool
}

// cluster runs the nodes as processes of their own and the proxies between
// them, all on loopback.
//
// Concurrency: the fault loop and the final phase start, kill and wipe
// nodes and change links (one goroutine at a time); clients call do and
// pick nodes from any goroutine. mu guards procs' process fields and
// failures.
type cluster struct {
	dir     string
	command func(args []string) *exec.Cmd
	logOut  io.Writer
	client  *http.Client

	procs   []*proc
	proxies [][]*Proxy // proxies[i][j]: node i's connections to node j

	mu       sync.Mutex
	failures []error
}

// freeAddr returns a loopback address with a port that was free a moment
// ago: the node binds it at every start, so that its address in the raft
// configuration stays valid across restarts.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// newCluster lays out n nodes and their proxies (nothing runs yet).
func newCluster(n int, dir string, command func([]string) *exec.Cmd, logOut io.Writer, unsafeReads bool) (*cluster, error) {
	c := &cluster{dir: dir, command: command, logOut: logOut,
		client: &http.Client{Timeout: httpTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	peers := map[string]string{}
	for i := range n {
		raftAddr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		httpAddr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		id := fmt.Sprintf("node%d", i+1)
		peers[id] = raftAddr
		c.procs = append(c.procs, &proc{cfg: NodeConfig{ID: id, Dir: filepath.Join(dir, id),
			RaftAddr: raftAddr, HTTPAddr: httpAddr, Peers: peers, UnsafeLocalReads: unsafeReads}})
	}
	c.proxies = make([][]*Proxy, n)
	for i, p := range c.procs {
		c.proxies[i] = make([]*Proxy, n)
		p.cfg.Dial = map[string]string{}
		for j, q := range c.procs {
			if i == j {
				continue
			}
			px, err := NewProxy(q.cfg.RaftAddr)
			if err != nil {
				c.closeProxies()
				return nil, err
			}
			c.proxies[i][j] = px
			p.cfg.Dial[q.cfg.RaftAddr] = px.Addr()
		}
	}
	return c, nil
}

func (c *cluster) closeProxies() {
	for _, row := range c.proxies {
		for _, px := range row {
			if px != nil {
				_ = px.Close()
			}
		}
	}
}

func (c *cluster) logf(format string, args ...any) {
	if c.logOut != nil {
		fmt.Fprintf(c.logOut, format+"\n", args...)
	}
}

func (c *cluster) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures = append(c.failures, err)
}

func (c *cluster) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.failures...)
}

// running reports whether node i's process is up.
func (c *cluster) running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[i].cmd != nil
}

// start starts node i's process (bootstrapping the cluster's first
// configuration if asked and the node has no state) and waits until it
// serves HTTP. Its output goes to dir/nodeI.log.
func (c *cluster) start(i int, bootstrap bool) error {
	p := c.procs[i]
	cfg := p.cfg
	cfg.Bootstrap = bootstrap
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(c.dir, cfg.ID+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "==== %s start %s\n", time.Now().Format(time.RFC3339Nano), cfg.ID)
	cmd := c.command(cfg.args())
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", cfg.ID, err)
	}
	exited := make(chan struct{})
	c.mu.Lock()
	p.cmd, p.exited, p.expectExit = cmd, exited, false
	c.mu.Unlock()
	go func() {
		err := cmd.Wait()
		c.mu.Lock()
		expected := p.expectExit
		if p.cmd == cmd {
			p.cmd = nil
		}
		c.mu.Unlock()
		if !expected {
			c.fail(fmt.Errorf("%s exited by itself (%v): see %s", cfg.ID, err, filepath.Join(c.dir, cfg.ID+".log")))
		}
		close(exited)
	}()
	deadline := time.Now().Add(progressWait)
	for time.Now().Before(deadline) {
		if _, err := c.status(i); err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited while starting: see %s", cfg.ID, filepath.Join(c.dir, cfg.ID+".log"))
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s: no answer %v after its start", cfg.ID, progressWait)
}

// progressWait bounds every wait for the cluster to make progress.
const progressWait = 60 * time.Second

// kill ends node i's process with SIGKILL (a crash; the FSM's unsynced
// writes are lost, raft's log is synced), or with SIGTERM (a clean
// shutdown) if clean, and waits for it.
func (c *cluster) kill(i int, clean bool) error {
	c.mu.Lock()
	p := c.procs[i]
	cmd, exited := p.cmd, p.exited
	if cmd == nil {
		c.mu.Unlock()
		return nil
	}
	p.expectExit = true
	c.mu.Unlock()
	sig := syscall.SIGKILL
	if clean {
		sig = syscall.SIGTERM
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-exited:
	case <-time.After(progressWait):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%s: no exit %v after %v", p.cfg.ID, progressWait, sig)
	}
	if clean && cmd.ProcessState != nil && !cmd.ProcessState.Success() {
		return fmt.Errorf("%s: clean shutdown failed (%v): see %s", p.cfg.ID, cmd.ProcessState, filepath.Join(c.dir, p.cfg.ID+".log"))
	}
	return nil
}

// wipe removes node i's data (the process must be down).
func (c *cluster) wipe(i int) error { return os.RemoveAll(c.procs[i].cfg.Dir) }

// setLinks sets the links both ways between every node of a and every
// node of b.
func (c *cluster) setLinks(a, b []int, l Link) {
	for _, i := range a {
		for _, j := range b {
			if i != j {
				c.proxies[i][j].SetLink(l)
				c.proxies[j][i].SetLink(l)
			}
		}
	}
}

// heal restores every link.
func (c *cluster) heal() {
	all := c.all()
	c.setLinks(all, all, Link{})
}

func (c *cluster) all() []int {
	var all []int
	for i := range c.procs {
		all = append(all, i)
	}
	return all
}

// status asks node i for its status.
func (c *cluster) status(i int) (status, error) {
	var st status
	resp, err := c.client.Get("http://" + c.procs[i].cfg.HTTPAddr + "/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s: status: %s", c.procs[i].cfg.ID, resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// leader returns the index of a node that says it leads, in the highest
// term among those that answer, or -1.
func (c *cluster) leader() int {
	best, term := -1, uint64(0)
	for i := range c.procs {
		if !c.running(i) {
			continue
		}
		st, err := c.status(i)
		if err == nil && st.State == "Leader" && (best < 0 || st.Term > term) {
			best, term = i, st.Term
		}
	}
	return best
}

// admin sends an administrative request to the leader, retrying (on
// whichever node leads) until one succeeds or progressWait passes.
func (c *cluster) admin(ctx context.Context, path string) error {
	deadline := time.Now().Add(progressWait)
	var last error = errors.New("no leader")
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if l := c.leader(); l >= 0 {
			resp, err := c.client.Post("http://"+c.procs[l].cfg.HTTPAddr+path, "", nil)
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
				err = fmt.Errorf("%s %s: %s: %s", c.procs[l].cfg.ID, path, resp.Status, bytes.TrimSpace(body))
			}
			last = err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s: %w", path, last)
}

// stopAll shuts every running node down cleanly, then closes the proxies.
func (c *cluster) stopAll() error {
	var errs []error
	for i := range c.procs {
		errs = append(errs, c.kill(i, true))
	}
	c.closeProxies()
	return errors.Join(errs...)
}
