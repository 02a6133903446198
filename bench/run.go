package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	"github.com/vigildb/vigil"
)

// DefaultSuite is what `vigil kvbench` runs with no flags at all: a short
// tour of the db_bench workloads plus the checksum micro-benchmarks, on
// DefaultSuiteNum keys.
const (
	DefaultSuite    = "fillseq,fillrandom,overwrite,readrandom,readseq,readreverse,seekrandom,crc32c,xxhash,xxhash64,xxh3,crc64"
	DefaultSuiteNum = 200000
)

// Config holds kvbench's settings; the field comments give the db_bench flag
// each one mirrors. For the fields that are counts, -1 means db_bench's
// default (--num); a zero Config runs nothing useful: build one with
// CLI.Config or set at least Benchmarks, Num, Reads and Writes.
type Config struct {
	Benchmarks string // --benchmarks
	Num        int64  // --num: number of keys
	Reads      int64  // --reads: -1 = Num
	Writes     int64  // --writes: -1 = Num
	Deletes    int64  // --deletes: -1 = Num; used when DeletesSet
	// DeletesSet says Deletes is given; without it deletes count as writes
	// (Writes), as kvbench did before it had --deletes.
	DeletesSet       bool
	Duration         time.Duration // --duration: 0 = run by op count
	KeySize          int           // --key_size (KeyDBBench's length; the other shapes have their own)
	KeyShape         KeyShape      // --key_shape (kvbench's own): the zero value is db_bench's keys
	ValueSize        int           // --value_size
	ValueSizeMax     int           // --value_size_max: 0 = db_bench's 102400
	CompressionRatio float64       // --compression_ratio
	Seed             uint64        // --seed: 0 = from the clock, printed
	Threads          int           // --threads
	BatchSize        int64         // --batch_size: 0 = 1
	ReadWritePercent int           // --readwritepercent (readrandomwriterandom)
	MergeReadPercent int           // --mergereadpercent: percent of readrandommergerandom's ops that merge (the CLI's default 70)
	MergeKeys        int64         // --merge_keys: keys of mergerandom and readrandommergerandom; <= 0 = Num
	SeekNexts        int           // --seek_nexts (seekrandom)
	ReverseIterator  bool          // --reverse_iterator (seekrandom)
	WriteRateLimit   int64         // --benchmark_write_rate_limit: bytes/s of all writer threads together
	ReadRateLimit    int64         // --benchmark_read_rate_limit: reads (and seeks)/s of all threads together
	// KeysPerPrefix is --keys_per_prefix: with Engine.PrefixSize, about
	// this many keys share each prefix (KeyGen.SetPrefixes; KeyDBBench
	// only); <= 0: keys as without it.
	KeysPerPrefix int64
	// The read options of db_bench's iterators under a prefix extractor
	// (Engine.PrefixSize; see seekMode): --total_order_seek,
	// --prefix_same_as_start, --auto_prefix_mode, and
	// --seek_missing_prefix (seekrandom seeks keys whose byte 8 is '1', a
	// prefix no key has; KeyDBBench with PrefixSize > 8 only).
	TotalOrderSeek    bool
	PrefixSameAsStart bool
	AutoPrefixMode    bool
	SeekMissingPrefix bool
	// OpsBetweenDurationChecks is --ops_between_duration_checks: 0 = 1000.
	OpsBetweenDurationChecks int64
	Sync                     bool   // --sync
	Histogram                bool   // --histogram
	Statistics               bool   // --statistics
	ConfidenceIntervalOnly   bool   // --confidence_interval_only
	Stats                    bool   // --stats: print engine metrics after each benchmark
	JSONPath                 string // --json FILE
	DB                       string // --db: "" = a temporary directory, removed at the end
	UseExistingDB            bool   // --use_existing_db: keep the DB's contents
	// SkipFillsOnExistingDB makes UseExistingDB skip the fill benchmarks
	// (fillseq, fillrandom, ...), as db_bench does; without it they write
	// into the existing DB. The command line sets it.
	SkipFillsOnExistingDB bool

	// Engine settings (--write_buffer_size, --checksum_type, ...).
	Engine EngineOptions
	// Open opens the engine; nil = Vigil.
	Open Opener
	// EngineName is printed in the header.
	EngineName string

	// NumSet reports whether --num was given, for the checksum benchmarks,
	// whose op count otherwise comes from the ~5 GB default.
	NumSet bool
	// BlockSize (--block_size) is also the input size of the checksum
	// benchmarks.
	BlockSize int
	// Progress forces the progress bar on or off; nil = on when stderr is a
	// terminal.
	Progress *bool

	Stdout io.Writer
	Stderr io.Writer
}

