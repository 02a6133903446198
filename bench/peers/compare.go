package peers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/bench"
)

// Step is one kvbench invocation within a run of a scenario. The steps of
// one run share a database directory, so a later step reads what an
// earlier one wrote; a step gets its own Reads because kvbench has one
// --reads for all read benchmarks of an invocation (readrandom's count
// would otherwise also cut readseq short).
type Step struct {
	// Benchmarks is a kvbench --benchmarks list.
	Benchmarks string `json:"benchmarks"`
	// Reads is kvbench's --reads: -1 = Num.
	Reads int64 `json:"reads"`
}

// Scenario is a workload run the same way on every engine: a key count, a
// memtable size, and the kvbench steps of one run.
type Scenario struct {
	Name  string `json:"name"`
	About string `json:"about"`
	// Num is kvbench's --num, the number of keys.
	Num int64 `json:"num"`
	// WriteBufferSize is the memtable size of both engines.
	WriteBufferSize int `json:"write_buffer_size"`
	// KeySize, ValueSize and Compression override the comparison's
	// --key_size, --value_size and --compression_type for this scenario
	// (0 or "" = keep them).
	KeySize     int    `json:"key_size,omitempty"`
	ValueSize   int    `json:"value_size,omitempty"`
	Compression string `json:"compression,omitempty"`
	// Steps run in order on one directory, fresh for each run.
	Steps []Step `json:"steps"`
}

// SetupBenchmarks are the steps reported in seconds, in their own section
// of the table: the kvbench utilities a scenario uses to shape the LSM
// (never part of a read figure), and the phases of [BigBatchBenchmark]
// (batch-apply and batch-flush make up its figure, batch-build and
// batch-close do not).
var SetupBenchmarks = map[string]bool{
	"flush": true, "compact": true, "stats": true,
	"batch-build": true, "batch-apply": true, "batch-flush": true, "batch-close": true,
}

// DefaultScenarios returns the scenarios of issue 8 (reads served by the
// memtable, reads of a fully compacted on-disk store, random fills that
// flush and compact as they go), random fills without compression, and
// one big batch followed by reads.
func DefaultScenarios() []Scenario {
	return []Scenario{
		{
			Name:            "memtable",
			About:           "250k keys in a 256 MiB write buffer; reads follow the run's fillseq",
			Num:             250_000,
			WriteBufferSize: 256 << 20,
			// readseq and readreverse read min(--reads, keys) = every key.
			// A scan of 250k memtable entries takes ~15 ms, too short to
			// time once on a shared machine: each repeats 10 times per run
			// (kvbench's [-X10]; reads leave the store unchanged) and the
			// table takes the median of all repeats.
			Steps: []Step{{Benchmarks: "fillseq,readrandom,readseq[-X10],readreverse[-X10]", Reads: 500_000}},
		},
		{
			Name:            "ondisk",
			About:           "2M keys, 64 MiB buffers; fillseq, flush and compact (untimed for reads), then reads",
			Num:             2_000_000,
			WriteBufferSize: 64 << 20,
			Steps: []Step{
				{Benchmarks: "fillseq,flush,compact,readrandom", Reads: 1_000_000},
				// Reopened on the same directory: full scans of all keys.
				{Benchmarks: "readseq,readreverse", Reads: -1},
			},
		},
		{
			Name:            "fillrandom",
			About:           "1M random keys into 64 MiB buffers (flushes and compactions included)",
			Num:             1_000_000,
			WriteBufferSize: 64 << 20,
			Steps:           []Step{{Benchmarks: "fillrandom", Reads: -1}},
		},
		{
			Name:            "fillrandom-nocompress",
			About:           "fillrandom with compression off for both engines, whatever --compression_type says",
			Num:             1_000_000,
			WriteBufferSize: 64 << 20,
			Compression:     "none",
			Steps:           []Step{{Benchmarks: "fillrandom", Reads: -1}},
		},
		{
			Name:            "bigbatch",
			About:           "one batch of 1M distinct 32-byte keys in random order, 32-byte values, no compression; timed: apply + flush; then reopen, readrandom, readseq",
			Num:             1_000_000,
			WriteBufferSize: 64 << 20,
			KeySize:         32,
			ValueSize:       32,
			Compression:     "none",
			Steps: []Step{
				// Build, apply, flush, close: see BigBatchBenchmark.
				{Benchmarks: BigBatchBenchmark, Reads: -1},
				// Reopened: every key read once at random, then one scan.
				{Benchmarks: "readrandom,readseq", Reads: -1},
			},
		},
	}
}

