package chaos

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The node processes are this test binary run again with nodeEnv set:
// TestMain then runs a node instead of the tests.
const nodeEnv = "VIGIL_CHAOS_NODE"

func TestMain(m *testing.M) {
	if os.Getenv(nodeEnv) != "" {
		if err := RunNodeArgs(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "node:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var (
	chaosDuration = flag.Duration("chaos.duration", 8*time.Second, "client load per chaos test")
	chaosSeed     = flag.Uint64("chaos.seed", 0, "seed of the chaos tests (0: a new one, printed)")
)

func nodeCommand(args []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), nodeEnv+"=1")
	return cmd
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func runChaos(t *testing.T, nodes int) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	cfg := Config{Nodes: nodes, Dir: t.TempDir(), Seed: *chaosSeed, Duration: *chaosDuration,
		Command: nodeCommand, Log: testLog{t}}
	rep, err := Run(cfg)
	t.Log("\n" + rep.String())
	if err != nil {
		t.Fatal(err)
	}
	var answered int
	for _, n := range rep.Ops {
		answered += n[done]
	}
	// A run that checks nothing proves nothing.
	if answered < 50 || rep.Check.Ops < 50 {
		t.Fatalf("only %d operations answered, %d checked", answered, rep.Check.Ops)
	}
}

// TestChaos3 and TestChaos5 run a 3- and a 5-node cluster, each node a
// process of its own, under random faults, and check the clients'
// history for linearizability and the replicas for convergence.
func TestChaos3(t *testing.T) { runChaos(t, 3) }
func TestChaos5(t *testing.T) { runChaos(t, 5) }

// TestChaosCatchesStaleReads shows that the whole harness (history,
// checker, minimal history) catches a real bug: nodes that answer gets
// from their own replica without confirming leadership. A follower cut
// off from the others keeps answering with the value it had while the
// majority moves on.
func TestChaosCatchesStaleReads(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	c, err := newCluster(3, t.TempDir(), nodeCommand, testLog{t}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.stopAll(); err != nil {
			t.Error(err)
		}
	}()
	for i := range c.procs {
		if err := c.start(i, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.waitLeader(); err != nil {
		t.Fatal(err)
	}
	h := newHistory()
	op := func(node int, in Input) Output {
		t.Helper()
		call := h.now()
		out, how, _ := c.do(t.Context(), node, in)
		h.record(0, in, out, how, call, h.now())
		if how != done {
			t.Fatalf("%s on node %d: outcome %d", describe(in, out), node, how)
		}
		return out
	}
	l := c.leader()
	f := (l + 1) % 3
	op(l, Input{Op: "put", Key: "k", Value: "v1"})
	waitApplied(t, c, f, "k", "v1")
	c.setLinks([]int{f}, without(c.all(), []int{f}), Link{Cut: true})
	if l = c.leader(); l == f || l < 0 {
		t.Fatalf("leader %d after cutting off follower %d", l, f)
	}
	op(l, Input{Op: "put", Key: "k", Value: "v2"})
	got := op(f, Input{Op: "get", Key: "k"})
	if got.Value != "v1" {
		t.Fatalf("the cut-off follower read %q, want its stale v1", got.Value)
	}
	cr := Check(h.ops, time.Minute)
	t.Logf("check: %s; minimal history:\n%s", cr.Result, cr.Minimal)
	if cr.Result != "Illegal" {
		t.Fatalf("a stale read was checked %s, want Illegal", cr.Result)
	}
	if strings.Count(cr.Minimal, "\n") != 3 || !strings.Contains(cr.Minimal, `put(k, "v2")`) || !strings.Contains(cr.Minimal, `get(k) -> "v1"`) {
		t.Fatalf("minimal history is not the two puts and the stale get:\n%s", cr.Minimal)
	}
	c.heal()
}

// waitApplied waits until node i's replica holds key=want (a local read).
func waitApplied(t *testing.T, c *cluster, i int, key, want string) {
	t.Helper()
	deadline := time.Now().Add(progressWait)
	for time.Now().Before(deadline) {
		out, how, _ := c.do(t.Context(), i, Input{Op: "get", Key: key})
		if how == done && out.Value == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal(errors.New("the follower never applied the first put"))
}
