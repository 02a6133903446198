// Command raftbench compares Vigil's raftstore.Store with raft-boltdb v2 and
// raft-wal, every engine durable on every write (see benchsuite.Engines for
// what each does per write).
//
// By default it runs hashicorp/raft's store benchmarks (benchsuite.Cases)
// for -rounds rounds, every benchmark once per engine in a round, the
// engines' order rotated round by round (vigil boltdb raftwal, then boltdb
// raftwal vigil, ...), and prints per benchmark the median ns/op of each
// engine and, for each other engine, the median over the rounds of the
// ratio other/first of one round's runs (first: the first of -engines,
// vigil by default; above 1: the first is faster). The runs of a round are back to
// back, so their ratio is what other load on the machine disturbs least.
//
//	go run ./cmd/raftbench                  # 3 rounds of 1 s per benchmark and engine
//	go run ./cmd/raftbench -rounds 5 -bench 'StoreLogs|GetLog' -benchtime 2s -engines vigil,raftwal
//
// With -sustained D it instead appends for D per engine and round, as a
// raft leader under sustained load writes its log: one writer, consecutive
// indexes, -batch entries of -entry bytes per StoreLogs (each call synced
// before the next), and every -compact-every entries a DeleteRange of all
// but the newest -trailing entries, as raft compacts after a snapshot. Each
// run is a child process of its own (this binary re-executed), so that the
// peak RSS reported is that engine's alone; the engines run A B C A B C
// ... for -rounds rounds, and the ratios are taken per round, then their
// median.
//
//	go run ./cmd/raftbench -sustained 20s -rounds 5
//	go run ./cmd/raftbench -sustained 20s -batch 1 -entry 1024 -dir /data/bench
//
// The defaults are raft's own: -batch 64 is MaxAppendEntries, the most a
// leader puts into one StoreLogs when applies queue up (as they do under a
// sustained load) and the longest AppendEntries a follower stores; -batch
// 1 is an idle leader's single apply, which measures little but fsync
// latency. -compact-every 8192 is SnapshotThreshold and -trailing 10240
// TrailingLogs. -entry 256 is a small command (a key, a value and some
// framing), the kind raft's users replicate.
//
// Stores are made in -dir (default: the system's temporary directory);
// its file system is printed, with a warning for tmpfs, where fsync is
// free. The machine's load average is printed before and after: synced
// writes measure fsync latency, which other work on the machine moves.
package main