// SelectScenarios picks scenarios by name from all, in the order given;
// "" or "all" selects every one.
func SelectScenarios(all []Scenario, list string) ([]Scenario, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "all" {
		return slices.Clone(all), nil
	}
	var out []Scenario
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		i := slices.IndexFunc(all, func(s Scenario) bool { return s.Name == name })
		if i < 0 {
			names := make([]string, len(all))
			for j, s := range all {
				names[j] = s.Name
			}
			return nil, fmt.Errorf("unknown scenario %q (have %s)", name, strings.Join(names, ", "))
		}
		out = append(out, all[i])
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scenario selected")
	}
	return out, nil
}

// minScaledBuffer keeps scaled write buffers and caches big enough to be
// meaningful (and above Vigil's 64 KiB minimum).
const minScaledBuffer = 1 << 20

// ScaleBytes scales a buffer or cache size by f, with a floor of 1 MiB so
// that tiny scales stay valid; 0 (disabled) stays 0.
func ScaleBytes(n int64, f float64) int64 {
	if n <= 0 || f == 1 {
		return n
	}
	return max(int64(float64(n)*f), minScaledBuffer)
}

// Scale shrinks (or grows) a scenario by f: key and read counts, and the
// write buffer, so that the data keeps its ratio to the memtable and the
// LSM goes through the same flushes and compactions, only smaller. Counts
// stay at least 100. Scale the block cache with ScaleBytes too, to keep its
// ratio to the data.
func (s Scenario) Scale(f float64) Scenario {
	if f == 1 {
		return s
	}
	s.Num = max(int64(math.Round(float64(s.Num)*f)), 100)
	s.WriteBufferSize = int(ScaleBytes(int64(s.WriteBufferSize), f))
	steps := make([]Step, len(s.Steps))
	for i, st := range s.Steps {
		if st.Reads > 0 {
			st.Reads = max(int64(math.Round(float64(st.Reads)*f)), 100)
		}
		steps[i] = st
	}
	s.Steps = steps
	return s
}

// Contender is an engine taking part in a comparison.
type Contender struct {
	Name string
	Open bench.Opener
}

// DefaultContenders returns Vigil and Pebble (with the given memtable cache
// credit, see PebbleMemtableCacheCredit), in that order: ratios are the
// first engine's ops/sec over the second's.
func DefaultContenders(pebbleCacheCredit int) []Contender {
	return []Contender{
		{Name: "vigil", Open: bench.OpenVigil},
		{Name: "pebble", Open: func(o bench.EngineOptions) (bench.Engine, error) {
			return OpenPebbleWithCredit(o, pebbleCacheCredit)
		}},
	}
}

