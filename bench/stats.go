package bench

import (
	"fmt"
	"time"
)

// Result is one run of one benchmark, the figures db_bench prints on its
// per-benchmark line and that --json writes.
type Result struct {
	Name string `json:"name"`
	// Ops is the number of operations done (db_bench's "operations").
	Ops int64 `json:"ops"`
	// Bytes processed, for the MB/s column; 0 omits it.
	Bytes int64 `json:"bytes"`
	// Elapsed is wall time; ops/sec uses it.
	Elapsed time.Duration `json:"elapsed_ns"`
	// Busy is the sum of per-thread busy time; micros/op uses it, as db_bench does.
	Busy time.Duration `json:"busy_ns"`
	// Message is db_bench's trailing note, e.g. "(250000 of 250000 found)".
	Message string `json:"message,omitempty"`
	// BlankAfter prints an empty line after the result line, as db_bench
	// does after the benchmarks whose message ends in a newline (readrandom,
	// readmissing, seekrandom and their *whilewriting forms).
	BlankAfter bool `json:"-"`
	// Latency percentiles in microseconds, when --histogram is on, of the
	// benchmark's main operation type.
	Latency *Percentiles `json:"latency_us,omitempty"`
	// Histograms are the per operation type histograms printed with
	// --histogram ("read", "write", ...), in the order printed.
	Histograms []OpHistogram `json:"-"`
	// Run is the 1-based repeat index for name[-Xn] benchmarks.
	Run int `json:"run,omitempty"`
	// Warmup marks warm-up runs (name[-Wn]); they are printed but not averaged.
	Warmup bool `json:"warmup,omitempty"`
	// Skipped is set for a fill benchmark that --use_existing_db skipped.
	Skipped bool `json:"skipped,omitempty"`
}

// OpHistogram is the latency histogram of one operation type.
type OpHistogram struct {
	Op   string
	Hist *Histogram
}

// OpsPerSec is operations per wall-clock second.
func (r Result) OpsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// MicrosPerOp is busy microseconds per operation.
func (r Result) MicrosPerOp() float64 {
	if r.Ops == 0 {
		return 0
	}
	busy := r.Busy
	if busy == 0 {
		busy = r.Elapsed
	}
	return busy.Seconds() * 1e6 / float64(r.Ops)
}

// MBPerSec is MiB processed per wall-clock second.
func (r Result) MBPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / 1048576 / r.Elapsed.Seconds()
}

// Line renders the result exactly like db_bench's Stats::Report:
//
//	name : X micros/op Y ops/sec Z seconds N operations; W MB/s (message)
//
// so scripts written for db_bench (awk '{print $5}' for ops/sec) work unchanged.
func (r Result) Line() string {
	if r.Skipped {
		return fmt.Sprintf("%-12s : skipped (--use_existing_db is true)", r.Name)
	}
	extra := ""
	if r.Bytes > 0 {
		extra = fmt.Sprintf("%6.1f MB/s", r.MBPerSec())
	}
	if r.Message != "" {
		if extra != "" {
			extra += " "
		}
		extra += r.Message
	}
	sep := ""
	if extra != "" {
		sep = " "
	}
	return fmt.Sprintf("%-12s : %11.3f micros/op %d ops/sec %.3f seconds %d operations;%s%s",
		r.Name, r.MicrosPerOp(), int64(r.OpsPerSec()), r.Elapsed.Seconds(), r.Ops, sep, extra)
}