import (
	"flag"
	"fmt"
	"io"
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
	if len(os.Args) > 1 && os.Args[1] == childArg {
		os.Exit(childMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	rounds := flag.Int("rounds", 3, "rounds; each runs every benchmark once per engine")
	benchtime := flag.Duration("benchtime", time.Second, "target time of one benchmark run")
	bench := flag.String("bench", ".", "regexp of the benchmarks to run")
	engineList := flag.String("engines", "vigil,boltdb,raftwal", "comma-separated engines; ratios are against the first")
	dir := flag.String("dir", "", "directory to make the stores in (default: the system's temporary directory)")
	sustained := flag.Duration("sustained", 0, "run the sustained-append workload for this long per engine and round instead of the benchmarks")
	batch := flag.Int("batch", 64, "sustained: entries per StoreLogs (raft's MaxAppendEntries)")
	entry := flag.Int("entry", 256, "sustained: bytes of data per entry")
	compactEvery := flag.Uint64("compact-every", 8192, "sustained: compact the log every this many entries (raft's SnapshotThreshold; 0: never)")
	trailing := flag.Uint64("trailing", 10240, "sustained: entries a compaction keeps (raft's TrailingLogs)")
	flag.Parse()
	fail := func(code int, err any) {
		fmt.Fprintln(os.Stderr, "raftbench:", err)
		os.Exit(code)
	}
	if flag.NArg() > 0 {
		fail(2, fmt.Sprintf("unexpected arguments %q", flag.Args()))
	}
	if *rounds < 1 {
		fail(2, "-rounds must be at least 1")
	}
	engines, err := parseEngines(*engineList)
	if err != nil {
		fail(2, err)
	}
	if *dir != "" {
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			fail(1, err)
		}
	}
	benchsuite.TempDir = *dir
	where := *dir
	if where == "" {
		where = os.TempDir()
	}
	fs := fsType(where)
	fmt.Printf("raftbench: %s %s/%s GOMAXPROCS=%d, engines %s, stores in %s (%s), load average %s\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), *engineList, where, fs, loadavg())
	if fs == "tmpfs" || fs == "ramfs" {
		fmt.Printf("raftbench: warning: %s is in memory, where fsync costs nothing: use -dir on the disk raft would use\n", where)
	}

	if *sustained > 0 {
		cfg := benchsuite.Sustained{Duration: *sustained, Batch: *batch, Entry: *entry, CompactEvery: *compactEvery, Trailing: *trailing}
		if cfg.Batch < 1 || cfg.Entry < 0 {
			fail(2, "-batch must be at least 1 and -entry at least 0")
		}
		fmt.Printf("sustained appends: %d rounds of %v per engine, %d entries of %d bytes per StoreLogs, compaction every %d entries keeping %d\n",
			*rounds, cfg.Duration, cfg.Batch, cfg.Entry, cfg.CompactEvery, cfg.Trailing)
		exe, err := os.Executable()
		if err != nil {
			fail(1, err)
		}
		res, err := sustainedRounds(exe, engines, cfg, *rounds, where, os.Stderr)
		if err != nil {
			fail(1, err)
		}
		fmt.Println()
		printSustained(os.Stdout, engines, res)
		fmt.Printf("\nload average after: %s\n", loadavg())
		return
	}

	re, err := regexp.Compile(*bench)
	if err != nil {
		fail(2, fmt.Errorf("-bench: %w", err))
	}
	testing.Init()
	if err := flag.Set("test.benchtime", benchtime.String()); err != nil {
		fail(2, err)
	}
	var cases []benchsuite.Case
	for _, c := range benchsuite.Cases {
		if re.MatchString(c.Name) {
			cases = append(cases, c)
		}
	}
	fmt.Printf("benchmarks: %d rounds of %v per benchmark and engine\n", *rounds, *benchtime)
	res, err := benchRounds(engines, cases, *rounds, os.Stderr)
	if err != nil {
		fail(1, err)
	}
	fmt.Println()
	printBench(os.Stdout, engines, cases, res)
	fmt.Printf("\nns/op: median of %d rounds; other/%s: median of the rounds' ratios (per round in brackets); n/a: the engine cannot run raft's helper; load average after: %s\n",
		*rounds, engines[0].Name, loadavg())
}

// parseEngines returns the engines a comma-separated list names.
func parseEngines(list string) ([]benchsuite.Engine, error) {
	var engines []benchsuite.Engine
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		e, ok := benchsuite.EngineByName(name)
		if !ok {
			return nil, fmt.Errorf("-engines: unknown engine %q", name)
		}
		if slices.ContainsFunc(engines, func(o benchsuite.Engine) bool { return o.Name == name }) {
			return nil, fmt.Errorf("-engines: %s named twice", name)
		}
		engines = append(engines, e)
	}
	return engines, nil
}

// benchResult is one case on one engine over the rounds.
type benchResult struct{ ns, allocs []float64 }

// benchRounds runs every case on every engine once per round, the engines'
// order rotated by one each round; res[case][engine].
func benchRounds(engines []benchsuite.Engine, cases []benchsuite.Case, rounds int, progress io.Writer) ([][]benchResult, error) {
	res := make([][]benchResult, len(cases))
	for i := range res {
		res[i] = make([]benchResult, len(engines))
	}
	for r := range rounds {
		for ci, c := range cases {
			for k := range engines {
				ei := (k + r) % len(engines)
				e := engines[ei]
				if !c.Supports(e) {
					continue
				}
				var failed bool
				br := testing.Benchmark(func(b *testing.B) {
					defer func() { failed = failed || b.Failed() }()
					benchsuite.Run(b, e, c)
				})
				if failed || br.N == 0 {
					return nil, fmt.Errorf("%s on %s failed", c.Name, e.Name)
				}
				ns := float64(br.T.Nanoseconds()) / float64(br.N) // NsPerOp rounds down to whole ns
				res[ci][ei].ns = append(res[ci][ei].ns, ns)
				res[ci][ei].allocs = append(res[ci][ei].allocs, float64(br.AllocsPerOp()))
				fmt.Fprintf(progress, "round %d %-17s %-7s %12.1f ns/op %4d allocs/op (N=%d)\n", r+1, c.Name, e.Name, ns, br.AllocsPerOp(), br.N)
			}
		}
	}
	return res, nil
}

// printBench prints benchRounds' results as a Markdown table.
func printBench(w io.Writer, engines []benchsuite.Engine, cases []benchsuite.Case, res [][]benchResult) {
	base := engines[0].Name
	head := []string{"benchmark"}
	for _, e := range engines {
		head = append(head, e.Name+" ns/op")
	}
	for _, e := range engines[1:] {
		head = append(head, e.Name+"/"+base)
	}
	for _, e := range engines {
		head = append(head, e.Name+" allocs/op")
	}
	printRow(w, head)
	printRule(w, len(head))
	for ci, c := range cases {
		row := []string{c.Name}
		for ei := range engines {
			row = append(row, ifRan(res[ci][ei].ns, fmtNs))
		}
		for ei := 1; ei < len(engines); ei++ {
			row = append(row, fmtRatios(perRound(res[ci][ei].ns, res[ci][0].ns)))
		}
		for ei := range engines {
			row = append(row, ifRan(res[ci][ei].allocs, func(x float64) string { return fmt.Sprintf("%.0f", x) }))
		}
		printRow(w, row)
	}
}

// perRound returns num[r]/den[r] for every round both ran.
func perRound(num, den []float64) []float64 {
	var rs []float64
	for r := range min(len(num), len(den)) {
		rs = append(rs, num[r]/max(den[r], 1e-9))
	}
	return rs
}

// fmtRatios formats ratios' median and, in brackets, the ratios.
func fmtRatios(rs []float64) string {
	if len(rs) == 0 {
		return "n/a"
	}
	each := make([]string, len(rs))
	for i, r := range rs {
		each[i] = fmt.Sprintf("%.2f", r)
	}
	return fmt.Sprintf("%.2fx [%s]", median(rs), strings.Join(each, " "))
}

// ifRan formats the median of xs, or "n/a" if there are none.
func ifRan(xs []float64, format func(float64) string) string {
	if len(xs) == 0 {
		return "n/a"
	}
	return format(median(xs))
}

func printRow(w io.Writer, cells []string) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
}

func printRule(w io.Writer, n int) {
	cells := make([]string, n)
	cells[0] = "---"
	for i := 1; i < n; i++ {
		cells[i] = "---:"
	}
	fmt.Fprintf(w, "|%s|\n", strings.Join(cells, "|"))
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
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
