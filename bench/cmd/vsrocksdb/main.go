// Command vsrocksdb runs the same db_bench command lines through `vigil
// kvbench` and RocksDB's own db_bench, one process per engine and run,
// alternating the engines run by run, and prints one table of both, the
// ratio, and each process's peak RSS (from wait4's rusage, as /usr/bin/time
// -v reports it). Without db_bench on the machine it says so and exits 0.
//
//	go run ./bench/cmd/vsrocksdb                                  # every scenario, 3 runs (~10 min)
//	go run ./bench/cmd/vsrocksdb --runs 1 --scale 0.05 --scenarios checksum,memtable   # a quick look
//	go run ./bench/cmd/vsrocksdb --scenarios large                 # a DB ten times the cache (only when named)
//
// Scenarios (--scenarios, default all): memtable (RocksDB PR #12889:
// fillseq, readrandom, readseq, readreverse in a 256 MiB memtable, paranoid
// memory checks off and on), fillseq (PR #9069: -memtablerep=vector
// -allow_concurrent_memtable_write=false per checksum type) and checksum
// (PR #9069's crc32c, xxhash, xxhash64, xxh3 at 4096-byte blocks). Not in
// all, only when named: large, a DB ten times the cache (fillrandom of 10M
// keys with a 64 MiB cache and 64 MiB write buffers, snappy, then
// readrandom and seekrandom x1M in the same process, on disk under --dir),
// whose --histogram=1 output adds a second table of each benchmark's P99,
// P99.9 and slowest operation per engine, the DB's size on disk, and the
// scenario's goals met or missed; --scale scales its cache and write
// buffers with its counts. A case
// db_bench cannot run (a flag or benchmark it lacks: db_bench 7.8.3 has no
// --paranoid_memory_checks, no checksum type 5, no crc64) shows "n/a" on its
// side. vigil is built from this module unless --vigil names a binary.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

type config struct {
	runs      int
	scale     float64
	scenarios []Scenario
	vigil     string
	dbBench   string
	dir       string
	jsonPath  string
	verbose   bool
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("vsrocksdb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &config{}
	var list string
	fs.IntVar(&c.runs, "runs", 3, "runs per case and engine, engines alternating; the table shows medians")
	fs.Float64Var(&c.scale, "scale", 1, "multiply key, read and checksum-op counts by this (0.05 for a quick look); large also scales its cache and write buffers")
	fs.StringVar(&list, "scenarios", "all", "comma-separated: memtable, fillseq, checksum, large (all = every one but large, which runs only when named)")
	fs.StringVar(&c.vigil, "vigil", "", "vigil binary (default: go build this module's ./cmd/vigil)")
	fs.StringVar(&c.dbBench, "db_bench", "db_bench", "RocksDB's db_bench binary (name or path)")
	fs.StringVar(&c.dir, "dir", "", "parent of the temporary DB directories (default: the system's; fillseq uses /dev/shm when present; large wants a disk: up to ~1 GB per engine)")
	fs.StringVar(&c.jsonPath, "json", "", "write every sample and the table rows as JSON to this file")
	fs.BoolVar(&c.verbose, "verbose", false, "copy both engines' output to stderr")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usageError{"unexpected arguments: " + strings.Join(fs.Args(), " ")}
	}
	if c.runs < 1 {
		return nil, usageError{"--runs must be >= 1"}
	}
	if c.scale <= 0 || c.scale > 100 {
		return nil, usageError{"--scale must be in (0, 100]"}
	}
	s, err := SelectScenarios(list)
	if err != nil {
		return nil, usageError{"--scenarios: " + err.Error()}
	}
	c.scenarios = s
	return c, nil
}

