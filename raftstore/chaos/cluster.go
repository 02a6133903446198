package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	// reserved holds the node's two ports from the cluster's layout until
	// its process first starts and binds them itself.
	reserved []net.Listener
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

// reservePort binds a loopback port below the kernel's ephemeral range
// and returns the listener. A node binds the same port at every start, so
// that its address in the raft configuration stays valid across restarts;
// a port from the ephemeral range could meanwhile be handed to one of the
// proxies' listeners or to an outgoing connection (of this test or of
// another running beside it), and the node would fail to start.
func reservePort(rng *rand.Rand) (net.Listener, error) {
	hi := ephemeralLow()
	const lo = 10000
	var err error
	for range 200 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", lo+rng.IntN(hi-lo))); err == nil {
			return ln, nil
		}
	}
	return nil, fmt.Errorf("no free port below %d: %w", hi, err)
}

// ephemeralLow returns the first port of Linux's ephemeral range, or the
// IANA one's where the range cannot be read.
func ephemeralLow() int {
	lo := 49152
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 11000 {
				lo = n
			}
		}
	}
	return lo
}

// newCluster lays out n nodes and their proxies (nothing runs yet).
func newCluster(n int, dir string, command func([]string) *exec.Cmd, logOut io.Writer, unsafeReads bool) (*cluster, error) {
	c := &cluster{dir: dir, command: command, logOut: logOut,
		client: &http.Client{Timeout: httpTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	peers := map[string]string{}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
	for i := range n {
		id := fmt.Sprintf("node%d", i+1)
		p := &proc{cfg: NodeConfig{ID: id, Dir: filepath.Join(dir, id), Peers: peers, UnsafeLocalReads: unsafeReads}}
		c.procs = append(c.procs, p)
		for _, addr := range []*string{&p.cfg.RaftAddr, &p.cfg.HTTPAddr} {
			ln, err := reservePort(rng)
			if err != nil {
				c.closeProxies()
				return nil, err
			}
			p.reserved = append(p.reserved, ln)
			*addr = ln.Addr().String()
		}
		peers[id] = p.cfg.RaftAddr
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
	for _, p := range c.procs {
		p.releasePorts()
	}
	for _, row := range c.proxies {
		for _, px := range row {
			if px != nil {
				_ = px.Close()
			}
		}
	}
}

// releasePorts closes p's port reservations (idempotent).
func (p *proc) releasePorts() {
	for _, ln := range p.reserved {
		_ = ln.Close()
	}
	p.reserved = nil
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
	p.releasePorts()
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
			return fmt.Errorf("%s exited while starting: see %s; it ends:\n%s", cfg.ID, logf.Name(), logTail(logf.Name()))
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s: no answer %v after its start", cfg.ID, progressWait)
}

// logTail returns the last lines of a node's log, for an error message
// that must explain itself where the log is gone (a CI run).
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
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

// snapshotFollowers asks every running node but skip to snapshot and
// compact its log, once each. A node that fails (one not yet caught up
// with a configuration change, say) keeps its log; the wipe's check that
// the node restored a snapshot reports it if that mattered.
func (c *cluster) snapshotFollowers(skip int) {
	for i := range c.procs {
		if i == skip || !c.running(i) {
			continue
		}
		if resp, err := c.client.Post("http://"+c.procs[i].cfg.HTTPAddr+"/snapshot", "", nil); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
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