// Options configure Compare.
type Options struct {
	Scenarios []Scenario
	// Runs per scenario and engine (>= 1); the table shows medians.
	Runs int
	// Contenders: exactly two; ratios are the first over the second. With
	// ChildCommand set, only their names are used: the child process opens
	// the engine of that name among DefaultContenders(PebbleCacheCredit).
	Contenders []Contender
	// PebbleCacheCredit is the credit of the Pebble contender a child
	// process opens (see PebbleMemtableCacheCredit); in-process runs use
	// Contenders as given.
	PebbleCacheCredit int
	// Engine holds the settings both engines share (block size, cache,
	// bloom bits, compression, checksum, ...); WriteBufferSize comes from
	// each scenario, and a scenario may override Compression.
	Engine bench.EngineOptions
	// KeySize, ValueSize and CompressionRatio are kvbench's; a scenario
	// may override KeySize and ValueSize.
	KeySize          int
	ValueSize        int
	CompressionRatio float64
	// Seed drives the random keys; every engine and run gets the same ones.
	// It must not be 0 (kvbench would take the clock, and engines would
	// read different keys).
	Seed uint64
	// Dir is where each run's temporary directory is created; "" = the
	// system's temporary directory.
	Dir string
	// Log receives kvbench's own db_bench-style lines (and, with
	// ChildCommand, everything the child processes write); nil discards
	// them.
	Log io.Writer
	// Progress receives one line per engine run; nil discards it.
	Progress io.Writer
	// CPUProfile, if set, is a path prefix: each engine run writes
	// <prefix>-<scenario>-<engine>-run<i>.pprof.
	CPUProfile string
	// ChildCommand, if set, runs every (scenario, engine, run) in a child
	// process of its own: the command (argv) is started with a Job as JSON
	// on its stdin and must run it with [ChildMain]. Its peak RSS then
	// comes from the rusage wait4 returns. Nil = every run in this process,
	// and no RSS figures.
	ChildCommand []string
}

// Sample is one benchmark result of one engine in one run.
type Sample struct {
	Scenario string `json:"scenario"`
	Engine   string `json:"engine"`
	// Run is 1-based.
	Run int `json:"run"`
	// First says this engine ran first in its run's pair.
	First bool `json:"first"`
	// OpsPerSec repeats Result.OpsPerSec() for readers of the JSON.
	OpsPerSec float64      `json:"ops_per_sec"`
	Result    bench.Result `json:"result"`
}

// EngineRun is one run of one scenario on one engine: with
// Options.ChildCommand, one child process.
type EngineRun struct {
	Scenario string `json:"scenario"`
	Engine   string `json:"engine"`
	Run      int    `json:"run"`
	First    bool   `json:"first"`
	// MaxRSSKiB is the child's peak resident set size, ru_maxrss of the
	// rusage wait4 returned (KiB; 0 for in-process runs or where the OS
	// does not say). On Linux it cannot be below the parent's own peak
	// (VmHWM) at the time of the spawn, Report.ParentPeakKiB: exec carries
	// the high-water mark of the memory it replaces over, and Go's fork
	// shares the parent's until then.
	MaxRSSKiB int64 `json:"max_rss_kib"`
	// HWMKiB is the VmHWM the child read from /proc/self/status after its
	// last step, a cross-check of MaxRSSKiB free of that floor (0 where
	// unavailable).
	HWMKiB int64 `json:"vm_hwm_kib,omitempty"`
	// Wall is the run's wall time, process start-up included.
	Wall time.Duration `json:"wall_ns"`
}

// Report collects every sample of a comparison.
type Report struct {
	Engines   []string   `json:"engines"`
	Scenarios []Scenario `json:"scenarios"`
	Runs      int        `json:"runs"`
	Samples   []Sample   `json:"samples"`
	// EngineRuns has one entry per engine run, in the order they ran.
	EngineRuns []EngineRun `json:"engine_runs"`
	// ParentPeakKiB is the comparing process's own peak RSS at the end
	// (VmHWM, KiB; 0 where unknown): the floor of every child's MaxRSSKiB.
	// (Not its getrusage figure: that includes whatever exec'd it, such as
	// `go run`.)
	ParentPeakKiB int64 `json:"parent_peak_kib,omitempty"`
}

