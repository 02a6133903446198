// Command vsbolt runs hashicorp/raft's store benchmarks against Vigil's
// raftstore.Store and raft-boltdb v2, alternating the engines round by
// round (vigil first in even rounds, boltdb first in odd ones), and prints
// the median ns/op of each and the median over the rounds of the ratio
// boltdb/vigil of one round's two runs (above 1: Vigil is faster). The two
// runs of a round are back to back, so their ratio is what other load on
// the machine disturbs least.
//
//	go run ./cmd/vsbolt                  # 3 rounds of 1 s per benchmark and engine
//	go run ./cmd/vsbolt -rounds 5 -bench 'StoreLogs|GetLog' -benchtime 2s
//
// The machine's load average is printed before and after: the synced
// benchmarks measure fsync latency, which other work on the machine moves.
package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigildb/vigil/raftstore/internal/benchsuite"
)

func main() {
	rounds := flag.Int("rounds", 3, "rounds; each runs every benchmark once per engine")
	benchtime := flag.Duration("benchtime", time.Second, "target time of one benchmark run")
	bench := flag.String("bench", ".", "regexp of the benchmarks to run")
	flag.Parse()
	re, err := regexp.Compile(*bench)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vsbolt: -bench:", err)
		os.Exit(2)
	}
	testing.Init()
	if err := flag.Set("test.benchtime", benchtime.String()); err != nil {
		fmt.Fprintln(os.Stderr, "vsbolt:", err)
		os.Exit(2)
	}
	var cases []benchsuite.Case
	for _, c := range benchsuite.Cases {
		if re.MatchString(c.Name) {
			cases = append(cases, c)
		}
	}
	engines := benchsuite.Engines
	fmt.Printf("vsbolt: %s %s/%s GOMAXPROCS=%d, %d rounds of %v, load average %s\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), *rounds, *benchtime, loadavg())

	type result struct{ ns, allocs []float64 }
	res := make([][]result, len(cases))
	for i := range res {
		res[i] = make([]result, len(engines))
	}
	for r := 0; r < *rounds; r++ {
		for ci, c := range cases {
			for k := range engines {
				ei := k
				if r%2 == 1 {
					ei = len(engines) - 1 - k
				}
				e := engines[ei]
				var failed string
				br := testing.Benchmark(func(b *testing.B) {
					defer func() {
						if b.Failed() {
							failed = "failed"
						}
					}()
					benchsuite.Run(b, e, c)
				})
				if failed != "" || br.N == 0 {
					fmt.Fprintf(os.Stderr, "vsbolt: %s on %s failed\n", c.Name, e.Name)
					os.Exit(1)
				}
				res[ci][ei].ns = append(res[ci][ei].ns, float64(br.NsPerOp()))
				res[ci][ei].allocs = append(res[ci][ei].allocs, float64(br.AllocsPerOp()))
				fmt.Fprintf(os.Stderr, "round %d %-12s %-7s %10d ns/op %4d allocs/op (N=%d)\n", r+1, c.Name, e.Name, br.NsPerOp(), br.AllocsPerOp(), br.N)
			}
		}
	}

	fmt.Println()
	fmt.Printf("| benchmark | vigil ns/op | boltdb ns/op | boltdb/vigil | per round | vigil allocs/op | boltdb allocs/op |\n")
	fmt.Printf("|---|---:|---:|---:|---|---:|---:|\n")
	for ci, c := range cases {
		var ratios []float64
		var perRound []string
		for r := range res[ci][0].ns {
			ratios = append(ratios, res[ci][1].ns[r]/max(res[ci][0].ns[r], 1))
			perRound = append(perRound, fmt.Sprintf("%.2f", ratios[r]))
		}
		fmt.Printf("| %s | %s | %s | %.2fx | %s | %.0f | %.0f |\n", c.Name,
			fmtNs(median(res[ci][0].ns)), fmtNs(median(res[ci][1].ns)), median(ratios), strings.Join(perRound, " "),
			median(res[ci][0].allocs), median(res[ci][1].allocs))
	}
	fmt.Printf("\nns/op: median of %d rounds; boltdb/vigil: median of the rounds' ratios; load average after: %s\n", *rounds, loadavg())
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtNs(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.2f µs", ns/1e3)
	}
	return fmt.Sprintf("%.1f ns", ns)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
