// Command vs runs the same kvbench workloads on Vigil and Pebble, through
// the same bench.Runner code, alternating the engines run by run, and
// prints a table of median ops/sec, the Vigil/Pebble ratio, and each
// engine's median peak RSS.
//
//	cd bench/peers && go run ./cmd/vs                      # full: --runs 3, every scenario
//	go -C bench/peers run ./cmd/vs --num-scale 0.1 --runs 1  # quick check, from the repo root
//	go -C bench/peers run ./cmd/vs --scenarios large         # a DB ten times the cache (only when named)
//
// Scenarios (--scenarios, default all): memtable (250k keys in a 256 MiB
// write buffer: fillseq, readrandom x500k, readseq and readreverse each
// repeated 10 times since one memtable scan is too short to time), ondisk
// (2M keys, 64 MiB buffers: fillseq, flush, compact, then readrandom x1M,
// readseq, readreverse), fillrandom (1M keys, 64 MiB buffers),
// fillrandom-nocompress (the same without compression) and bigbatch (one
// batch of 1M 32-byte keys and 32-byte values, applied and flushed, then
// readrandom x1M and readseq) and geth (go-ethereum's pattern: 1M single
// Puts of 33-byte hashed keys in random order, 32-byte values, no
// compression, then readrandom x1M). Not in all, only when named: large
// (a DB ten times the cache: fillrandom of 10M keys into 64 MiB buffers,
// then reopen, readrandom and seekrandom x1M, with latency histograms: the
// progress lines show each benchmark's P99 and max; it takes minutes).
// --keys picks the key shapes (bench.KeyShapeNames, "all" = every one;
// default dbbench): each scenario runs once per shape, except geth, whose
// keys are always hashed; the table's keys column says which.
// --num-scale F multiplies key and read counts, write buffers and the
// block cache by F, keeping their ratios. Progress goes to stderr, the
// header and table to stdout.
//
// Every (scenario, engine, run) runs in a child process of its own: vs
// starts itself again with the hidden argument -vs-child and the job as
// JSON on stdin, and reads the child's peak RSS from the rusage wait4
// returns. --isolate=false runs everything in this process instead (no
// RSS figures).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/bench"
	"github.com/vigildb/vigil/bench/peers"
	"github.com/vigildb/vigil/checksum"
)