// Engine is one side of the comparison.
type Engine struct {
	Name string   // "vigil" or "db_bench"
	Path string   // binary
	Pre  []string // arguments before the flags ("kvbench")
	// Known is the set of flag names the binary takes (nil: all).
	Known map[string]bool
	// Version is what the binary says it is.
	Version string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "vsrocksdb: %v\n", err)
		return 2
	}
	if err != nil {
		return 2
	}
	dbb, err := findDBBench(c.dbBench)
	if err != nil {
		fmt.Fprintf(stdout, "vsrocksdb: %v; skipping the comparison (install it with apt-get install rocksdb-tools)\n", err)
		return 0
	}
	tmp, err := os.MkdirTemp(c.dir, "vsrocksdb-")
	if err != nil {
		fmt.Fprintf(stderr, "vsrocksdb: %v\n", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	vig, err := findVigil(ctx, c.vigil, tmp)
	if err != nil {
		fmt.Fprintf(stderr, "vsrocksdb: %v\n", err)
		return 1
	}
	printHeader(stdout, c, vig, dbb)
	start := time.Now()
	rep, err := compare(ctx, c, []Engine{vig, dbb}, tmp, stderr)
	status := 0
	if err != nil {
		fmt.Fprintf(stderr, "vsrocksdb: %v\n", err)
		status = 1
	}
	if rep != nil && len(rep.Samples) > 0 {
		fmt.Fprintln(stdout)
		if err != nil {
			fmt.Fprintln(stdout, "PARTIAL RESULTS (the comparison stopped early):")
		}
		rep.WriteTable(stdout)
		fmt.Fprintf(stdout, "\nWall time %v; load avg at end: %s\n", time.Since(start).Round(time.Second), loadAvg())
		if c.jsonPath != "" {
			data, jerr := json.MarshalIndent(struct {
				Report *Report `json:"report"`
				Rows   []Row   `json:"rows"`
			}{rep, rep.Rows()}, "", "  ")
			if jerr == nil {
				jerr = os.WriteFile(c.jsonPath, data, 0o644)
			}
			if jerr != nil {
				fmt.Fprintf(stderr, "vsrocksdb: --json: %v\n", jerr)
				status = 1
			}
		}
	}
	return status
}

// findDBBench locates db_bench and learns its version and flags.
func findDBBench(name string) (Engine, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return Engine{}, fmt.Errorf("db_bench not found (%s)", name)
	}
	e := Engine{Name: "db_bench", Path: path, Version: "unknown"}
	if out, _ := exec.Command(path, "--version").CombinedOutput(); len(out) > 0 {
		e.Version = strings.TrimSpace(string(out))
	}
	// gflags prints its help as XML and exits with status 1.
	out, _ := exec.Command(path, "--helpxml").Output()
	if known := flagNamesFromHelpXML(out); len(known) > 0 {
		e.Known = known
	}
	return e, nil
}

// flagNamesFromHelpXML returns the flag names of gflags' --helpxml output.
func flagNamesFromHelpXML(data []byte) map[string]bool {
	i := bytes.Index(data, []byte("<flag>"))
	j := bytes.LastIndex(data, []byte("</flag>"))
	if i < 0 || j < 0 {
		return nil
	}
	var doc struct {
		Flags []struct {
			Name string `xml:"name"`
		} `xml:"flag"`
	}
	body := append(append([]byte("<x>"), data[i:j+len("</flag>")]...), "</x>"...)
	if xml.Unmarshal(body, &doc) != nil {
		return nil
	}
	m := map[string]bool{}
	for _, f := range doc.Flags {
		m[f.Name] = true
	}
	return m
}

// findVigil returns the given vigil binary, or builds this module's.
func findVigil(ctx context.Context, path, tmp string) (Engine, error) {
	e := Engine{Name: "vigil", Pre: []string{"kvbench"}}
	if path == "" {
		path = filepath.Join(tmp, "vigil")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", path, "github.com/vigildb/vigil/cmd/vigil")
		if out, err := cmd.CombinedOutput(); err != nil {
			return e, fmt.Errorf("building vigil (run from the repository, or pass --vigil): %v\n%s", err, out)
		}
	}
	e.Path = path
	out, err := exec.CommandContext(ctx, path, "version").Output()
	if err != nil {
		return e, fmt.Errorf("%s version: %v", path, err)
	}
	e.Version = strings.TrimSpace(string(out))
	return e, nil
}

