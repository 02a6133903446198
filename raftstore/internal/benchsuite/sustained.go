package benchsuite

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/raft"
)

// Sustained describes a sustained-append run: one writer appends
// consecutive indexes with StoreLogs, Batch entries of Entry bytes per
// call, each call durable before the next (as raft's leader and followers
// write their logs), and compacts the log like raft after a snapshot.
type Sustained struct {
	Duration time.Duration // how long to append
	Batch    int           // entries per StoreLogs call
	Entry    int           // bytes of Data per entry
	// Every CompactEvery entries (raft's SnapshotThreshold) the log is
	// compacted as raft does after a snapshot of the last index:
	// DeleteRange(first, last-Trailing) (Trailing is raft's TrailingLogs).
	// CompactEvery 0: never.
	CompactEvery uint64
	Trailing     uint64
}

// SustainedResult is what a sustained run measured.
type SustainedResult struct {
	Engine      string        `json:"engine"`
	Appends     int64         `json:"appends"`     // StoreLogs calls
	Entries     int64         `json:"entries"`     // entries appended
	Bytes       int64         `json:"bytes"`       // Data bytes appended
	Compactions int64         `json:"compactions"` // DeleteRange calls
	Elapsed     time.Duration `json:"elapsed_ns"`  // wall time of the appends and compactions
	// Latency of one StoreLogs call.
	P50  time.Duration `json:"p50_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	Max  time.Duration `json:"max_ns"`
	// CompactMax is the longest DeleteRange.
	CompactMax time.Duration `json:"compact_max_ns"`
	// MaxRSSKiB is the process's peak resident set, filled in by whoever
	// ran it in a process of its own (0: not measured).
	MaxRSSKiB int64 `json:"max_rss_kib,omitempty"`
}

// Seconds returns r.Elapsed in seconds (at least a nanosecond's worth).
func (r SustainedResult) Seconds() float64 { return max(r.Elapsed.Seconds(), 1e-9) }

// AppendsPerSec, EntriesPerSec and MBPerSec (10^6 bytes of entry data) are
// r's throughput over its whole run, compactions included.
func (r SustainedResult) AppendsPerSec() float64 { return float64(r.Appends) / r.Seconds() }
func (r SustainedResult) EntriesPerSec() float64 { return float64(r.Entries) / r.Seconds() }
func (r SustainedResult) MBPerSec() float64      { return float64(r.Bytes) / 1e6 / r.Seconds() }

// RunSustained opens a store of engine e in dir (an existing empty
// directory), runs cfg against it and closes it. Opening and closing are
// not timed.
func RunSustained(e Engine, dir string, cfg Sustained) (SustainedResult, error) {
	if cfg.Duration <= 0 || cfg.Batch < 1 || cfg.Entry < 0 {
		return SustainedResult{}, fmt.Errorf("benchsuite: sustained run needs a duration, a batch of at least 1 and an entry size of at least 0: %+v", cfg)
	}
	s, err := e.Open(dir)
	if err != nil {
		return SustainedResult{}, fmt.Errorf("opening %s: %w", e.Name, err)
	}
	start := time.Now()
	res, err := sustain(s, cfg, func(int64) bool { return time.Since(start) >= cfg.Duration })
	res.Engine = e.Name
	if cerr := s.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing %s: %w", e.Name, cerr)
	}
	return res, err
}

// sustain appends to s until done(appends so far) is true (asked before
// every StoreLogs call).
func sustain(s Store, cfg Sustained, done func(appends int64) bool) (SustainedResult, error) {
	var res SustainedResult
	var lat Histogram
	// Entry data are windows of a random pool at pseudo-random offsets:
	// nothing a compressor can shrink, no two entries alike.
	pool := make([]byte, 1<<20+cfg.Entry)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(pool) // never fails
	logs := make([]*raft.Log, cfg.Batch)
	for i := range logs {
		logs[i] = &raft.Log{Type: raft.LogCommand, Term: 1}
	}
	next, first := uint64(1), uint64(1)
	var sinceCompact uint64
	start := time.Now()
	for !done(res.Appends) {
		now := time.Now()
		for _, l := range logs {
			off := (next * 0x9E3779B97F4A7C15) % uint64(len(pool)-cfg.Entry+1)
			l.Index, l.AppendedAt = next, now
			l.Data = pool[off : off+uint64(cfg.Entry)]
			next++
		}
		t0 := time.Now()
		if err := s.StoreLogs(logs); err != nil {
			return res, fmt.Errorf("StoreLogs up to index %d: %w", next-1, err)
		}
		lat.Record(time.Since(t0))
		res.Appends++
		res.Entries += int64(cfg.Batch)
		res.Bytes += int64(cfg.Batch * cfg.Entry)
		sinceCompact += uint64(cfg.Batch)
		if last := next - 1; cfg.CompactEvery > 0 && sinceCompact >= cfg.CompactEvery && last > cfg.Trailing {
			sinceCompact = 0
			if upTo := last - cfg.Trailing; first <= upTo {
				t0 := time.Now()
				if err := s.DeleteRange(first, upTo); err != nil {
					return res, fmt.Errorf("DeleteRange(%d, %d): %w", first, upTo, err)
				}
				res.CompactMax = max(res.CompactMax, time.Since(t0))
				res.Compactions++
				first = upTo + 1
			}
		}
	}
	res.Elapsed = time.Since(start)
	res.P50, res.P99, res.P999, res.Max = lat.Quantile(0.5), lat.Quantile(0.99), lat.Quantile(0.999), lat.Max()
	return res, nil
}

// Histogram counts durations in log-linear buckets: exact below 128 ns,
// then 128 buckets per power of two, so a quantile is within 1/128 (0.8%)
// of the true value, in 58 KiB whatever the number of samples.
type Histogram struct {
	counts [(64 - subBits + 1) << subBits]uint64
	n      uint64
	max    time.Duration
}

const subBits = 7 // 128 sub-buckets per power of two

// bucketOf returns the bucket of v ≥ 0.
func bucketOf(v uint64) int {
	if v < 1<<subBits {
		return int(v)
	}
	shift := bits.Len64(v) - 1 - subBits
	return (shift+1)<<subBits + int(v>>shift) - 1<<subBits
}

// bucketMax returns the largest value of bucket b.
func bucketMax(b int) uint64 {
	if b < 1<<subBits {
		return uint64(b)
	}
	shift := b>>subBits - 1
	m := uint64(b&(1<<subBits-1)) + 1<<subBits
	return (m+1)<<shift - 1
}

// Record adds one sample (a negative one counts as 0).
func (h *Histogram) Record(d time.Duration) {
	d = max(d, 0)
	h.counts[bucketOf(uint64(d))]++
	h.n++
	h.max = max(h.max, d)
}

// Count returns the number of samples.
func (h *Histogram) Count() uint64 { return h.n }

// Max returns the largest sample, exactly.
func (h *Histogram) Max() time.Duration { return h.max }

// Quantile returns the sample of rank ⌈q·n⌉ (the smallest sample at
// least a fraction q of the samples do not exceed), rounded up to its
// bucket's largest value but never above Max; 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for b, c := range h.counts {
		if seen += c; seen >= rank {
			return min(time.Duration(bucketMax(b)), h.max)
		}
	}
	return h.max
}