func main() {
	if peers.IsChild(os.Args) {
		os.Exit(peers.ChildMain(os.Stdin, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	go func() {
		// After the first interrupt, a second one kills at once.
		<-ctx.Done()
		stop()
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a bad command line (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// config is the parsed command line.
type config struct {
	opts       peers.Options
	numScale   float64
	jsonPath   string
	credit     int
	scenarioCS string
	keysCS     string
	isolate    bool
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("vs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	var ef engineFlags
	verbose := c.register(fs)
	ef.register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usageError{fmt.Sprintf("unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	}
	problems := c.problems()
	ct, eproblems := ef.check()
	problems = append(problems, eproblems...)
	scenarios, err := peers.SelectScenarios(peers.AllScenarios(), c.scenarioCS)
	if err != nil {
		problems = append(problems, fmt.Sprintf("--scenarios: %v", err))
	}
	if c.opts.KeyShapes, err = peers.ParseKeyShapes(c.keysCS); err != nil {
		problems = append(problems, fmt.Sprintf("--keys: %v", err))
	}
	if len(problems) > 0 {
		return nil, usageError{strings.Join(problems, "; ")}
	}
	for i := range scenarios {
		scenarios[i] = scenarios[i].Scale(c.numScale)
	}
	c.opts.Scenarios = scenarios
	c.opts.Contenders = peers.DefaultContenders(c.credit)
	c.opts.PebbleCacheCredit = c.credit
	c.opts.Engine = ef.options(ct, c.numScale)
	// Validate the engine settings once, up front, with a representative
	// write buffer, rather than failing in the middle of the first run.
	probe := c.opts.Engine
	probe.WriteBufferSize = scenarios[0].WriteBufferSize
	if _, err := peers.Describe(probe, c.credit); err != nil {
		return nil, usageError{err.Error()}
	}
	c.opts.Progress = stderr
	if *verbose {
		c.opts.Log = stderr
	}
	return &c, nil
}

// register defines the flags of the comparison itself (what runs, how
// often, where) on fs; it returns --verbose's variable.
func (c *config) register(fs *flag.FlagSet) *bool {
	fs.IntVar(&c.opts.Runs, "runs", 3, "runs per scenario and engine; the table shows medians")
	fs.StringVar(&c.scenarioCS, "scenarios", "all", "comma-separated scenarios: memtable, ondisk, fillrandom, fillrandom-nocompress, bigbatch, geth, large (all = every one but large, which takes minutes and runs only when named)")
	fs.StringVar(&c.keysCS, "keys", "dbbench", "comma-separated key shapes, each scenario run once per shape (geth's keys are always hashed): "+
		strings.Join(bench.KeyShapeNames(), ", ")+" (or all)")
	fs.BoolVar(&c.isolate, "isolate", true, "run each (scenario, engine, run) in a child process of its own and report its peak RSS; false = all in this process, no RSS")
	fs.Float64Var(&c.numScale, "num-scale", 1, "multiply key/read counts, write buffers and cache size by this (e.g. 0.1 for a quick check)")
	fs.StringVar(&c.jsonPath, "json", "", "write the raw per-run results and the table as JSON to this file")
	fs.StringVar(&c.opts.CPUProfile, "cpuprofile", "", "path prefix: write a CPU profile per engine run, PREFIX-<scenario>-<engine>-run<i>.pprof")
	fs.Uint64Var(&c.opts.Seed, "seed", 301, "random seed for keys (same for both engines; must not be 0)")
	fs.StringVar(&c.opts.Dir, "dir", "", "parent directory of the temporary DB directories (default: the system's temp dir)")
	verbose := fs.Bool("verbose", false, "also print kvbench's db_bench-style lines (to stderr)")
	fs.IntVar(&c.opts.KeySize, "key_size", 16, "key size in bytes of the dbbench key shape (the other shapes fix their own)")
	fs.IntVar(&c.opts.ValueSize, "value_size", 100, "value size in bytes")
	fs.Float64Var(&c.opts.CompressionRatio, "compression_ratio", 0.5, "values compress to this fraction")
	fs.IntVar(&c.credit, "pebble_cache_credit", peers.PebbleMemtableCacheCredit,
		"write buffers added to the cache capacity of an engine that charges its memtables to its block cache: Pebble always, Vigil with --cost_write_buffer_to_cache (0 = exactly --cache_size)")
	return verbose
}

// problems lists what is wrong with the comparison's flags, in the user's
// terms.
func (c *config) problems() []string {
	var problems []string
	if c.opts.Runs < 1 {
		problems = append(problems, "--runs must be >= 1")
	}
	if c.numScale <= 0 || c.numScale > 100 {
		problems = append(problems, "--num-scale must be in (0, 100]")
	}
	if c.opts.Seed == 0 {
		problems = append(problems, "--seed must not be 0")
	}
	if c.credit < 0 {
		problems = append(problems, "--pebble_cache_credit must be >= 0")
	}
	if c.opts.KeySize < 8 {
		problems = append(problems, "--key_size must be at least 8")
	}
	if c.opts.ValueSize < 0 {
		problems = append(problems, "--value_size must be >= 0")
	}
	if c.opts.CompressionRatio <= 0 || c.opts.CompressionRatio > 1 {
		problems = append(problems, "--compression_ratio must be in (0, 1]")
	}
	return problems
}

// engineFlags are the flags of the engines' settings (both engines unless
// named Vigil's).
type engineFlags struct {
	checksumT, comp      string
	paranoid, disableWAL bool
	costMemtables        bool
	protection           int
	blockSize, bloomBits int
	cacheSize            int64
}

func (e *engineFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&e.blockSize, "block_size", 4096, "SST data block size (both engines)")
	fs.Int64Var(&e.cacheSize, "cache_size", 64<<20, "block cache bytes (both engines; 0 disables Vigil's, Pebble keeps only the memtable credit)")
	fs.IntVar(&e.bloomBits, "bloom_bits", 10, "bloom filter bits per key (both engines; 0 disables)")
	fs.StringVar(&e.comp, "compression_type", "snappy", "none or snappy (both engines)")
	fs.StringVar(&e.checksumT, "checksum_type", "4", "Vigil's checksum: 0/none, 1/crc32c, 2/xxhash, 3/xxhash64, 4/xxh3, 5/crc64 (Pebble always writes crc32c)")
	fs.BoolVar(&e.paranoid, "paranoid_memory_checks", false, "Vigil: memtable reads verify key order (Pebble has no equivalent)")
	fs.IntVar(&e.protection, "memtable_protection_bytes_per_key", 0, "Vigil: per-entry memtable checksum bytes, 0/1/2/4/8 (Pebble has no equivalent)")
	fs.BoolVar(&e.disableWAL, "disable_wal", false, "both engines write without a WAL")
	fs.BoolVar(&e.costMemtables, "cost_write_buffer_to_cache", false,
		"Vigil charges its memtables to its block cache as Pebble does, and gets Pebble's capacity (--cache_size plus the credit): one memory limit, the same for both; false = Vigil's cache holds --cache_size of blocks, its memtables on top")
}

// check normalises the compression name and parses the checksum type,
// listing what is wrong.
func (e *engineFlags) check() (checksum.Type, []string) {
	var problems []string
	e.comp = strings.ToLower(e.comp)
	if e.comp != "none" && e.comp != "snappy" {
		problems = append(problems, "--compression_type must be none or snappy")
	}
	ct, err := checksum.ParseType(e.checksumT)
	if err != nil {
		problems = append(problems, fmt.Sprintf("--checksum_type: %v", err))
	}
	return ct, problems
}

// options are the engines' options of the flags, the cache scaled by
// numScale.
func (e *engineFlags) options(ct checksum.Type, numScale float64) bench.EngineOptions {
	return bench.EngineOptions{
		ChecksumType:                  int(ct.Code()), // RocksDB's number
		ParanoidMemoryChecks:          e.paranoid,
		MemtableProtectionBytesPerKey: e.protection,
		BlockSize:                     e.blockSize,
		CacheSize:                     peers.ScaleBytes(e.cacheSize, numScale),
		BloomBits:                     e.bloomBits,
		Compression:                   e.comp,
		DisableWAL:                    e.disableWAL,
		CostWriteBufferToCache:        e.costMemtables,
	}
}

// run is main without the exit: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "vs: %v\n", err)
		return 2
	}
	if err != nil {
		return 2 // flag already printed the problem
	}
	if c.isolate {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "vs: cannot re-execute myself for the child processes (use --isolate=false): %v\n", err)
			return 1
		}
		c.opts.ChildCommand = []string{exe, peers.ChildArg}
	}
	machine := peers.ThisMachine()
	printHeader(stdout, c, machine)

	start := time.Now()
	rep, cerr := peers.Compare(ctx, c.opts)
	status := 0
	if cerr != nil {
		fmt.Fprintf(stderr, "vs: %v\n", cerr)
		status = 1
	}
	if rep != nil && len(rep.Samples) > 0 {
		fmt.Fprintln(stdout)
		if cerr != nil {
			fmt.Fprintln(stdout, "PARTIAL RESULTS (the comparison stopped early):")
		}
		if err := rep.WriteTable(stdout); err != nil {
			fmt.Fprintf(stderr, "vs: %v\n", err)
			status = 1
		}
		fmt.Fprintf(stdout, "\nWall time %v; load avg at end: %s\n", time.Since(start).Round(time.Second), peers.LoadAvg())
		if c.jsonPath != "" {
			if err := writeJSON(c.jsonPath, rep, machine); err != nil {
				fmt.Fprintf(stderr, "vs: %v\n", err)
				status = 1
			}
		}
	}
	return status
}

func printHeader(w io.Writer, c *config, m peers.Machine) {
	fmt.Fprintf(w, "vs: Vigil vs Pebble, same kvbench workloads, %d run(s) per engine, engines alternating (vigil first on odd runs)\n", c.opts.Runs)
	if c.isolate {
		fmt.Fprintln(w, "Process:  one child process per (scenario, engine, run); RSS = its peak (wait4 ru_maxrss)")
	} else {
		fmt.Fprintln(w, "Process:  every run in this one process (--isolate=false): no RSS figures")
	}
	fmt.Fprint(w, m.String())
	fmt.Fprintf(w, "Keys:     %s (dbbench: %d B), values %d B (compressible to %.2f), seed %d\n",
		strings.Join(c.opts.KeyShapes, ", "), c.opts.KeySize, c.opts.ValueSize, c.opts.CompressionRatio, c.opts.Seed)
	probe := c.opts.Engine
	probe.WriteBufferSize = c.opts.Scenarios[0].WriteBufferSize
	if d, err := peers.Describe(probe, c.credit); err == nil {
		fmt.Fprint(w, d)
	}
	if c.numScale != 1 {
		fmt.Fprintf(w, "SCALED:   --num-scale %g (counts, write buffers and cache; cache %d KiB) - not the reference figures\n",
			c.numScale, c.opts.Engine.CacheSize>>10)
	}
	for _, s := range c.opts.Scenarios {
		var steps []string
		for _, st := range s.Steps {
			reads := "all"
			if st.Reads >= 0 {
				reads = fmt.Sprint(st.Reads)
			}
			steps = append(steps, fmt.Sprintf("[%s reads=%s]", st.Benchmarks, reads))
		}
		var over []string
		if s.KeySize > 0 {
			over = append(over, fmt.Sprintf("key_size=%d", s.KeySize))
		}
		if s.ValueSize > 0 {
			over = append(over, fmt.Sprintf("value_size=%d", s.ValueSize))
		}
		if s.Compression != "" {
			over = append(over, "compression="+s.Compression)
		}
		if s.KeyShape != "" {
			over = append(over, "keys="+s.KeyShape)
		}
		if len(over) > 0 {
			over = append(over, "")
		}
		fmt.Fprintf(w, "Scenario %-21s num=%d write_buffer=%d KiB %s%s\n", s.Name, s.Num, s.WriteBufferSize>>10,
			strings.Join(over, " "), strings.Join(steps, " then reopen "))
	}
}

func writeJSON(path string, rep *peers.Report, m peers.Machine) error {
	f, err := vfs.Default.Create(path)
	if err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	if err := rep.WriteJSON(f, m); err != nil {
		f.Close()
		return fmt.Errorf("--json: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	return nil
}