// Runner runs a list of benchmarks and prints db_bench-style output.
type Runner struct {
	cfg       Config
	results   []Result
	engine    Engine
	dir       string
	tempDir   bool
	seed      uint64
	threadSeq uint64
	// stats are the --statistics API counters of every run so far;
	// engineTickers the engine counters of engines already closed.
	stats         *opStats
	engineTickers map[string]int64
}

// NewRunner returns a runner for cfg.
func NewRunner(cfg Config) *Runner {
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Open == nil {
		cfg.Open = OpenVigil
		if cfg.EngineName == "" {
			cfg.EngineName = "vigil"
		}
	}
	if cfg.Threads <= 0 {
		cfg.Threads = 1
	}
	if cfg.KeySize <= 0 {
		cfg.KeySize = 16
	}
	if cfg.ValueSize < 0 {
		cfg.ValueSize = 100
	}
	if cfg.CompressionRatio <= 0 {
		cfg.CompressionRatio = 0.5
	}
	if cfg.OpsBetweenDurationChecks <= 0 {
		cfg.OpsBetweenDurationChecks = 1000
	}
	r := &Runner{cfg: cfg, engineTickers: map[string]int64{}}
	if cfg.Statistics {
		r.stats = newOpStats()
	}
	return r
}

// Results returns every run so far, warm-ups included.
func (r *Runner) Results() []Result { return r.results }

// runOnce is how a benchmark's single run is produced.
type runOnce func() (Result, error)

// repeat runs spec.Warmups warm-ups and spec.Repeats measured runs of fn,
// printing each line, the running "[AVG n runs]" (or, with
// --confidence_interval_only, "[CI95 n runs]") line after each repeat from
// the second on, and the final AVG and MEDIAN lines, as db_bench 7.8 does.
func (r *Runner) repeat(spec Spec, fn runOnce) error {
	out := r.cfg.Stdout
	if spec.Warmups > 0 {
		fmt.Fprintf(out, "Warming up benchmark by running %d times\n", spec.Warmups)
	}
	for i := 0; i < spec.Warmups; i++ {
		res, err := fn()
		if err != nil {
			return err
		}
		res.Warmup = true
		r.emit(res)
	}
	if spec.Repeats > 1 {
		fmt.Fprintf(out, "Running benchmark for %d times\n", spec.Repeats)
	}
	var runs []Result
	for i := 0; i < spec.Repeats; i++ {
		res, err := fn()
		if err != nil {
			return err
		}
		if spec.Repeats > 1 {
			res.Run = i + 1
		}
		r.emit(res)
		if res.Skipped {
			continue
		}
		runs = append(runs, res)
		if len(runs) >= 2 {
			if r.cfg.ConfidenceIntervalOnly {
				fmt.Fprintln(out, ciLine(spec.Name, runs))
			} else {
				fmt.Fprintln(out, combinedLine(spec.Name, runs, false))
			}
		}
	}
	if len(runs) >= 2 {
		fmt.Fprintln(out, combinedLine(spec.Name, runs, true))
		fmt.Fprintln(out, medianLine(spec.Name, runs))
	}
	return nil
}

func (r *Runner) emit(res Result) {
	fmt.Fprintln(r.cfg.Stdout, res.Line())
	if res.BlankAfter {
		fmt.Fprintln(r.cfg.Stdout)
	}
	if r.cfg.Histogram {
		for _, h := range res.Histograms {
			fmt.Fprint(r.cfg.Stdout, h.Hist.Report(h.Op))
		}
	}
	r.results = append(r.results, res)
}

// meanCI returns the mean and the half-width of its 95 % confidence
// interval (normal approximation, Bessel-corrected standard deviation), as
// db_bench computes them.
func meanCI(xs []float64) (mean, ci float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	sd := math.Sqrt(ss / float64(len(xs)-1))
	return mean, 1.959964 * sd / math.Sqrt(float64(len(xs)))
}