// RunOrder returns the engine order of run i (0-based): the given order on
// even runs, reversed on odd ones, so that warm-up effects (page cache,
// CPU frequency, the heap the previous run left) fall on each engine
// equally often.
func RunOrder(contenders []Contender, i int) []Contender {
	order := slices.Clone(contenders)
	if i%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

// Compare runs every scenario o.Runs times on each contender, alternating
// engines run by run (see RunOrder), each engine run on a fresh temporary
// directory that is removed afterwards, and in a child process of its own
// when o.ChildCommand is set. It stops between engine runs when ctx is
// done (and kills a running child), returning the samples so far with
// ctx's error.
func Compare(ctx context.Context, o Options) (*Report, error) {
	if len(o.Contenders) != 2 {
		return nil, fmt.Errorf("compare: need exactly 2 engines, got %d", len(o.Contenders))
	}
	if o.Runs < 1 {
		return nil, fmt.Errorf("compare: runs = %d, want >= 1", o.Runs)
	}
	if o.Seed == 0 {
		return nil, fmt.Errorf("compare: seed must not be 0 (both engines must see the same keys)")
	}
	if len(o.Scenarios) == 0 {
		return nil, fmt.Errorf("compare: no scenarios")
	}
	rep := &Report{Scenarios: o.Scenarios, Runs: o.Runs}
	for _, c := range o.Contenders {
		rep.Engines = append(rep.Engines, c.Name)
	}
	defer func() { rep.ParentPeakKiB = selfHWMKiB() }()
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	for _, sc := range o.Scenarios {
		for i := 0; i < o.Runs; i++ {
			for pos, c := range RunOrder(o.Contenders, i) {
				if err := ctx.Err(); err != nil {
					return rep, err
				}
				results, info, err := engineRun(ctx, o, sc, c, i+1)
				if err != nil {
					if cerr := ctx.Err(); cerr != nil {
						return rep, cerr
					}
					return rep, fmt.Errorf("%s run %d, %s: %w", sc.Name, i+1, c.Name, err)
				}
				info.First = pos == 0
				rep.EngineRuns = append(rep.EngineRuns, info)
				for _, r := range results {
					rep.Samples = append(rep.Samples, Sample{
						Scenario: sc.Name, Engine: c.Name, Run: i + 1, First: pos == 0,
						OpsPerSec: r.OpsPerSec(), Result: r,
					})
				}
				rss := ""
				if info.MaxRSSKiB > 0 {
					rss = fmt.Sprintf("; peak RSS %.0f MiB", float64(info.MaxRSSKiB)/1024)
				}
				fmt.Fprintf(progress, "[%s %d/%d] %-6s %s%s\n", sc.Name, i+1, o.Runs, c.Name, summarize(results), rss)
			}
		}
	}
	return rep, nil
}

// engineRun runs one scenario once on one engine, in a fresh temporary
// directory it removes afterwards: in this process, or in a child process
// when o.ChildCommand is set.
func engineRun(ctx context.Context, o Options, sc Scenario, c Contender, run int) (results []bench.Result, info EngineRun, err error) {
	info = EngineRun{Scenario: sc.Name, Engine: c.Name, Run: run}
	dir, err := os.MkdirTemp(o.Dir, "vs-"+sc.Name+"-"+c.Name+"-")
	if err != nil {
		return nil, info, fmt.Errorf("temporary directory: %w", err)
	}
	defer func() {
		if rerr := vfs.Default.RemoveAll(dir); rerr != nil && err == nil {
			err = fmt.Errorf("removing %s: %w", dir, rerr)
		}
	}()
	start := time.Now()
	defer func() { info.Wall = time.Since(start) }()
	if len(o.ChildCommand) == 0 {
		// Collect the previous engine's garbage now, not during this run.
		runtime.GC()
		results, err = runEngine(o, sc, c, run, dir)
		return results, info, err
	}
	res, ru, err := spawn(ctx, o, Job{
		Scenario: sc, Engine: c.Name, Run: run, Dir: dir,
		EngineOptions: o.Engine, KeySize: o.KeySize, ValueSize: o.ValueSize,
		CompressionRatio: o.CompressionRatio, Seed: o.Seed,
		PebbleCacheCredit: o.PebbleCacheCredit, CPUProfile: o.CPUProfile,
		Verbose: o.Log != nil,
	})
	info.MaxRSSKiB = ru
	if res != nil {
		info.HWMKiB = res.HWMKiB
		results = res.Results
	}
	return results, info, err
}

// forScenario applies a scenario's overrides (write buffer, key and value
// sizes, compression) to the comparison's options.
func (o Options) forScenario(sc Scenario) Options {
	o.Engine.WriteBufferSize = sc.WriteBufferSize
	if sc.KeySize > 0 {
		o.KeySize = sc.KeySize
	}
	if sc.ValueSize > 0 {
		o.ValueSize = sc.ValueSize
	}
	if sc.Compression != "" {
		o.Engine.Compression = sc.Compression
	}
	return o
}

// summarize renders one engine run's results for the progress line: one
// figure per benchmark, the median of its repeats (warm-ups left out).
func summarize(results []bench.Result) string {
	var names []string
	vals := map[string][]float64{}
	for _, r := range results {
		if r.Warmup {
			continue
		}
		if _, ok := vals[r.Name]; !ok {
			names = append(names, r.Name)
		}
		x := r.OpsPerSec()
		if SetupBenchmarks[r.Name] {
			x = r.Elapsed.Seconds()
		}
		vals[r.Name] = append(vals[r.Name], x)
	}
	parts := make([]string, len(names))
	for i, n := range names {
		xs := vals[n]
		rep := ""
		if len(xs) > 1 {
			rep = fmt.Sprintf(" (x%d)", len(xs))
		}
		if SetupBenchmarks[n] {
			parts[i] = fmt.Sprintf("%s %.2fs%s", n, Median(xs), rep)
		} else {
			parts[i] = fmt.Sprintf("%s %.0f/s%s", n, Median(xs), rep)
		}
	}
	return strings.Join(parts, ", ")
}

// runEngine runs every step of one scenario run on one engine, with the
// database in dir/db (dir exists and is the caller's to remove).
func runEngine(o Options, sc Scenario, c Contender, run int, dir string) (results []bench.Result, err error) {
	if o.CPUProfile != "" {
		stop, err := startProfile(fmt.Sprintf("%s-%s-%s-run%d.pprof", o.CPUProfile, sc.Name, c.Name, run))
		if err != nil {
			return nil, err
		}
		defer func() {
			if perr := stop(); perr != nil && err == nil {
				err = perr
			}
		}()
	}
	o = o.forScenario(sc)
	eo := o.Engine
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	db := filepath.Join(dir, "db")
	noBar := false
	for _, st := range sc.Steps {
		if st.Benchmarks == BigBatchBenchmark {
			rs, err := runBigBatch(o, sc.Num, c, db)
			results = append(results, rs...)
			if err != nil {
				return results, err
			}
			continue
		}
		cfg := bench.Config{
			Benchmarks:       st.Benchmarks,
			Num:              sc.Num,
			Reads:            st.Reads,
			Writes:           -1,
			KeySize:          o.KeySize,
			ValueSize:        o.ValueSize,
			CompressionRatio: o.CompressionRatio,
			Seed:             o.Seed,
			Threads:          1,
			DB:               db,
			Engine:           eo,
			Open:             c.Open,
			EngineName:       c.Name,
			NumSet:           true,
			BlockSize:        eo.BlockSize,
			Progress:         &noBar,
			Stdout:           log,
			Stderr:           log,
		}
		r := bench.NewRunner(cfg)
		if err := r.Run(); err != nil {
			return results, err
		}
		results = append(results, r.Results()...)
	}
	return results, nil
}

// startProfile starts a CPU profile into path and returns its stop.
func startProfile(path string) (func() error, error) {
	f, err := vfs.Default.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		return nil
	}, nil
}

