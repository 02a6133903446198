package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Config is one chaos run.
type Config struct {
	// Nodes is the cluster's size (3 or 5 are usual). Default 3.
	Nodes int
	// Dir holds every node's data directory and log (required).
	Dir string
	// Seed draws the faults and the operations; 0 picks one (printed).
	Seed uint64
	// Duration is how long clients run while faults are injected.
	// Default 10 s.
	Duration time.Duration
	// Clients is the number of concurrent clients. Default 4.
	Clients int
	// Keys is the number of keys the clients use. Default 8.
	Keys int
	// Command returns the command that runs one node process with args
	// (RunNodeArgs parses them in that process).
	Command func(args []string) *exec.Cmd
	// Log receives progress lines (nil: none).
	Log io.Writer
	// NoFaults runs the clients without faults.
	NoFaults bool
	// UnsafeLocalReads makes every node serve gets from its local replica
	// unchecked: a bug on purpose, which the checker must catch.
	UnsafeLocalReads bool
	// CheckTimeout bounds the linearizability check. Default 2 minutes.
	CheckTimeout time.Duration
}

// Report is what a run did and found.
type Report struct {
	Seed     uint64
	Nodes    int
	Duration time.Duration
	// Ops counts the clients' operations per kind: refused before being
	// proposed (left out of the history), answered, and without a
	// trustworthy answer (in the history as unknown; gets left out).
	Ops map[string][3]int
	// Faults counts the fault episodes per kind.
	Faults map[string]int
	// Check is the linearizability check of the history.
	Check CheckResult
	// Converged: after the final heal every node applied the same entries
	// (Applied) and has the same FSM checksum (Checksum).
	Converged bool
	Applied   uint64
	Checksum  uint64
	// Restores counts snapshot restores per node at the end; Wiped names
	// the nodes that were wiped (each must have restored one).
	Restores map[string]int64
	Wiped    []string
}

// String formats the report for a person.
func (r *Report) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "chaos: seed %d, %d nodes, %v of client load\n", r.Seed, r.Nodes, r.Duration)
	total := [3]int{}
	for _, op := range slices.Sorted(maps.Keys(r.Ops)) {
		n := r.Ops[op]
		fmt.Fprintf(&sb, "  %-4s %6d answered, %5d unknown, %5d refused\n", op, n[done], n[unknown], n[notDone])
		for k := range total {
			total[k] += n[k]
		}
	}
	fmt.Fprintf(&sb, "  ops  %6d answered, %5d unknown, %5d refused\n", total[done], total[unknown], total[notDone])
	var faults []string
	nf := 0
	for _, k := range faultKinds {
		if n := r.Faults[k]; n > 0 {
			faults = append(faults, fmt.Sprintf("%s %d", k, n))
			nf += n
		}
	}
	fmt.Fprintf(&sb, "  faults %d: %s\n", nf, strings.Join(faults, ", "))
	fmt.Fprintf(&sb, "  linearizability: %s (%d operations over %d keys)\n", r.Check.Result, r.Check.Ops, r.Check.Keys)
	fmt.Fprintf(&sb, "  replicas converged: %v (applied index %d, FSM checksum %016x)\n", r.Converged, r.Applied, r.Checksum)
	fmt.Fprintf(&sb, "  snapshot restores: %v; wiped and rejoined: %v\n", r.Restores, r.Wiped)
	return sb.String()
}

func (cfg *Config) ensureDefaults() {
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.Duration == 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.Clients == 0 {
		cfg.Clients = 4
	}
	if cfg.Keys == 0 {
		cfg.Keys = 8
	}
	if cfg.CheckTimeout == 0 {
		cfg.CheckTimeout = 2 * time.Minute
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
}

// ErrNotLinearizable is returned by Run when the history it checked is not
// linearizable; the error's text holds the seed and the minimal history.
var ErrNotLinearizable = errors.New("chaos: history is not linearizable")

// Run starts the cluster, runs the clients while injecting faults for
// cfg.Duration, heals everything, waits for the replicas to converge,
// checks the history and shuts the cluster down. The report is filled in as
// far as the run got; the error says what failed, with the seed.
func Run(cfg Config) (*Report, error) {
	cfg.ensureDefaults()
	rep := &Report{Seed: cfg.Seed, Nodes: cfg.Nodes, Duration: cfg.Duration}
	if cfg.Dir == "" || cfg.Command == nil {
		return rep, errors.New("chaos: Config.Dir and Config.Command are required")
	}
	err := run(cfg, rep)
	if err != nil {
		err = fmt.Errorf("chaos run with seed %d (%d nodes, in %s): %w", cfg.Seed, cfg.Nodes, cfg.Dir, err)
	}
	return rep, err
}

func run(cfg Config, rep *Report) (err error) {
	c, err := newCluster(cfg.Nodes, cfg.Dir, cfg.Command, cfg.Log, cfg.UnsafeLocalReads)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.stopAll(), c.failed()) }()
	c.logf("chaos: seed %d, %d nodes in %s", cfg.Seed, cfg.Nodes, cfg.Dir)
	for i := range c.procs {
		if err := c.start(i, true); err != nil {
			return err
		}
	}
	if err := c.waitLeader(); err != nil {
		return err
	}
	h := newHistory()
	f := &faulter{c: c, rng: rand.New(rand.NewPCG(cfg.Seed, 1)), counts: map[string]int{}, wiped: map[int]bool{}, t0: h.start}
	if err := load(cfg, c, h, f); err != nil {
		return err
	}
	rep.Faults = f.counts
	rep.Ops = map[string][3]int{}
	for op, n := range h.counts {
		rep.Ops[op] = *n
	}
	if err := c.converge(rep, f.wiped); err != nil {
		return err
	}
	c.logf("chaos: checking %d operations", len(h.ops))
	rep.Check = Check(h.ops, cfg.CheckTimeout)
	switch rep.Check.Result {
	case porcupine.Illegal:
		return fmt.Errorf("%w; a minimal failing history of one key:\n%s", ErrNotLinearizable, rep.Check.Minimal)
	case porcupine.Unknown:
		return fmt.Errorf("chaos: the linearizability check did not finish in %v", cfg.CheckTimeout)
	}
	return nil
}

