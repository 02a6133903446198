// Command chaos runs a replicated key-value service on raftstore under
// faults for as long as asked, and checks what its clients saw for
// linearizability (porcupine) and its replicas for convergence (equal FSM
// checksums after the final heal). Each node is a process of its own (this
// program, run again as "chaos node ..."), with its own data directory,
// talking to the others over loopback TCP through proxies that the
// command drops, delays and cuts:
//
//	go run ./cmd/chaos -nodes 5 -duration 10m            # a new seed, printed
//	go run ./cmd/chaos -nodes 3 -duration 1m -seed 42    # the same faults and operations again
//
// It exits 1 if the history is not linearizable (printing the seed and a
// minimal failing history of one key, and writing porcupine's HTML view
// to -visualize), if the replicas do not converge, or if a node fails.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/vigildb/vigil/raftstore/chaos"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "node" {
		if err := chaos.RunNodeArgs(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "chaos node:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(run())
}

func run() int {
	var cfg chaos.Config
	flag.IntVar(&cfg.Nodes, "nodes", 3, "cluster size")
	flag.DurationVar(&cfg.Duration, "duration", time.Minute, "how long clients run while faults are injected")
	flag.Uint64Var(&cfg.Seed, "seed", 0, "seed of the faults and operations (0: a new one, printed)")
	flag.IntVar(&cfg.Clients, "clients", 4, "concurrent clients")
	flag.IntVar(&cfg.Keys, "keys", 8, "keys the clients use")
	flag.BoolVar(&cfg.NoFaults, "no-faults", false, "run the clients without faults")
	dir := flag.String("dir", "", "data directory (default: a new temporary one, removed after a run that passes)")
	vis := flag.String("visualize", "chaos-history.html", "where a failing run writes porcupine's view of the history")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "chaos: unexpected arguments %q\n", flag.Args())
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	cfg.Dir = *dir
	if cfg.Dir == "" {
		if cfg.Dir, err = os.MkdirTemp("", "vigil-chaos-"); err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			return 1
		}
	}
	cfg.Command = func(args []string) *exec.Cmd { return exec.Command(exe, append([]string{"node"}, args...)...) }
	cfg.Log = os.Stdout
	start := time.Now()
	rep, err := chaos.Run(cfg)
	fmt.Print(rep)
	fmt.Printf("  wall time %v\n", time.Since(start).Round(time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos: FAILED:", err)
		if errors.Is(err, chaos.ErrNotLinearizable) {
			if verr := rep.Check.Visualize(*vis); verr == nil {
				fmt.Fprintln(os.Stderr, "chaos: porcupine's view of the history:", *vis)
			}
		}
		fmt.Fprintln(os.Stderr, "chaos: node logs and data kept in", cfg.Dir)
		return 1
	}
	if *dir == "" {
		_ = os.RemoveAll(cfg.Dir)
	}
	fmt.Println("chaos: PASS")
	return 0
}
