package peers

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigildb/vigil/bench"
)

func TestLargeScenario(t *testing.T) {
	all := AllScenarios()
	def, err := SelectScenarios(all, "all")
	if err != nil {
		t.Fatal(err)
	}
	if len(def) != len(DefaultScenarios()) || slices.ContainsFunc(def, func(s Scenario) bool { return s.Name == "large" }) {
		t.Errorf("all selects %d scenarios, large among them?", len(def))
	}
	sel, err := SelectScenarios(all, "geth,large")
	if err != nil || len(sel) != 2 {
		t.Fatalf("%+v %v", sel, err)
	}
	l := sel[1]
	if l.Name != "large" || l.Num != 10_000_000 || l.WriteBufferSize != 64<<20 || !l.Histogram || !l.Explicit ||
		l.KeySize != 0 || l.ValueSize != 0 || l.Compression != "" || l.KeyShape != "" || len(l.Steps) != 2 ||
		l.Steps[0] != (Step{"fillrandom", -1}) || l.Steps[1] != (Step{"readrandom,seekrandom", 1_000_000}) {
		t.Errorf("large = %+v", l)
	}
	for _, b := range []string{"readrandom", "seekrandom"} {
		if r, ok := TargetFor("large", b); !ok || r != 1.5 {
			t.Errorf("large %s target %v %v", b, r, ok)
		}
	}
	s := l.Scale(0.01)
	if s.Num != 100_000 || s.WriteBufferSize != 1<<20 || s.Steps[1].Reads != 10_000 || s.Steps[0].Reads != -1 || !s.Histogram {
		t.Errorf("scaled large = %+v", s)
	}
}

func TestSummarizeLatency(t *testing.T) {
	rs := []bench.Result{
		{Name: "readrandom", Ops: 1000, Elapsed: time.Second, Latency: &bench.Percentiles{Count: 1000, P99: 12.34, Max: 987.6}},
		{Name: "seekrandom", Ops: 2000, Elapsed: time.Second},
	}
	got := summarize(rs)
	if want := "readrandom 1000/s (P99 12.3 us, max 988 us), seekrandom 2000/s"; got != want {
		t.Errorf("summarize = %q, want %q", got, want)
	}
}

// TestCompareLarge runs the large scenario, shrunk to 2000 keys, once on
// both engines in this process: every sample has its latencies, and the
// progress lines show them.
func TestCompareLarge(t *testing.T) {
	sc, err := SelectScenarios(AllScenarios(), "large")
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	o := Options{
		Scenarios: []Scenario{sc[0].Scale(0.0002)}, Runs: 1, Contenders: DefaultContenders(2),
		Engine:  bench.EngineOptions{ChecksumType: 4, BlockSize: 4096, CacheSize: 1 << 20, BloomBits: 10, Compression: "snappy"},
		KeySize: 16, ValueSize: 100, CompressionRatio: 0.5, Seed: 1, Dir: t.TempDir(), Progress: &progress,
	}
	rep, err := Compare(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Samples) != 6 {
		t.Fatalf("%d samples", len(rep.Samples))
	}
	for _, s := range rep.Samples {
		if l := s.Result.Latency; l == nil || l.Count == 0 || l.Max < l.P99 {
			t.Errorf("%s %s: latency %+v", s.Engine, s.Result.Name, l)
		}
	}
	if n := strings.Count(progress.String(), "P99 "); n != 6 {
		t.Errorf("progress shows %d latencies:\n%s", n, progress.String())
	}
}
