package peers

import (
	"context"
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
	// KeyShape is the scenario's key shape (a bench.ParseKeyShape name).
	// Set in a scenario's definition, it overrides the comparison's
	// Options.KeyShapes (geth's keys are hashes whatever --keys says);
	// Compare sets it on the copy each run gets, so a Job carries the
	// shape to its child. "" = the comparison's shapes.
	KeyShape string `json:"key_shape,omitempty"`
	// Steps run in order on one directory, fresh for each run.
	Steps []Step `json:"steps"`
	// Histogram turns on kvbench's --histogram: every Result then carries
	// its Latency, and the progress lines show P99 and max. Off elsewhere,
	// since timing every operation costs a little.
	Histogram bool `json:"histogram,omitempty"`
	// Explicit keeps the scenario out of "all": it runs only when named.
	Explicit bool `json:"explicit,omitempty"`
}

// keyShapeName is the shape a scenario's KeyShape names: "" is
// db_bench's.
func keyShapeName(s string) string {
	if s == "" {
		return bench.KeyDBBench.String()
	}
	return s
}

// shapes returns the key shapes sc runs with under o: its own, or else
// each of o.KeyShapes (db_bench's when there are none).
func (sc Scenario) shapes(o Options) []string {
	switch {
	case sc.KeyShape != "":
		return []string{sc.KeyShape}
	case len(o.KeyShapes) == 0:
		return []string{keyShapeName("")}
	}
	return o.KeyShapes
}

// ParseKeyShapes reads a comma-separated list of key shape names
// (bench.KeyShapeNames; "all" = every one), in the order given, each once.
func ParseKeyShapes(list string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		names := []string{name}
		switch name {
		case "":
			continue
		case "all":
			names = bench.KeyShapeNames()
		}
		for _, n := range names {
			if _, err := bench.ParseKeyShape(n); err != nil {
				return nil, err
			}
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no key shape selected")
	}
	return out, nil
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
// one big batch followed by reads, and go-ethereum's pattern: single Puts
// of hashed keys in random order, then random reads.
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
		{
			Name:            "geth",
			About:           "go-ethereum's pattern: 1M single Puts of 33-byte hashed keys (whatever --keys says) in random order, 32-byte values, no compression, then readrandom of 1M",
			Num:             1_000_000,
			WriteBufferSize: 64 << 20,
			KeyShape:        bench.KeyHashed.String(),
			ValueSize:       32,
			Compression:     "none",
			// One thread, one Put per key (kvbench's --batch_size 1), the
			// WAL on without fsync (unless --disable_wal).
			Steps: []Step{{Benchmarks: "fillrandom,readrandom", Reads: -1}},
		},
	}
}

// ExtraScenarios returns the scenarios that run only when named (they take
// minutes): large, a DB ten times the cache, 10M random keys with 64 MiB
// write buffers (and the comparison's cache, 64 MiB by default), then
// readrandom and seekrandom x1M on the same directory, latencies recorded.
func ExtraScenarios() []Scenario {
	return []Scenario{
		{
			Name:            "large",
			About:           "a DB ten times the cache: fillrandom of 10M keys into 64 MiB buffers, then reopen, readrandom and seekrandom x1M; latency histograms on (only when named)",
			Num:             10_000_000,
			WriteBufferSize: 64 << 20,
			Histogram:       true,
			Explicit:        true,
			Steps: []Step{
				{Benchmarks: "fillrandom", Reads: -1},
				// Reopened on the same directory: the LSM the fill left.
				{Benchmarks: "readrandom,seekrandom", Reads: 1_000_000},
			},
		},
	}
}

// AllScenarios returns DefaultScenarios and then ExtraScenarios: every
// scenario a name can select.
func AllScenarios() []Scenario {
	return append(DefaultScenarios(), ExtraScenarios()...)
}