// throughputs returns each run's ops/sec and, if every run moved bytes,
// each run's MB/s (else nil): db_bench prints MB/sec only then.
func throughputs(runs []Result) (ops, mbs []float64) {
	for _, r := range runs {
		ops = append(ops, float64(max(r.Ops, 1))/r.Elapsed.Seconds())
		if r.Bytes > 0 {
			mbs = append(mbs, r.MBPerSec())
		}
	}
	if len(mbs) != len(ops) {
		mbs = nil
	}
	return ops, mbs
}

// combinedLine renders db_bench 7.8's CombinedStats lines: the running
// average after each repeat, and the final one (aligned with MEDIAN).
func combinedLine(name string, runs []Result, final bool) string {
	ops, mbs := throughputs(runs)
	om, oc := meanCI(ops)
	label := "AVG"
	if final {
		label = "AVG   "
	}
	s := fmt.Sprintf("%s [%s %d runs] : %d (\u00b1 %d) ops/sec", name, label, len(runs), int64(om), int64(oc))
	if mbs != nil {
		mm, mc := meanCI(mbs)
		s += fmt.Sprintf("; %6.1f (\u00b1 %.1f) MB/sec", mm, mc)
	}
	return s
}

// ciLine renders db_bench's --confidence_interval_only line.
func ciLine(name string, runs []Result) string {
	ops, mbs := throughputs(runs)
	om, oc := meanCI(ops)
	s := fmt.Sprintf("%s [CI95 %d runs] : (%d, %d) ops/sec", name, len(runs), int64(om)-int64(oc), int64(om)+int64(oc))
	if mbs != nil {
		mm, mc := meanCI(mbs)
		s += fmt.Sprintf("; (%.1f, %.1f) MB/sec", mm-mc, mm+mc)
	}
	return s
}

func medianLine(name string, runs []Result) string {
	ops, mbs := throughputs(runs)
	s := fmt.Sprintf("%s [MEDIAN %d runs] : %d ops/sec", name, len(runs), int64(median(ops)))
	if mbs != nil {
		s += fmt.Sprintf("; %6.1f MB/sec", median(mbs))
	}
	return s
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// WriteJSON writes every result as one JSON object per line (JSON Lines),
// so a partial run still leaves a readable file.
func (r *Runner) WriteJSON(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("kvbench: --json: %w", err)
	}
	enc := json.NewEncoder(f)
	for _, res := range r.results {
		if err := enc.Encode(res); err != nil {
			f.Close()
			return fmt.Errorf("kvbench: --json: %w", err)
		}
	}
	return f.Close()
}

// runChecksum runs one checksum micro-benchmark under the config's limits.
// It uses up --threads thread seeds, as db_bench's run of it would.
func (r *Runner) runChecksum(name string) (Result, error) {
	r.threadSeq += uint64(max(r.cfg.Threads, 1))
	var ops int64
	if r.cfg.NumSet {
		ops = r.cfg.Num
	}
	return RunChecksum(name, r.cfg.BlockSize, ops, r.cfg.Duration, DefaultChecksumBytes)
}

// Run runs every benchmark in cfg.Benchmarks in order, then closes the
// engine and removes a temporary directory.
func (r *Runner) Run() (err error) {
	specs, err := ParseSpecs(r.cfg.Benchmarks)
	if err != nil {
		return err
	}
	if len(specs) == 0 {
		return fmt.Errorf("kvbench: --benchmarks is empty")
	}
	needDB := false
	for _, s := range specs {
		_, ck := ChecksumBenchmarks[s.Name]
		_, db := dbBenchmarks[s.Name]
		if !ck && !db && !utilityBenchmarks[s.Name] {
			if dbBenchHas(s.Name) {
				return fmt.Errorf("kvbench: benchmark %q is db_bench's, but kvbench does not have it (it has %s)", s.Name, joinNames(BenchmarkNames()))
			}
			return fmt.Errorf("kvbench: unknown benchmark %q", s.Name)
		}
		needDB = needDB || !ck
	}
	if err := r.checkMergeOperator(specs); err != nil {
		return err
	}
	r.seed = r.cfg.Seed
	if r.seed == 0 {
		r.seed = uint64(time.Now().UnixMicro())
		if needDB {
			fmt.Fprintf(r.cfg.Stdout, "Set seed to %d because --seed was 0\n", r.seed)
		}
	}
	if needDB {
		if err := r.setupDir(); err != nil {
			return err
		}
		defer func() {
			if cerr := r.closeEngine(); err == nil {
				err = cerr
			}
			if r.tempDir {
				os.RemoveAll(r.dir)
			}
		}()
		r.printHeader()
	}
	for _, s := range specs {
		s := s
		var fn runOnce
		switch {
		case ChecksumBenchmarks[s.Name] != nil:
			fn = func() (Result, error) { return r.runChecksum(s.Name) }
		case utilityBenchmarks[s.Name]:
			fn = func() (Result, error) { return r.runUtility(s.Name) }
		default:
			fn = func() (Result, error) { return r.runDB(s.Name) }
		}
		if err := r.repeat(s, fn); err != nil {
			return err
		}
		if r.cfg.Stats && r.engine != nil {
			fmt.Fprintf(r.cfg.Stdout, "\n%s\n", r.engine.Metrics())
		}
	}
	if r.cfg.Statistics {
		writeStatistics(r.cfg.Stdout, r.stats, r.allEngineTickers())
	}
	if r.cfg.JSONPath != "" {
		return r.WriteJSON(r.cfg.JSONPath)
	}
	return nil
}