// Row is one line of the comparison table: a benchmark of a scenario with
// each engine's median over its runs.
type Row struct {
	Scenario  string
	Benchmark string
	// Setup marks the steps timed in seconds (SetupBenchmarks): Median
	// holds seconds, not ops/sec.
	Setup bool
	// Median per engine, in Report.Engines order: ops/sec (or seconds for
	// setup rows).
	Median []float64
	// Spread per engine: (max-min)/median over the samples, a noise gauge.
	Spread []float64
	// Samples per engine behind the median: runs times the benchmark's
	// repeats per run ([-Xn]), warm-ups left out.
	Samples []int
	// RSSKiB per engine: the median peak RSS of the scenario's engine
	// runs (one process each covers all its benchmarks), 0 if unknown.
	RSSKiB []float64
}

// Ratio is the first engine's median over the second's (for setup rows,
// the second's time over the first's, so > 1 still means the first is
// faster); 0 when undefined.
func (r Row) Ratio() float64 {
	if len(r.Median) < 2 {
		return 0
	}
	a, b := r.Median[0], r.Median[1]
	if r.Setup {
		a, b = b, a
	}
	if b <= 0 {
		return 0
	}
	return a / b
}

// RSSRatio is the first engine's median peak RSS over the second's (< 1:
// the first used less memory); 0 when unknown.
func (r Row) RSSRatio() float64 {
	if len(r.RSSKiB) < 2 || r.RSSKiB[0] <= 0 || r.RSSKiB[1] <= 0 {
		return 0
	}
	return r.RSSKiB[0] / r.RSSKiB[1]
}

