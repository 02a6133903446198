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
	min    uint64
	max    uint64
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
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
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

// String renders the summary in db_bench's --histogram style.
func (p *Percentiles) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Microseconds per op:\n")
	fmt.Fprintf(&b, "Count: %d Average: %.4f  Min: %.3f  Max: %.3f\n", p.Count, p.Avg, p.Min, p.Max)
	fmt.Fprintf(&b, "Percentiles: P50: %.2f P99: %.2f P99.9: %.2f\n", p.P50, p.P99, p.P999)
	return b.String()
}