// SelectScenarios picks scenarios by name from all, in the order given;
// "" or "all" selects every one but the Explicit ones.
func SelectScenarios(all []Scenario, list string) ([]Scenario, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "all" {
		return slices.DeleteFunc(slices.Clone(all), func(s Scenario) bool { return s.Explicit }), nil
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
// first engine's ops/sec over the second's. Vigil gets the same credit when
// the options charge its memtables to its cache (see VigilCacheWithCredit).
func DefaultContenders(pebbleCacheCredit int) []Contender {
	return []Contender{
		{Name: "vigil", Open: func(o bench.EngineOptions) (bench.Engine, error) {
			return bench.OpenVigil(VigilCacheWithCredit(o, pebbleCacheCredit))
		}},
		{Name: "pebble", Open: func(o bench.EngineOptions) (bench.Engine, error) {
			return OpenPebbleWithCredit(o, pebbleCacheCredit)
		}},
	}
}

// VigilCacheWithCredit returns o with Vigil's cache capacity raised by
// credit write buffers when o charges Vigil's memtables to its block cache
// (CostWriteBufferToCache, a cache enabled): the capacity PebbleOptions
// gives Pebble, which always charges its memtables. Both engines then live
// within one memory limit of the same size, memtables and blocks together.
// Otherwise o is returned unchanged: Vigil's cache holds CacheSize bytes of
// blocks and its memtables come on top.
func VigilCacheWithCredit(o bench.EngineOptions, credit int) bench.EngineOptions {
	if o.CostWriteBufferToCache && o.CacheSize > 0 {
		o.CacheSize = creditedCache(o.CacheSize, credit, o.WriteBufferSize)
	}
	return o
}

// creditedCache is the capacity of a cache that memtables are charged to:
// cache bytes for blocks (negative: none) plus credit write buffers (see
// PebbleMemtableCacheCredit). One definition, so that both engines get the
// same number.
func creditedCache(cache int64, credit, writeBufferSize int) int64 {
	return max(cache, 0) + int64(max(credit, 0))*int64(writeBufferSize)
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
	KeySize int
	// KeyShapes are the key shapes (bench.ParseKeyShape names) every
	// scenario runs with, once each, unless it has its own; none =
	// db_bench's.
	KeyShapes        []string
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
	// Keys is the key shape of the scenario run.
	Keys   string `json:"keys"`
	Engine string `json:"engine"`
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
	// Keys is the key shape of the scenario run.
	Keys   string `json:"keys"`
	Engine string `json:"engine"`
	Run    int    `json:"run"`
	First  bool   `json:"first"`
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
	// KeyShapes are Options.KeyShapes: the scenarios without a key shape
	// of their own ran once with each.
	KeyShapes []string `json:"key_shapes"`
	Runs      int      `json:"runs"`
	Samples   []Sample `json:"samples"`
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

// Compare runs every scenario o.Runs times on each contender, once per key
// shape (Options.KeyShapes, or the scenario's own), alternating engines
// run by run (see RunOrder), each engine run on a fresh temporary
// directory that is removed afterwards, and in a child process of its own
// when o.ChildCommand is set. It stops between engine runs when ctx is
// done (and kills a running child), returning the samples so far with
// ctx's error.
func Compare(ctx context.Context, o Options) (*Report, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	rep := &Report{Scenarios: o.Scenarios, KeyShapes: o.KeyShapes, Runs: o.Runs}
	for _, c := range o.Contenders {
		rep.Engines = append(rep.Engines, c.Name)
	}
	defer func() { rep.ParentPeakKiB = selfHWMKiB() }()
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	for _, sc := range o.Scenarios {
		for _, shape := range sc.shapes(o) {
			run := sc
			run.KeyShape = shape
			if err := compareScenario(ctx, o, run, rep); err != nil {
				return rep, err
			}
		}
	}
	return rep, nil
}

// check reports what keeps Compare from running o.
func (o Options) check() error {
	if len(o.Contenders) != 2 {
		return fmt.Errorf("compare: need exactly 2 engines, got %d", len(o.Contenders))
	}
	if o.Runs < 1 {
		return fmt.Errorf("compare: runs = %d, want >= 1", o.Runs)
	}
	if o.Seed == 0 {
		return fmt.Errorf("compare: seed must not be 0 (both engines must see the same keys)")
	}
	if len(o.Scenarios) == 0 {
		return fmt.Errorf("compare: no scenarios")
	}
	for _, sc := range o.Scenarios {
		for _, shape := range sc.shapes(o) {
			if _, err := bench.ParseKeyShape(shape); err != nil {
				return fmt.Errorf("compare: scenario %s: %w", sc.Name, err)
			}
		}
	}
	return nil
}

// compareScenario runs scenario sc (its KeyShape set) o.Runs times on
// each contender and adds the samples and engine runs to rep.
func compareScenario(ctx context.Context, o Options, sc Scenario, rep *Report) error {
	for i := 0; i < o.Runs; i++ {
		for pos, c := range RunOrder(o.Contenders, i) {
			if err := ctx.Err(); err != nil {
				return err
			}
			results, info, err := engineRun(ctx, o, sc, c, i+1)
			if err != nil {
				if cerr := ctx.Err(); cerr != nil {
					return cerr
				}
				return fmt.Errorf("%s (%s keys) run %d, %s: %w", sc.Name, sc.KeyShape, i+1, c.Name, err)
			}
			info.First = pos == 0
			rep.EngineRuns = append(rep.EngineRuns, info)
			for _, r := range results {
				rep.Samples = append(rep.Samples, Sample{
					Scenario: sc.Name, Keys: sc.KeyShape, Engine: c.Name, Run: i + 1, First: pos == 0,
					OpsPerSec: r.OpsPerSec(), Result: r,
				})
			}
			rss := ""
			if info.MaxRSSKiB > 0 {
				rss = fmt.Sprintf("; peak RSS %.0f MiB", float64(info.MaxRSSKiB)/1024)
			}
			fmt.Fprintf(o.Progress, "[%s %s %d/%d] %-6s %s%s\n", sc.Name, sc.KeyShape, i+1, o.Runs, c.Name, summarize(results), rss)
		}
	}
	return nil
}

// engineRun runs one scenario once on one engine, in a fresh temporary
// directory it removes afterwards: in this process, or in a child process
// when o.ChildCommand is set.
func engineRun(ctx context.Context, o Options, sc Scenario, c Contender, run int) (results []bench.Result, info EngineRun, err error) {
	info = EngineRun{Scenario: sc.Name, Keys: keyShapeName(sc.KeyShape), Engine: c.Name, Run: run}
	dir, err := os.MkdirTemp(o.Dir, "vs-"+sc.Name+"-"+keyShapeName(sc.KeyShape)+"-"+c.Name+"-")
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
	lat := map[string]*bench.Percentiles{} // the first repeat's, with --histogram
	for _, r := range results {
		if r.Warmup {
			continue
		}
		if _, ok := vals[r.Name]; !ok {
			names = append(names, r.Name)
			lat[r.Name] = r.Latency
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
		if l := lat[n]; l != nil && l.Count > 0 {
			parts[i] += fmt.Sprintf(" (P99 %.1f us, max %.0f us)", l.P99, l.Max)
		}
	}
	return strings.Join(parts, ", ")
}

// runEngine runs every step of one scenario run on one engine, with the
// database in dir/db (dir exists and is the caller's to remove).
func runEngine(o Options, sc Scenario, c Contender, run int, dir string) (results []bench.Result, err error) {
	if o.CPUProfile != "" {
		stop, err := startProfile(profilePath(o.CPUProfile, sc, c.Name, run))
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
	shape, err := bench.ParseKeyShape(keyShapeName(sc.KeyShape))
	if err != nil {
		return nil, err
	}
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	db := filepath.Join(dir, "db")
	noBar := false
	for _, st := range sc.Steps {
		if st.Benchmarks == BigBatchBenchmark {
			rs, err := runBigBatch(o, sc.Num, shape, c, db)
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
			KeyShape:         shape,
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
			Histogram:        sc.Histogram,
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

// profilePath is the CPU profile of one engine run:
// PREFIX-<scenario>-<engine>-run<i>.pprof, with -<shape> after the
// scenario for keys other than db_bench's.
func profilePath(prefix string, sc Scenario, engine string, run int) string {
	name := sc.Name
	if shape := keyShapeName(sc.KeyShape); shape != bench.KeyDBBench.String() {
		name += "-" + shape
	}
	return fmt.Sprintf("%s-%s-%s-run%d.pprof", prefix, name, engine, run)
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