// RSS returns each engine's median peak RSS (KiB, in Engines order) over
// the engine runs of a scenario that report one; 0 for an engine without.
func (rep *Report) RSS(scenario string) []float64 {
	out := make([]float64, len(rep.Engines))
	for e, name := range rep.Engines {
		var xs []float64
		for _, r := range rep.EngineRuns {
			if r.Scenario == scenario && r.Engine == name && r.MaxRSSKiB > 0 {
				xs = append(xs, float64(r.MaxRSSKiB))
			}
		}
		out[e] = Median(xs)
	}
	return out
}

// HasRSS says whether any engine run reported a peak RSS.
func (rep *Report) HasRSS() bool {
	return slices.ContainsFunc(rep.EngineRuns, func(r EngineRun) bool { return r.MaxRSSKiB > 0 })
}

// Rows reduces the samples to one row per (scenario, benchmark), in the
// order the benchmarks ran: the median of every sample of each engine
// (all runs, all repeats within a run; warm-ups left out).
func (rep *Report) Rows() []Row {
	type key struct{ scenario, bench string }
	var order []key
	vals := map[key][][]float64{}
	for _, s := range rep.Samples {
		if s.Result.Warmup {
			continue
		}
		k := key{s.Scenario, s.Result.Name}
		v, ok := vals[k]
		if !ok {
			order = append(order, k)
			v = make([][]float64, len(rep.Engines))
			vals[k] = v
		}
		e := slices.Index(rep.Engines, s.Engine)
		if e < 0 {
			continue
		}
		x := s.OpsPerSec
		if SetupBenchmarks[s.Result.Name] {
			x = s.Result.Elapsed.Seconds()
		}
		v[e] = append(v[e], x)
	}
	rows := make([]Row, 0, len(order))
	for _, k := range order {
		v := vals[k]
		row := Row{Scenario: k.scenario, Benchmark: k.bench, Setup: SetupBenchmarks[k.bench], RSSKiB: rep.RSS(k.scenario)}
		for _, xs := range v {
			med := Median(xs)
			spread := 0.0
			if len(xs) > 1 && med > 0 {
				spread = (slices.Max(xs) - slices.Min(xs)) / med
			}
			row.Median = append(row.Median, med)
			row.Spread = append(row.Spread, spread)
			row.Samples = append(row.Samples, len(xs))
		}
		rows = append(rows, row)
	}
	return rows
}