// Sample is one benchmark's figure in one process run.
type Sample struct {
	Scenario string  `json:"scenario"`
	Case     string  `json:"case"`
	Engine   string  `json:"engine"`
	Run      int     `json:"run"`
	First    bool    `json:"first"`
	Bench    string  `json:"benchmark"`
	Ops      float64 `json:"ops_per_sec"`
	MBs      float64 `json:"mb_per_sec,omitempty"`
	RSSKiB   int64   `json:"peak_rss_kib"`
	// Latency is the benchmark's histogram summary (--histogram=1 cases).
	Latency *Latency `json:"latency_us,omitempty"`
	// DBBytes is the DB directory's size when the process ended (the
	// cases with Latency set; 0 otherwise).
	DBBytes int64 `json:"db_bytes,omitempty"`
}

// Latency is what db_bench's --histogram=1 prints after a benchmark, in
// microseconds: its "Min: ... Median: ... Max: ..." and "Percentiles: ..."
// lines of the benchmark's first histogram.
type Latency struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
	P50    float64 `json:"p50"`
	P99    float64 `json:"p99"`
	P999   float64 `json:"p99_9"`
	P9999  float64 `json:"p99_99"`
}

// Report holds a comparison's samples.
type Report struct {
	Engines []string `json:"engines"`
	Runs    int      `json:"runs"`
	Cases   []Case   `json:"cases"`
	Samples []Sample `json:"samples"`
	// NA maps "scenario/case" to why db_bench did not run it.
	NA map[string]string `json:"not_run,omitempty"`
	// Notes are remarks from the engines' output worth keeping (db_bench
	// built with assertions, flags vigil reported as not applicable).
	Notes []string `json:"notes,omitempty"`
}

// compare runs every case c.runs times on both engines, alternating which
// goes first.
func compare(ctx context.Context, c *config, engines []Engine, tmp string, progress io.Writer) (*Report, error) {
	rep := &Report{Runs: c.runs, NA: map[string]string{}}
	for _, e := range engines {
		rep.Engines = append(rep.Engines, e.Name)
	}
	for _, sc := range c.scenarios {
		for _, cs := range sc.Cases(c.scale) {
			rep.Cases = append(rep.Cases, cs)
			key := cs.Scenario + "/" + cs.Name
			for i := 0; i < c.runs; i++ {
				order := slices.Clone(engines)
				if i%2 == 1 {
					slices.Reverse(order)
				}
				for pos, e := range order {
					if err := ctx.Err(); err != nil {
						return rep, err
					}
					flags := cs.Flags
					if e.Name == "db_bench" {
						var reason string
						if cs.VigilOnly != "" {
							reason = cs.VigilOnly
						} else {
							flags, reason = dbBenchFlags(cs.Flags, e.Known)
						}
						if reason != "" {
							rep.NA[key] = reason
							continue
						}
					}
					res, err := runProcess(ctx, e, flags, cs, tmp, c)
					if err != nil {
						return rep, fmt.Errorf("%s run %d, %s: %w", key, i+1, e.Name, err)
					}
					for _, n := range res.notes {
						if !slices.Contains(rep.Notes, n) {
							rep.Notes = append(rep.Notes, n)
						}
					}
					var parts []string
					for _, b := range res.benches {
						rep.Samples = append(rep.Samples, Sample{Scenario: cs.Scenario, Case: cs.Name, Engine: e.Name,
							Run: i + 1, First: pos == 0, Bench: b.name, Ops: b.ops, MBs: b.mbs, RSSKiB: res.rssKiB,
							Latency: b.lat, DBBytes: res.dbBytes})
						part := fmt.Sprintf("%s %.0f/s", b.name, b.ops)
						if b.lat != nil {
							part += fmt.Sprintf(" (P99 %.1f us, max %.0f us)", b.lat.P99, b.lat.Max)
						}
						parts = append(parts, part)
					}
					db := ""
					if res.dbBytes > 0 {
						db = fmt.Sprintf("; DB %.1f MiB", float64(res.dbBytes)/(1<<20))
					}
					fmt.Fprintf(progress, "[%s %s %d/%d] %-8s %s; peak RSS %.1f MiB%s\n", cs.Scenario, cs.Name, i+1, c.runs,
						e.Name, strings.Join(parts, ", "), float64(res.rssKiB)/1024, db)
				}
			}
		}
	}
	return rep, nil
}