// dbBenchHas reports whether db_bench 7.8.3 has a benchmark of that name
// (its --benchmarks default lists them).
func dbBenchHas(name string) bool {
	for _, f := range dbBenchFlags {
		if f.name == "benchmarks" {
			return slices.Contains(splitComma(f.def), name)
		}
	}
	return false
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

func joinNames(names []string) string {
	s := ""
	for i, n := range names {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}

// allEngineTickers sums the counters of closed engines and the open one.
func (r *Runner) allEngineTickers() map[string]int64 {
	out := map[string]int64{}
	for k, v := range r.engineTickers {
		out[k] = v
	}
	if te, ok := r.engine.(TickerEngine); ok {
		for k, v := range te.Tickers() {
			out[k] += v
		}
	}
	return out
}

// setupDir picks the DB directory: --db, or a new temporary one.
func (r *Runner) setupDir() error {
	if r.cfg.DB != "" {
		r.dir = r.cfg.DB
		return nil
	}
	dir, err := os.MkdirTemp("", "kvbench-")
	if err != nil {
		return fmt.Errorf("kvbench: temporary directory: %w", err)
	}
	r.dir, r.tempDir = dir, true
	return nil
}

// openEngine opens the engine, first wiping the directory when fresh.
func (r *Runner) openEngine(fresh bool) error {
	if r.engine != nil && !fresh {
		return nil
	}
	if err := r.closeEngine(); err != nil {
		return err
	}
	o := r.cfg.Engine
	o.Dir = r.dir
	o.Fresh = fresh
	if fresh {
		if err := os.RemoveAll(r.dir); err != nil {
			return fmt.Errorf("kvbench: removing %s: %w", r.dir, err)
		}
	}
	e, err := r.cfg.Open(o)
	if err != nil {
		return fmt.Errorf("kvbench: opening %s: %w", r.dir, err)
	}
	r.engine = e
	return nil
}

func (r *Runner) closeEngine() error {
	if r.engine == nil {
		return nil
	}
	if te, ok := r.engine.(TickerEngine); ok && r.cfg.Statistics {
		for k, v := range te.Tickers() {
			r.engineTickers[k] += v
		}
	}
	err := r.engine.Close()
	r.engine = nil
	return err
}

func (r *Runner) runDB(name string) (Result, error) {
	b := dbBenchmarks[name]
	if b.fresh && r.cfg.UseExistingDB && r.cfg.SkipFillsOnExistingDB {
		return Result{Name: name, Skipped: true}, nil
	}
	if err := r.openEngine(b.fresh && !r.cfg.UseExistingDB); err != nil {
		return Result{}, err
	}
	fmt.Fprintf(r.cfg.Stdout, "DB path: [%s]\n", r.dir)
	if note := r.mergeNote(name); note != "" {
		fmt.Fprintln(r.cfg.Stdout, note)
	}
	return r.runThreads(name, r.engine, b)
}

// runUtility runs flush, compact or stats once. flush and compact use up
// --threads thread seeds, as their db_bench runs do.
func (r *Runner) runUtility(name string) (Result, error) {
	if err := r.openEngine(false); err != nil {
		return Result{}, err
	}
	start := time.Now()
	var err error
	switch name {
	case "flush":
		r.threadSeq += uint64(r.cfg.Threads)
		fmt.Fprintf(r.cfg.Stdout, "DB path: [%s]\n", r.dir)
		err = r.engine.Flush()
	case "compact", "compactall":
		r.threadSeq += uint64(r.cfg.Threads)
		fmt.Fprintf(r.cfg.Stdout, "DB path: [%s]\n", r.dir)
		err = r.engine.Compact()
	case "stats", "levelstats":
		fmt.Fprintf(r.cfg.Stdout, "%s\n", r.engine.Metrics())
	}
	d := time.Since(start)
	return Result{Name: name, Ops: 1, Elapsed: d, Busy: d}, err
}

// printHeader prints db_bench's preamble.
func (r *Runner) printHeader() {
	c := &r.cfg
	w := c.Stdout
	keyLen := c.KeyShape.nominalLen(c.KeySize)
	raw := float64(int64(keyLen+c.ValueSize)*c.Num) / 1048576
	file := float64(int64(keyLen)*c.Num+int64(float64(c.ValueSize)*c.CompressionRatio)*c.Num) / 1048576
	fmt.Fprintf(w, "Engine:     %s\n", c.EngineName)
	fmt.Fprintf(w, "Keys:       %s (+ 0 bytes user-defined timestamp)\n", keysHeader(c.KeyShape, c.KeySize))
	fmt.Fprintf(w, "Values:     %d bytes each (%d bytes after compression)\n", c.ValueSize, int(float64(c.ValueSize)*c.CompressionRatio+0.5))
	fmt.Fprintf(w, "Entries:    %d\n", c.Num)
	fmt.Fprintf(w, "Prefix:    %d bytes\n", c.Engine.PrefixSize)
	fmt.Fprintf(w, "Keys per prefix:    %d\n", c.KeysPerPrefix)
	fmt.Fprintf(w, "RawSize:    %.1f MB (estimated)\n", raw)
	fmt.Fprintf(w, "FileSize:   %.1f MB (estimated)\n", file)
	fmt.Fprintf(w, "Compression: %s\n", c.Engine.Compression)
	fmt.Fprintf(w, "Checksum:   %d\n", c.Engine.ChecksumType)
	fmt.Fprintf(w, "Memtablerep: skip_list; memtable filter: %s\n", memtableFilterHeader(c.Engine))
	fmt.Fprintf(w, "Paranoid memory checks: %v; memtable protection bytes per key: %d; write batch protection bytes per key: %d; verify checksums on read: %v\n",
		c.Engine.ParanoidMemoryChecks, c.Engine.MemtableProtectionBytesPerKey, c.Engine.BatchProtectionBytesPerKey, !c.Engine.SkipReadChecksums)
	fmt.Fprintf(w, "Write buffer size: %d; block size: %d; cache: %d; bloom bits: %d; sync: %v; WAL disabled: %v; threads: %d; batch size: %d\n",
		c.Engine.WriteBufferSize, c.Engine.BlockSize, c.Engine.CacheSize, c.Engine.BloomBits, c.Sync, c.Engine.DisableWAL, c.Threads, max(c.BatchSize, 1))
	fmt.Fprintf(w, "------------------------------------------------\n")
}

// memtableFilterHeader describes the memtable filter for the header: off
// with paranoid checks (see vigil.Options.MemtableFilterRatio) or a ratio
// <= 0, else its bytes per byte of write buffer.
func memtableFilterHeader(o EngineOptions) string {
	r := o.MemtableFilterRatio
	switch {
	case o.ParanoidMemoryChecks:
		return "off (paranoid memory checks)"
	case r < 0:
		return "off"
	case r == 0:
		r = vigil.DefaultMemtableFilterRatio
	}
	return fmt.Sprintf("%g of the write buffer", r)
}

// keysHeader describes the keys for the header's Keys line: db_bench's
// words for its own keys, the shape's name and length for the others.
func keysHeader(shape KeyShape, keySize int) string {
	lo, hi := shape.KeyLen(keySize)
	switch {
	case shape == KeyDBBench:
		return fmt.Sprintf("%d bytes each", keySize)
	case shape == KeyVarlen:
		return fmt.Sprintf("%d to %d bytes each, shape %s", lo, hi, shape)
	}
	return fmt.Sprintf("%d bytes each, shape %s", lo, shape)
}