// Median returns the median of xs (the mean of the middle two for an even
// count); 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Target is the project's goal for a benchmark's ratio (first engine over
// the second).
type Target struct {
	Scenario, Benchmark string
	MinRatio            float64
}

// Targets are the goals for Vigil over Pebble: issue 8's (at least match
// Pebble on memtable workloads, stay within 0.8× on disk), and the later
// ones for writes: fillrandom ≥ 1.3× with snappy and without compression,
// and the big batch (apply + flush) ≥ 1.3×.
var Targets = []Target{
	{"memtable", "fillseq", 1.0},
	{"memtable", "readrandom", 1.0},
	{"memtable", "readseq", 1.0},
	{"memtable", "readreverse", 1.0},
	{"ondisk", "readrandom", 0.8},
	{"ondisk", "readseq", 0.8},
	{"ondisk", "readreverse", 0.8},
	{"fillrandom", "fillrandom", 1.3},
	{"fillrandom-nocompress", "fillrandom", 1.3},
	{"bigbatch", BigBatchBenchmark, 1.3},
}

// MaxRSSRatio is the goal for memory: Vigil's peak RSS at most Pebble's,
// in every scenario.
const MaxRSSRatio = 1.0

// TargetFor returns the ratio target of a row, if the project set one.
func TargetFor(scenario, benchmark string) (float64, bool) {
	for _, t := range Targets {
		if t.Scenario == scenario && t.Benchmark == benchmark {
			return t.MinRatio, true
		}
	}
	return 0, false
}

// mib renders KiB as MiB for the table.
func mib(kib float64) string {
	if kib <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", kib/1024)
}

// WriteTable renders the rows as an aligned text table: scenario,
// benchmark, each engine's median ops/sec, the ratio, the target, then,
// when the runs had processes of their own, each engine's median peak RSS
// and their ratio against MaxRSSRatio (on the first row of each scenario:
// one process covers all its benchmarks), and the number of samples and
// their spread; the steps timed in seconds follow in their own section.
func (rep *Report) WriteTable(w io.Writer) error {
	if len(rep.Engines) != 2 {
		return fmt.Errorf("table: need 2 engines, got %d", len(rep.Engines))
	}
	a, b := rep.Engines[0], rep.Engines[1]
	withRSS := rep.HasRSS()
	rows := rep.Rows()
	var main, setup [][]string
	rssShown := map[string]bool{}
	for _, r := range rows {
		ratio := "-"
		if x := r.Ratio(); x > 0 {
			ratio = fmt.Sprintf("%.2fx", x)
		}
		spread := "-"
		if r.Samples[0] > 1 || r.Samples[1] > 1 {
			spread = fmt.Sprintf("%.0f%% / %.0f%%", 100*r.Spread[0], 100*r.Spread[1])
		}
		n := fmt.Sprint(r.Samples[0])
		if r.Samples[1] != r.Samples[0] {
			n += "/" + fmt.Sprint(r.Samples[1])
		}
		if r.Setup {
			setup = append(setup, []string{r.Scenario, r.Benchmark,
				fmt.Sprintf("%.2f", r.Median[0]), fmt.Sprintf("%.2f", r.Median[1]), ratio, n, spread})
			continue
		}
		target := ""
		if t, ok := TargetFor(r.Scenario, r.Benchmark); ok {
			verdict := "met"
			if r.Ratio() < t {
				verdict = "MISSED"
			}
			target = fmt.Sprintf(">= %.1fx %s", t, verdict)
		}
		line := []string{r.Scenario, r.Benchmark,
			fmt.Sprintf("%.0f", r.Median[0]), fmt.Sprintf("%.0f", r.Median[1]), ratio, target}
		if withRSS {
			var ra, rb, rr string
			if !rssShown[r.Scenario] {
				rssShown[r.Scenario] = true
				ra, rb, rr = mib(r.RSSKiB[0]), mib(r.RSSKiB[1]), "-"
				if x := r.RSSRatio(); x > 0 {
					verdict := "met"
					if x > MaxRSSRatio {
						verdict = "MISSED"
					}
					rr = fmt.Sprintf("%.2fx %s", x, verdict)
				}
			}
			line = append(line, ra, rb, rr)
		}
		main = append(main, append(line, n, spread))
	}
	header := []string{"scenario", "benchmark", a + " ops/s", b + " ops/s", a + "/" + b, "target"}
	right := []bool{false, false, true, true, true, false}
	if withRSS {
		header = append(header, a+" RSS MiB", b+" RSS MiB", fmt.Sprintf("RSS %s/%s (<= %.1fx)", a, b, MaxRSSRatio))
		right = append(right, true, true, false)
	}
	header = append(header, "n", "spread "+a+"/"+b)
	right = append(right, true, true)
	if err := writeAligned(w, header, main, right); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "(ops/sec: median of n samples per engine = %d runs x repeats per run; spread = (max-min)/median)\n", rep.Runs); err != nil {
		return err
	}
	if withRSS {
		floor := ""
		if rep.ParentPeakKiB > 0 {
			floor = fmt.Sprintf("; none can read below the parent's own peak, %.0f MiB", float64(rep.ParentPeakKiB)/1024)
		}
		if _, err := fmt.Fprintf(w, "(RSS: peak resident set of the scenario's process, one per engine run, median of %d runs, from wait4's ru_maxrss%s)\n", rep.Runs, floor); err != nil {
			return err
		}
	}
	if len(setup) > 0 {
		if _, err := fmt.Fprintf(w, "\nSteps timed in seconds (median of %d runs; flush and compact are not part of any read figure; batch-apply + batch-flush make up bigbatch):\n", rep.Runs); err != nil {
			return err
		}
		header := []string{"scenario", "step", a + " s", b + " s", "speedup", "n", "spread " + a + "/" + b}
		if err := writeAligned(w, header, setup, []bool{false, false, true, true, true, true, true}); err != nil {
			return err
		}
	}
	return nil
}

