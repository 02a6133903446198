package bench

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
	"time"
)

// Histogram records latencies in log-linear buckets: each power of two is
// split into 32 sub-buckets, so any percentile is within ~3 % of the true
// value, in constant memory, with no allocation per sample. One histogram
// per worker thread; Merge combines them. Not safe for concurrent use.
type Histogram struct {
	counts [64 * histSub]uint64
	n      uint64
	sum    float64
	sumSq  float64
	min    uint64
	max    uint64
	// coarse counts samples in db_bench's buckets (dbBenchBuckets), for
	// the bucket table --histogram prints.
	coarse [len(dbBenchBuckets)]uint64
}

// dbBenchBuckets are the upper bounds, in microseconds, of db_bench's
// histogram buckets: 1, 2, then each bound 1.5 times the previous one
// (carried unrounded), truncated to an integer and to its two most
// significant digits: 1, 2, 3, 4, 6, 10, 15, 22, 34, 51, 76, 110, 170, ...
// A sample v falls in the first bucket whose bound exceeds it.
var dbBenchBuckets = func() [109]float64 {
	var b [109]float64
	b[0], b[1] = 1, 2
	v := 2.0
	for i := 2; i < len(b); i++ {
		v *= 1.5
		x := uint64(v)
		pow := uint64(1)
		for x/10 > 10 {
			x /= 10
			pow *= 10
		}
		b[i] = float64(x * pow)
	}
	return b
}()

func coarseIndex(micros float64) int {
	lo, hi := 0, len(dbBenchBuckets)-1
	for lo < hi {
		m := (lo + hi) / 2
		if dbBenchBuckets[m] > micros {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

const histSubBits = 5
const histSub = 1 << histSubBits

func histIndex(v uint64) int {
	if v < histSub {
		return int(v)
	}
	exp := bits.Len64(v) - 1 // v in [2^exp, 2^(exp+1))
	sub := (v >> (uint(exp) - histSubBits)) & (histSub - 1)
	return (exp-histSubBits+1)*histSub + int(sub)
}

// histUpper returns the upper bound (exclusive) of a bucket's values.
func histLower(i int) uint64 {
	if i < histSub {
		return uint64(i)
	}
	exp := i/histSub + histSubBits - 1
	sub := uint64(i % histSub)
	return (histSub + sub) << uint(exp-histSubBits)
}

// Record adds one latency.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[histIndex(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
	h.sumSq += float64(v) * float64(v)
	h.coarse[coarseIndex(float64(v)/1e3)]++
}

// Merge adds o's samples to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	for i, c := range o.coarse {
		h.coarse[i] += c
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
	h.sumSq += o.sumSq
}

// Count returns the number of samples.
func (h *Histogram) Count() uint64 { return h.n }

// Percentile returns the latency below which p percent of samples fall,
// interpolated within its bucket.
func (h *Histogram) Percentile(p float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	if p >= 100 {
		return time.Duration(h.max)
	}
	rank := p / 100 * float64(h.n)
	var cum float64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		if cum+float64(c) >= rank {
			lo := float64(histLower(i))
			hi := float64(histLower(i + 1))
			v := lo + (hi-lo)*(rank-cum)/float64(c)
			v = math.Max(float64(h.min), math.Min(v, float64(h.max)))
			return time.Duration(v)
		}
		cum += float64(c)
	}
	return time.Duration(h.max)
}

// Percentiles are the summary figures kvbench prints and writes to JSON, in
// microseconds.
type Percentiles struct {
	Count uint64  `json:"count"`
	Avg   float64 `json:"avg"`
	Min   float64 `json:"min"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	Max   float64 `json:"max"`
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// Summary computes the Percentiles.
func (h *Histogram) Summary() *Percentiles {
	if h.n == 0 {
		return &Percentiles{}
	}
	return &Percentiles{
		Count: h.n,
		Avg:   h.sum / float64(h.n) / 1e3,
		Min:   us(time.Duration(h.min)),
		P50:   us(h.Percentile(50)),
		P99:   us(h.Percentile(99)),
		P999:  us(h.Percentile(99.9)),
		Max:   us(time.Duration(h.max)),
	}
}

// String renders the summary on three lines.
func (p *Percentiles) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Count: %d Average: %.4f  Min: %.3f  Max: %.3f\n", p.Count, p.Avg, p.Min, p.Max)
	fmt.Fprintf(&b, "Percentiles: P50: %.2f P99: %.2f P99.9: %.2f\n", p.P50, p.P99, p.P999)
	return b.String()
}

// Report renders the histogram as db_bench's --histogram does for one
// operation type ("read", "write", ...), in microseconds: count, average,
// standard deviation, min, median, max, P50/P75/P99/P99.9/P99.99, then a
// table of db_bench's buckets that hold samples, then an empty line.
func (h *Histogram) Report(op string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Microseconds per %s:\n", op)
	avg, sd := 0.0, 0.0
	if h.n > 0 {
		avg = h.sum / float64(h.n)
		sd = math.Sqrt(math.Max(0, h.sumSq/float64(h.n)-avg*avg))
	}
	p := func(q float64) float64 { return us(h.Percentile(q)) }
	fmt.Fprintf(&b, "Count: %d Average: %.4f  StdDev: %.2f\n", h.n, avg/1e3, sd/1e3)
	fmt.Fprintf(&b, "Min: %.3f  Median: %.4f  Max: %.3f\n", us(time.Duration(h.min)), p(50), us(time.Duration(h.max)))
	fmt.Fprintf(&b, "Percentiles: P50: %.2f P75: %.2f P99: %.2f P99.9: %.2f P99.99: %.2f\n", p(50), p(75), p(99), p(99.9), p(99.99))
	b.WriteString("------------------------------------------------------\n")
	var cum uint64
	for i, c := range h.coarse {
		if c == 0 {
			continue
		}
		cum += c
		left, open := 0.0, byte('[')
		if i > 0 {
			left, open = dbBenchBuckets[i-1], '('
		}
		pct := 100 * float64(c) / float64(h.n)
		fmt.Fprintf(&b, "%c %7.0f, %7.0f ] %8d %7.3f%% %7.3f%% %s\n", open, left, dbBenchBuckets[i], c, pct,
			100*float64(cum)/float64(h.n), strings.Repeat("#", int(20*float64(c)/float64(h.n)+0.5)))
	}
	b.WriteString("\n")
	return b.String()
}