// load runs the clients and the faults for cfg.Duration, then heals the
// network and restarts every node that is down.
func load(cfg Config, c *cluster, h *history, f *faulter) error {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	for id := range cfg.Clients {
		cl := &client{id: id, c: c, h: h, keys: cfg.Keys, seen: map[string]string{}, leader: -1,
			rng: rand.New(rand.NewPCG(cfg.Seed, uint64(id)+2))}
		wg.Add(1)
		go func() { defer wg.Done(); cl.run(ctx) }()
	}
	var ferr error
	if !cfg.NoFaults {
		ferr = f.run(ctx)
	}
	<-ctx.Done()
	wg.Wait()
	c.heal()
	for i := range c.procs {
		if !c.running(i) {
			if err := c.start(i, false); err != nil {
				return errors.Join(ferr, err)
			}
		}
	}
	return ferr
}

// waitLeader waits until some node leads.
func (c *cluster) waitLeader() error {
	deadline := time.Now().Add(progressWait)
	for time.Now().Before(deadline) {
		if c.leader() >= 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no leader %v after the start", progressWait)
}

// converge commits one more entry through the leader, then waits until
// every node has applied the same entries and has the same FSM checksum,
// and every wiped node has restored a snapshot.
func (c *cluster) converge(rep *Report, wiped map[int]bool) error {
	if err := c.finalWrite(); err != nil {
		return err
	}
	deadline := time.Now().Add(progressWait)
	var sts []status
	for time.Now().Before(deadline) {
		sts = sts[:0]
		for i := range c.procs {
			st, err := c.status(i)
			if err != nil {
				st.ID, st.Err = c.procs[i].cfg.ID, err.Error()
			}
			sts = append(sts, st)
		}
		if same(sts) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	rep.Restores = map[string]int64{}
	for _, st := range sts {
		rep.Restores[st.ID] = st.Restores
	}
	if !same(sts) {
		return fmt.Errorf("replicas did not converge in %v: %+v", progressWait, sts)
	}
	rep.Converged, rep.Applied, rep.Checksum = true, sts[0].Applied, sts[0].Checksum
	for i := range c.procs {
		if wiped[i] {
			rep.Wiped = append(rep.Wiped, sts[i].ID)
			// A restart restores the latest snapshot too; a wiped node
			// has none of its own, so it came from the leader.
			if sts[i].Restores == 0 {
				return fmt.Errorf("%s was wiped but restored no snapshot", sts[i].ID)
			}
		}
	}
	c.logf("chaos: %d replicas converged at applied index %d, checksum %016x", len(sts), rep.Applied, rep.Checksum)
	return nil
}

// same reports whether every node answered without an error and all
// applied the same entries to the same state.
func same(sts []status) bool {
	for _, st := range sts {
		if st.Err != "" || st.Applied != sts[0].Applied || st.Checksum != sts[0].Checksum || st.Applied == 0 {
			return false
		}
	}
	return true
}

// finalWrite commits a put outside the clients' keys through the leader,
// retrying until one is answered: after it, the leader has committed
// everything its log held.
func (c *cluster) finalWrite() error {
	deadline := time.Now().Add(progressWait)
	for time.Now().Before(deadline) {
		if l := c.leader(); l >= 0 {
			if _, how, _ := c.do(context.Background(), l, Input{Op: "put", Key: "final", Value: "done"}); how == done {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no write committed %v after the final heal", progressWait)
}
