package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"
)

// Config holds kvbench's settings; the field comments give the db_bench flag
// each one mirrors.
type Config struct {
	Benchmarks string        // --benchmarks
	Num        int64         // --num: number of keys
	Reads      int64         // --reads: -1 = Num
	Writes     int64         // --writes: -1 = Num
	Duration   time.Duration // --duration: 0 = run by op count
	BlockSize  int           // --block_size: also the input size of checksum benchmarks
	Histogram  bool          // --histogram
	JSONPath   string        // --json FILE

	// NumSet reports whether --num was given, for the checksum benchmarks,
	// whose op count otherwise comes from the ~5 GB default.
	NumSet bool

	Stdout io.Writer
	Stderr io.Writer
}

// Runner runs a list of benchmarks and prints db_bench-style output.
type Runner struct {
	cfg     Config
	results []Result
}

// NewRunner returns a runner for cfg.
func NewRunner(cfg Config) *Runner {
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	return &Runner{cfg: cfg}
}

// Results returns every run so far, warm-ups included.
func (r *Runner) Results() []Result { return r.results }

// runOnce is how a benchmark's single run is produced.
type runOnce func() (Result, error)

// repeat runs spec.Warmups warm-ups and spec.Repeats measured runs of fn,
// printing each line, the running "[AVG n runs]" line after each repeat from
// the second on, and the final AVG and MEDIAN lines, as db_bench does.
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
		runs = append(runs, res)
		if len(runs) >= 2 {
			fmt.Fprintln(out, combinedLine(spec.Name, runs, false))
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
	if r.cfg.Histogram && res.Latency != nil {
		fmt.Fprint(r.cfg.Stdout, res.Latency.String())
	}
	r.results = append(r.results, res)
}

// meanCI returns the mean and the half-width of its 95 % confidence interval.
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
	return mean, 1.96 * sd / math.Sqrt(float64(len(xs)))
}

// combinedLine renders db_bench's CombinedStats lines: the running average
// after each repeat, and the final one with ms/op.
func combinedLine(name string, runs []Result, final bool) string {
	ops := make([]float64, len(runs))
	mbs := make([]float64, len(runs))
	for i, r := range runs {
		ops[i] = r.OpsPerSec()
		mbs[i] = r.MBPerSec()
	}
	om, oc := meanCI(ops)
	mm, mc := meanCI(mbs)
	if final {
		msPerOp := 0.0
		if om > 0 {
			msPerOp = 1e3 / om
		}
		return fmt.Sprintf("%s [AVG    %d runs] : %d (\u00b1 %d) ops/sec; %.3f ms/op; %6.1f (\u00b1 %.1f) MB/sec",
			name, len(runs), int64(om), int64(oc), msPerOp, mm, mc)
	}
	return fmt.Sprintf("%s [AVG %d runs] : %d (\u00b1 %d) ops/sec; %6.1f (\u00b1 %.1f) MB/sec",
		name, len(runs), int64(om), int64(oc), mm, mc)
}

func medianLine(name string, runs []Result) string {
	ops := make([]float64, len(runs))
	mbs := make([]float64, len(runs))
	for i, r := range runs {
		ops[i] = r.OpsPerSec()
		mbs[i] = r.MBPerSec()
	}
	return fmt.Sprintf("%s [MEDIAN %d runs] : %d ops/sec; %6.1f MB/sec", name, len(runs), int64(median(ops)), median(mbs))
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
func (r *Runner) runChecksum(name string) (Result, error) {
	var ops int64
	if r.cfg.NumSet {
		ops = r.cfg.Num
	}
	return RunChecksum(name, r.cfg.BlockSize, ops, r.cfg.Duration, DefaultChecksumBytes)
}

// Run runs every benchmark in cfg.Benchmarks in order.
func (r *Runner) Run() error {
	specs, err := ParseSpecs(r.cfg.Benchmarks)
	if err != nil {
		return err
	}
	if len(specs) == 0 {
		return fmt.Errorf("kvbench: --benchmarks is empty")
	}
	for _, s := range specs {
		if _, ok := ChecksumBenchmarks[s.Name]; !ok {
			return fmt.Errorf("kvbench: unknown benchmark %q", s.Name)
		}
	}
	for _, s := range specs {
		name := s.Name
		if err := r.repeat(s, func() (Result, error) { return r.runChecksum(name) }); err != nil {
			return err
		}
	}
	if r.cfg.JSONPath != "" {
		return r.WriteJSON(r.cfg.JSONPath)
	}
	return nil
}
