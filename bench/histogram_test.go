package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistogramPercentilesWithinBucketError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	var samples []time.Duration
	for i := 0; i < 100000; i++ {
		// Log-uniform between 100ns and 10ms, like real latencies.
		d := time.Duration(100 * math.Pow(10, rng.Float64()*5))
		samples = append(samples, d)
		h.Record(d)
	}
	slices.Sort(samples)
	for _, p := range []float64{50, 90, 99, 99.9} {
		want := samples[int(p/100*float64(len(samples)))-1]
		got := h.Percentile(p)
		ratio := float64(got) / float64(want)
		if ratio < 0.96 || ratio > 1.04 {
			t.Errorf("P%v = %v, exact %v (ratio %.3f)", p, got, want, ratio)
		}
	}
	if h.Percentile(100) != samples[len(samples)-1] {
		t.Errorf("max = %v, want %v", h.Percentile(100), samples[len(samples)-1])
	}
	var m Histogram
	m.Merge(&h)
	m.Merge(&h)
	if m.Count() != 2*h.Count() || m.Percentile(50) != h.Percentile(50) {
		t.Errorf("merge: count %d p50 %v, want %d %v", m.Count(), m.Percentile(50), 2*h.Count(), h.Percentile(50))
	}
}

func TestHistogramIndexMonotonic(t *testing.T) {
	prev := -1
	for v := uint64(0); v < 1<<20; v += 7 {
		i := histIndex(v)
		if i < prev {
			t.Fatalf("index(%d) = %d < previous %d", v, i, prev)
		}
		if lo := histLower(i); lo > v || histLower(i+1) <= v {
			t.Fatalf("value %d not within bucket %d [%d,%d)", v, i, lo, histLower(i+1))
		}
		prev = i
	}
}

func TestResultLineFormat(t *testing.T) {
	r := Result{Name: "readrandom", Ops: 500000, Bytes: 500000 * 116, Elapsed: 822 * time.Millisecond, Busy: 822 * time.Millisecond, Message: "(250000 of 250000 found)"}
	got := r.Line()
	want := "readrandom   :       1.644 micros/op 608272 ops/sec 0.822 seconds 500000 operations;   67.3 MB/s (250000 of 250000 found)"
	if got != want {
		t.Errorf("line\n got %q\nwant %q", got, want)
	}
}