type benchFigure struct {
	name     string
	ops, mbs float64
	lat      *Latency // nil without --histogram=1
}

type procResult struct {
	benches []benchFigure
	rssKiB  int64
	dbBytes int64 // the DB directory's size at the end (Case.Latency only)
	notes   []string
}

// runProcess runs one engine on one case in a fresh DB directory.
func runProcess(ctx context.Context, e Engine, flags []string, cs Case, tmp string, c *config) (procResult, error) {
	parent := tmp
	if cs.ShmDB && c.dir == "" {
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			parent = "/dev/shm"
		}
	}
	dir, err := os.MkdirTemp(parent, "db-"+e.Name+"-")
	if err != nil {
		return procResult{}, err
	}
	defer os.RemoveAll(dir)
	args := append(slices.Clone(e.Pre), flags...)
	args = append(args, "--db="+filepath.Join(dir, "db"))
	if e.Name == "db_bench" {
		args = append(args, "--progress_reports=false")
	}
	cmd := exec.CommandContext(ctx, e.Path, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if c.verbose {
		cmd.Stdout = io.MultiWriter(&out, os.Stderr)
		cmd.Stderr = io.MultiWriter(&errOut, os.Stderr)
	}
	err = cmd.Run()
	res := procResult{rssKiB: peakRSSKiB(cmd.ProcessState)}
	if err != nil {
		return res, fmt.Errorf("%s %s: %v\n%s%s", e.Path, strings.Join(args, " "), err, tail(out.String()), tail(errOut.String()))
	}
	res.benches = parseResults(out.String())
	if cs.Latency {
		res.dbBytes = dirBytes(dir)
	}
	if len(res.benches) == 0 {
		return res, fmt.Errorf("no result lines in the output of %s %s:\n%s", e.Path, strings.Join(args, " "), tail(out.String()))
	}
	if strings.Contains(out.String(), "Assertions are enabled") {
		res.notes = append(res.notes, "db_bench says \"WARNING: Assertions are enabled; benchmarks unnecessarily slow\" (a build with assertions)")
	}
	for _, l := range strings.Split(errOut.String(), "\n") {
		if strings.HasPrefix(l, "kvbench: ") {
			res.notes = append(res.notes, "vigil: "+strings.TrimPrefix(l, "kvbench: "))
		}
	}
	return res, nil
}

// dirBytes is the total size of the files under dir (what du
// --apparent-size says), 0 if it cannot be walked.
func dirBytes(dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		return 0
	}
	return n
}

func tail(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n") + "\n"
}

var (
	resultRE = regexp.MustCompile(`^(\S+)\s+:\s+[\d.]+ micros/op (\d+) ops/sec(?: [\d.]+ seconds \d+ operations)?;\s*(?:([\d.]+) MB/s)?`)
	medianRE = regexp.MustCompile(`^(\S+) \[MEDIAN \d+ runs\] : (\d+) ops/sec(?:;\s+([\d.]+) MB/sec)?`)
	minMaxRE = regexp.MustCompile(`^Min: ([\d.]+)\s+Median: ([\d.]+)\s+Max: ([\d.]+)`)
	pctRE    = regexp.MustCompile(`^Percentiles: P50: ([\d.]+) P75: [\d.]+ P99: ([\d.]+) P99\.9: ([\d.]+) P99\.99: ([\d.]+)`)
)