// writeAligned prints header and rows with columns padded to their widest
// cell, right-aligned where right says so, two spaces apart.
func writeAligned(w io.Writer, header []string, rows [][]string, right []bool) error {
	width := make([]int, len(header))
	for _, r := range append([][]string{header}, rows...) {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	line := func(r []string) error {
		var b strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if i > 0 {
				b.WriteString("  ")
			}
			if right[i] {
				b.WriteString(pad + c)
			} else {
				b.WriteString(c + pad)
			}
		}
		_, err := fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
		return err
	}
	if err := line(header); err != nil {
		return err
	}
	for _, r := range rows {
		if err := line(r); err != nil {
			return err
		}
	}
	return nil
}

// WriteJSON writes the report (settings, every sample and engine run, and
// the table rows) as one indented JSON document.
func (rep *Report) WriteJSON(w io.Writer, machine Machine) error {
	type jsonRow struct {
		Scenario  string    `json:"scenario"`
		Benchmark string    `json:"benchmark"`
		Setup     bool      `json:"setup,omitempty"`
		Median    []float64 `json:"median"`
		Spread    []float64 `json:"spread"`
		Ratio     float64   `json:"ratio"`
		RSSKiB    []float64 `json:"rss_kib,omitempty"`
		RSSRatio  float64   `json:"rss_ratio,omitempty"`
	}
	doc := struct {
		Machine Machine   `json:"machine"`
		Report  *Report   `json:"report"`
		Rows    []jsonRow `json:"rows"`
	}{Machine: machine, Report: rep}
	for _, r := range rep.Rows() {
		jr := jsonRow{r.Scenario, r.Benchmark, r.Setup, r.Median, r.Spread, r.Ratio(), nil, r.RSSRatio()}
		if jr.RSSRatio > 0 {
			jr.RSSKiB = r.RSSKiB
		}
		doc.Rows = append(doc.Rows, jr)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
