package benchsuite

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestHistogramBuckets(t *testing.T) {
	// Every value lies in its bucket, buckets are ordered, and a bucket is
	// less than 1/128 of its values wide.
	rng := rand.New(rand.NewPCG(3, 4))
	vals := []uint64{0, 1, 127, 128, 129, 255, 256, 257, 1000, 1 << 40, 1<<63 - 1}
	for range 10000 {
		vals = append(vals, rng.Uint64()>>rng.IntN(64))
	}
	for _, v := range vals {
		b := bucketOf(v)
		lo := uint64(0)
		if b > 0 {
			lo = bucketMax(b-1) + 1
		}
		hi := bucketMax(b)
		if v < lo || v > hi {
			t.Fatalf("value %d in bucket %d = [%d, %d]", v, b, lo, hi)
		}
		if v >= 128 && float64(hi-lo) > float64(lo)/128 {
			t.Fatalf("bucket %d = [%d, %d] is too wide", b, lo, hi)
		}
		if b >= len(Histogram{}.counts) {
			t.Fatalf("value %d: bucket %d out of range", v, b)
		}
	}
}

func TestHistogramQuantile(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 || h.Max() != 0 {
		t.Fatal("empty histogram: want zeros")
	}
	// 1..100 ns are exact.
	for i := 100; i >= 1; i-- {
		h.Record(time.Duration(i))
	}
	for q, want := range map[float64]time.Duration{0: 1, 0.01: 1, 0.5: 50, 0.99: 99, 0.999: 100, 1: 100} {
		if got := h.Quantile(q); got != want {
			t.Errorf("1..100: Quantile(%v) = %v, want %v", q, got, want)
		}
	}
	// Shuffled microseconds: within 1/128 above the exact order statistic.
	h = Histogram{}
	var samples []time.Duration
	rng := rand.New(rand.NewPCG(5, 6))
	for range 100000 {
		d := time.Duration(rng.ExpFloat64() * float64(time.Millisecond))
		samples = append(samples, d)
		h.Record(d)
	}
	slices.Sort(samples)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := samples[int(q*float64(len(samples)))-1]
		got := h.Quantile(q)
		if got < exact || float64(got-exact) > float64(exact)/128 {
			t.Errorf("Quantile(%v) = %v, exact %v", q, got, exact)
		}
	}
	if h.Max() != samples[len(samples)-1] || h.Quantile(1) != h.Max() || h.Count() != 100000 {
		t.Errorf("Max %v Quantile(1) %v Count %d, want %v, %v, 100000", h.Max(), h.Quantile(1), h.Count(), samples[len(samples)-1], h.Max())
	}
}

type inmem struct{ *raft.InmemStore }

func (inmem) Close() error { return nil }

// TestSustainBookkeeping runs the sustained loop on raft's in-memory store
// for a fixed number of appends and checks its counts and the log's bounds
// after raft-style compactions.
func TestSustainBookkeeping(t *testing.T) {
	s := inmem{raft.NewInmemStore()}
	cfg := Sustained{Batch: 7, Entry: 100, CompactEvery: 50, Trailing: 30}
	res, err := sustain(s, cfg, func(n int64) bool { return n == 100 })
	if err != nil {
		t.Fatal(err)
	}
	if res.Appends != 100 || res.Entries != 700 || res.Bytes != 70000 {
		t.Fatalf("appends %d entries %d bytes %d, want 100, 700, 70000", res.Appends, res.Entries, res.Bytes)
	}
	// A compaction after every 8th append (56 entries ≥ 50): 12 of them,
	// the last after entry 672, leaving 643..700.
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if res.Compactions != 12 || first != 672-30+1 || last != 700 {
		t.Fatalf("compactions %d, log [%d, %d], want 12, [643, 700]", res.Compactions, first, last)
	}
	var l raft.Log
	if err := s.GetLog(700, &l); err != nil || len(l.Data) != 100 || l.Index != 700 {
		t.Fatalf("GetLog(700): %v, %d bytes, index %d", err, len(l.Data), l.Index)
	}
	if res.P50 <= 0 || res.P50 > res.P99 || res.P99 > res.P999 || res.P999 > res.Max || res.Elapsed <= 0 {
		t.Fatalf("latencies out of order: %+v", res)
	}
}

// TestRunSustainedEngines runs every engine for a moment on disk.
func TestRunSustainedEngines(t *testing.T) {
	for _, e := range Engines {
		t.Run(e.Name, func(t *testing.T) {
			res, err := RunSustained(e, t.TempDir(), Sustained{Duration: 100 * time.Millisecond, Batch: 16, Entry: 64, CompactEvery: 64, Trailing: 64})
			if err != nil {
				t.Fatal(err)
			}
			if res.Engine != e.Name || res.Appends == 0 || res.Entries != 16*res.Appends {
				t.Fatalf("%+v", res)
			}
		})
	}
}