// parseResults reads db_bench-format output: one figure per benchmark,
// the [MEDIAN n runs] line for a repeated one, and with --histogram=1 the
// latency summary of the first histogram after a benchmark's first result
// line.
func parseResults(out string) []benchFigure {
	var fs []benchFigure
	idx := map[string]int{}
	last := -1 // the figure the histogram lines that follow belong to
	var pending Latency
	put := func(name string, ops, mbs float64, median bool) {
		if i, ok := idx[name]; ok {
			if median {
				fs[i].ops, fs[i].mbs = ops, mbs
			}
			last = i
			return
		}
		idx[name] = len(fs)
		last = len(fs)
		fs = append(fs, benchFigure{name: name, ops: ops, mbs: mbs})
	}
	num := func(s string) float64 { x, _ := strconv.ParseFloat(s, 64); return x }
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l[strings.LastIndexByte(l, '\r')+1:])
		if m := medianRE.FindStringSubmatch(l); m != nil {
			put(m[1], num(m[2]), num(m[3]), true)
			last = -1
			continue
		}
		if m := resultRE.FindStringSubmatch(l); m != nil {
			put(m[1], num(m[2]), num(m[3]), false)
			continue
		}
		if m := minMaxRE.FindStringSubmatch(l); m != nil {
			pending = Latency{Min: num(m[1]), Median: num(m[2]), Max: num(m[3])}
			continue
		}
		if m := pctRE.FindStringSubmatch(l); m != nil && last >= 0 && fs[last].lat == nil {
			lat := pending
			lat.P50, lat.P99, lat.P999, lat.P9999 = num(m[1]), num(m[2]), num(m[3]), num(m[4])
			fs[last].lat = &lat
			last = -1
		}
	}
	return fs
}

// Row is one table line: a benchmark of a case, each engine's medians.
type Row struct {
	Scenario, Case, Bench string
	Ops, MBs              [2]float64 // median per engine; 0 = not run
	RSSMiB                [2]float64
	N                     [2]int
	NA                    string
	// P99 and P999 are the medians of the runs' P99 and P99.9 latencies
	// (microseconds), MaxLat the largest Max of any run: the slowest
	// operation seen. All 0 without histograms.
	P99, P999, MaxLat [2]float64
	// DBMiB is the median size of the DB directory when the process ended
	// (0 = not measured).
	DBMiB [2]float64
}

// HasLatency says whether either engine's runs carried histograms.
func (r Row) HasLatency() bool {
	return r.P99[0] > 0 || r.P99[1] > 0 || r.MaxLat[0] > 0 || r.MaxLat[1] > 0
}

// Ratio is the first engine's median ops/sec over the second's, 0 if unknown.
func (r Row) Ratio() float64 {
	if r.Ops[1] <= 0 {
		return 0
	}
	return r.Ops[0] / r.Ops[1]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// series are one row's per-engine sample values, before the medians.
type series struct {
	ops, mbs, rss, p99, p999, db [2][]float64
	maxLat                       [2]float64
}

// Rows reduces the samples to one row per (case, benchmark), in run order.
func (rep *Report) Rows() []Row {
	type key struct{ sc, cs, b string }
	var order []key
	vals := map[key]*series{}
	for _, s := range rep.Samples {
		k := key{s.Scenario, s.Case, s.Bench}
		v, ok := vals[k]
		if !ok {
			order = append(order, k)
			v = &series{}
			vals[k] = v
		}
		e := slices.Index(rep.Engines, s.Engine)
		if e < 0 || e > 1 {
			continue
		}
		v.ops[e] = append(v.ops[e], s.Ops)
		if s.MBs > 0 {
			v.mbs[e] = append(v.mbs[e], s.MBs)
		}
		v.rss[e] = append(v.rss[e], float64(s.RSSKiB)/1024)
		if s.Latency != nil {
			v.p99[e] = append(v.p99[e], s.Latency.P99)
			v.p999[e] = append(v.p999[e], s.Latency.P999)
			v.maxLat[e] = max(v.maxLat[e], s.Latency.Max)
		}
		if s.DBBytes > 0 {
			v.db[e] = append(v.db[e], float64(s.DBBytes)/(1<<20))
		}
	}
	var rows []Row
	for _, k := range order {
		v := vals[k]
		row := Row{Scenario: k.sc, Case: k.cs, Bench: k.b, NA: rep.NA[k.sc+"/"+k.cs], MaxLat: v.maxLat}
		for e := 0; e < 2; e++ {
			row.Ops[e] = median(v.ops[e])
			row.MBs[e] = median(v.mbs[e])
			row.RSSMiB[e] = median(v.rss[e])
			row.N[e] = len(v.ops[e])
			row.P99[e] = median(v.p99[e])
			row.P999[e] = median(v.p999[e])
			row.DBMiB[e] = median(v.db[e])
		}
		rows = append(rows, row)
	}
	return rows
}

// WriteTable prints the rows aligned, then the notes.
func (rep *Report) WriteTable(w io.Writer) {
	a, b := rep.Engines[0], rep.Engines[1]
	header := []string{"scenario", "case", "benchmark", a + " ops/s", b + " ops/s", a + "/" + b, a + " MB/s", b + " MB/s",
		a + " RSS MiB", b + " RSS MiB", "n"}
	var cells [][]string
	num := func(x float64, f string) string {
		if x <= 0 {
			return "n/a"
		}
		return fmt.Sprintf(f, x)
	}
	for _, r := range rep.Rows() {
		ratio := "-"
		if x := r.Ratio(); x > 0 {
			ratio = fmt.Sprintf("%.2fx", x)
		}
		mbA, mbB := "-", "-"
		if r.MBs[0] > 0 || r.MBs[1] > 0 {
			mbA, mbB = num(r.MBs[0], "%.1f"), num(r.MBs[1], "%.1f")
		}
		cells = append(cells, []string{r.Scenario, r.Case, r.Bench, num(r.Ops[0], "%.0f"), num(r.Ops[1], "%.0f"), ratio,
			mbA, mbB, num(r.RSSMiB[0], "%.1f"), num(r.RSSMiB[1], "%.1f"), fmt.Sprintf("%d/%d", r.N[0], r.N[1])})
	}
	writeAligned(w, header, cells, []bool{false, false, false, true, true, true, true, true, true, true, true})
	fmt.Fprintf(w, "(medians of n process runs per engine, engines alternating run by run; repeated benchmarks [-Xn]\n"+
		" count by their [MEDIAN n runs] line; RSS = the process's peak resident set, from wait4's rusage)\n")
	rep.writeLatencyTable(w)
	var na []string
	for k, why := range rep.NA {
		na = append(na, fmt.Sprintf("  %s: %s", k, why))
	}
	slices.Sort(na)
	if len(na) > 0 {
		fmt.Fprintf(w, "%s did not run:\n%s\n", b, strings.Join(na, "\n"))
	}
	if len(rep.Notes) > 0 {
		fmt.Fprintf(w, "Notes:\n  %s\n", strings.Join(rep.Notes, "\n  "))
	}
}

// writeAligned prints header and rows with columns padded to their widest
// cell, right-aligned where right says so, two spaces apart.
func writeAligned(w io.Writer, header []string, rows [][]string, right []bool) {
	width := make([]int, len(header))
	for _, row := range append([][]string{header}, rows...) {
		for i, c := range row {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	for _, row := range append([][]string{header}, rows...) {
		var sb strings.Builder
		for i, c := range row {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if i > 0 {
				sb.WriteString("  ")
			}
			if right[i] {
				sb.WriteString(pad + c)
			} else {
				sb.WriteString(c + pad)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(sb.String(), " "))
	}
}

// writeLatencyTable prints, for the rows with histograms, each engine's
// P99, P99.9 and slowest operation, and the DB size; then the large
// scenario's goals, when it ran.
func (rep *Report) writeLatencyTable(w io.Writer) {
	a, b := rep.Engines[0], rep.Engines[1]
	var rows []Row
	for _, r := range rep.Rows() {
		if r.HasLatency() {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	us := func(x float64) string {
		if x <= 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f", x)
	}
	header := []string{"scenario", "case", "benchmark", a + " P99", b + " P99", a + " P99.9", b + " P99.9",
		a + " max", b + " max", a + " DB MiB", b + " DB MiB"}
	var cells [][]string
	for _, r := range rows {
		cells = append(cells, []string{r.Scenario, r.Case, r.Bench, us(r.P99[0]), us(r.P99[1]), us(r.P999[0]), us(r.P999[1]),
			us(r.MaxLat[0]), us(r.MaxLat[1]), us(r.DBMiB[0]), us(r.DBMiB[1])})
	}
	fmt.Fprintf(w, "\nLatency, microseconds (--histogram=1):\n")
	writeAligned(w, header, cells, []bool{false, false, false, true, true, true, true, true, true, true, true})
	fmt.Fprintf(w, "(P99, P99.9: medians over the runs; max: the slowest single operation of any run;\n"+
		" DB MiB: the DB directory's size when the process ended, files' apparent sizes)\n")
	if goals := largeGoals(rows); len(goals) > 0 {
		fmt.Fprintf(w, "Goals of the large scenario (%s against %s):\n  %s\n", a, b, strings.Join(goals, "\n  "))
	}
}

// largeGoals checks the large scenario's rows against its issue's goals:
// readrandom and seekrandom >= 1.5x, their P99 <= the other engine's, peak
// RSS <= the other's, and the slowest write of the fill <= 2x the other's
// and <= 10 ms. None without large rows.
func largeGoals(rows []Row) []string {
	verdict := func(ok bool, format string, args ...any) string {
		v := "met"
		if !ok {
			v = "MISSED"
		}
		return fmt.Sprintf(format, args...) + ": " + v
	}
	var out []string
	for _, r := range rows {
		if r.Scenario != "large" || r.Ops[1] <= 0 {
			continue
		}
		switch r.Bench {
		case "readrandom", "seekrandom":
			out = append(out,
				verdict(r.Ratio() >= 1.5, "%s ops/s %.2fx (>= 1.5x)", r.Bench, r.Ratio()),
				verdict(r.P99[0] <= r.P99[1], "%s P99 %.2f us vs %.2f us (<=)", r.Bench, r.P99[0], r.P99[1]))
		case "fillrandom":
			out = append(out,
				verdict(r.MaxLat[0] <= 2*r.MaxLat[1] && r.MaxLat[0] <= 10_000,
					"fillrandom slowest write %.0f us vs %.0f us (<= 2x and <= 10000 us)", r.MaxLat[0], r.MaxLat[1]),
				verdict(r.RSSMiB[0] <= r.RSSMiB[1], "peak RSS %.1f MiB vs %.1f MiB (<=)", r.RSSMiB[0], r.RSSMiB[1]))
		}
	}
	return out
}

func printHeader(w io.Writer, c *config, vig, dbb Engine) {
	fmt.Fprintf(w, "vsrocksdb: vigil kvbench vs RocksDB db_bench, same flags, %d run(s) per engine and case, engines alternating\n", c.runs)
	fmt.Fprintf(w, "CPU:      %s (%d CPUs, GOMAXPROCS %d); %s\n", cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOARCH)
	fmt.Fprintf(w, "Load avg: %s (at start)\n", loadAvg())
	fmt.Fprintf(w, "vigil:    %s (%s)\n", vig.Version, vig.Path)
	fmt.Fprintf(w, "db_bench: %s (%s)\n", dbb.Version, dbb.Path)
	if c.scale != 1 {
		fmt.Fprintf(w, "SCALED:   --scale %g (key, read and checksum-op counts; large also its cache and write buffers) - not the reference figures\n", c.scale)
	}
	for _, s := range c.scenarios {
		fmt.Fprintf(w, "Scenario %-9s %s\n", s.Name, s.About)
		for _, cs := range s.Cases(c.scale) {
			fmt.Fprintf(w, "  %-20s %s\n", cs.Name, strings.Join(cs.Flags, " "))
		}
	}
}

func readSmall(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	return string(b)
}

func loadAvg() string {
	f := strings.Fields(readSmall("/proc/loadavg"))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	for _, l := range strings.Split(readSmall("/proc/cpuinfo"), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
