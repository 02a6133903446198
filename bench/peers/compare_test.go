package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vigildb/vigil/bench"
)

func TestDefaultScenarios(t *testing.T) {
	sc := DefaultScenarios()
	byName := map[string]Scenario{}
	for _, s := range sc {
		byName[s.Name] = s
		for _, st := range s.Steps {
			specs, err := bench.ParseSpecs(st.Benchmarks)
			if err != nil || len(specs) == 0 {
				t.Errorf("%s: bad step %q: %v", s.Name, st.Benchmarks, err)
			}
		}
	}
	// The brief's numbers (issue 8).
	if m := byName["memtable"]; m.Num != 250_000 || m.WriteBufferSize != 256<<20 || m.Steps[0].Reads != 500_000 {
		t.Errorf("memtable = %+v", m)
	}
	if d := byName["ondisk"]; d.Num != 2_000_000 || d.WriteBufferSize != 64<<20 || d.Steps[0].Reads != 1_000_000 ||
		!strings.HasPrefix(d.Steps[0].Benchmarks, "fillseq,flush,compact,") || d.Steps[1].Reads != -1 {
		t.Errorf("ondisk = %+v", d)
	}
	if f := byName["fillrandom"]; f.Num != 1_000_000 || f.WriteBufferSize != 64<<20 || f.Compression != "" {
		t.Errorf("fillrandom = %+v", f)
	}
	if f := byName["fillrandom-nocompress"]; f.Num != 1_000_000 || f.WriteBufferSize != 64<<20 || f.Compression != "none" ||
		f.Steps[0].Benchmarks != "fillrandom" {
		t.Errorf("fillrandom-nocompress = %+v", f)
	}
	if b := byName["bigbatch"]; b.Num != 1_000_000 || b.KeySize != 32 || b.ValueSize != 32 || b.Compression != "none" ||
		b.Steps[0].Benchmarks != BigBatchBenchmark || b.Steps[1].Benchmarks != "readrandom,readseq" || b.Steps[1].Reads != -1 {
		t.Errorf("bigbatch = %+v", b)
	}
	if g := byName["geth"]; g.Num != 1_000_000 || g.WriteBufferSize != 64<<20 || g.KeyShape != "hashed" || g.ValueSize != 32 ||
		g.Compression != "none" || len(g.Steps) != 1 || g.Steps[0].Benchmarks != "fillrandom,readrandom" || g.Steps[0].Reads != -1 {
		t.Errorf("geth = %+v", g)
	}
	// geth's keys are hashed whatever --keys says; the others take --keys.
	if got := byName["geth"].shapes(Options{KeyShapes: []string{"dbbench", "decimal"}}); len(got) != 1 || got[0] != "hashed" {
		t.Errorf("geth shapes %v", got)
	}
	if got := byName["fillrandom"].shapes(Options{KeyShapes: []string{"dbbench", "decimal"}}); len(got) != 2 || got[1] != "decimal" {
		t.Errorf("fillrandom shapes %v", got)
	}
	if got := byName["fillrandom"].shapes(Options{}); len(got) != 1 || got[0] != "dbbench" {
		t.Errorf("fillrandom shapes without --keys %v", got)
	}
	// Overrides apply to the scenario only.
	o := Options{KeySize: 16, ValueSize: 100, Engine: bench.EngineOptions{Compression: "snappy"}}
	if got := o.forScenario(byName["bigbatch"]); got.KeySize != 32 || got.ValueSize != 32 || got.Engine.Compression != "none" ||
		got.Engine.WriteBufferSize != 64<<20 {
		t.Errorf("forScenario(bigbatch) = %+v", got)
	}
	if got := o.forScenario(byName["fillrandom"]); got.KeySize != 16 || got.ValueSize != 100 || got.Engine.Compression != "snappy" {
		t.Errorf("forScenario(fillrandom) = %+v", got)
	}
}

func TestSelectScenarios(t *testing.T) {
	all := DefaultScenarios()
	for _, list := range []string{"", "all", " all "} {
		got, err := SelectScenarios(all, list)
		if err != nil || len(got) != len(all) {
			t.Errorf("%q: %d scenarios, %v", list, len(got), err)
		}
	}
	got, err := SelectScenarios(all, "fillrandom, memtable")
	if err != nil || len(got) != 2 || got[0].Name != "fillrandom" || got[1].Name != "memtable" {
		t.Errorf("two by name: %+v, %v", got, err)
	}
	for _, bad := range []string{"nope", ",", "memtable,nope"} {
		if _, err := SelectScenarios(all, bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseKeyShapes(t *testing.T) {
	for list, want := range map[string]string{
		"dbbench":                   "dbbench",
		" decimal , hashed,decimal": "decimal,hashed",
		"all":                       strings.Join(bench.KeyShapeNames(), ","),
		"varlen,all":                "varlen,dbbench,decimal,prefixed,hashed",
	} {
		got, err := ParseKeyShapes(list)
		if err != nil || strings.Join(got, ",") != want {
			t.Errorf("%q: %v, %v; want %s", list, got, err, want)
		}
	}
	for _, bad := range []string{"", ",", "uuid", "decimal,uuid"} {
		if _, err := ParseKeyShapes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := ParseKeyShapes("uuid"); err == nil || !strings.Contains(err.Error(), "varlen") {
		t.Errorf("unknown shape: %v", err)
	}
}

// TestCompareKeyShapes: each scenario runs once per key shape, geth once
// with its hashed keys; samples, engine runs and rows carry the shape, and
// every shape's reads find what its fill wrote.
func TestCompareKeyShapes(t *testing.T) {
	all := DefaultScenarios()
	sel, err := SelectScenarios(all, "memtable,geth")
	if err != nil {
		t.Fatal(err)
	}
	o := tinyOptions(t.TempDir())
	o.Runs = 1
	o.KeyShapes = []string{"decimal", "varlen"}
	for _, s := range sel {
		o.Scenarios = append(o.Scenarios, s.Scale(0.001))
	}
	var progress bytes.Buffer
	o.Progress = &progress
	rep, err := Compare(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for _, r := range rep.EngineRuns {
		runs[r.Scenario+"/"+r.Keys]++
	}
	if len(runs) != 3 || runs["memtable/decimal"] != 2 || runs["memtable/varlen"] != 2 || runs["geth/hashed"] != 2 {
		t.Errorf("engine runs %v", runs)
	}
	for _, s := range rep.Samples {
		if s.Keys == "" || (s.Scenario == "geth") != (s.Keys == "hashed") {
			t.Errorf("sample %s keys %q", s.Scenario, s.Keys)
		}
		if s.Scenario == "memtable" && s.Result.Name == "readrandom" && !strings.Contains(s.Result.Message, "(500 of 500 found)") {
			t.Errorf("%s %s readrandom: %q", s.Keys, s.Engine, s.Result.Message)
		}
	}
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"memtable  decimal  fillseq", "memtable  varlen   readrandom", "geth      hashed   fillrandom", "geth      hashed   readrandom"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if !strings.Contains(progress.String(), "[geth hashed 1/1]") {
		t.Errorf("progress:\n%s", progress.String())
	}
	o.KeyShapes = []string{"uuid"}
	if _, err := Compare(context.Background(), o); err == nil || !strings.Contains(err.Error(), "uuid") {
		t.Errorf("unknown shape: %v", err)
	}
}

func TestScale(t *testing.T) {
	s := DefaultScenarios()[1] // ondisk
	if got := s.Scale(1); got.Num != s.Num || got.WriteBufferSize != s.WriteBufferSize {
		t.Errorf("Scale(1) changed the scenario: %+v", got)
	}
	got := s.Scale(0.1)
	if got.Num != 200_000 || got.WriteBufferSize != 6710886 ||
		got.Steps[0].Reads != 100_000 || got.Steps[1].Reads != -1 {
		t.Errorf("Scale(0.1) = %+v", got)
	}
	if s.Steps[0].Reads != 1_000_000 {
		t.Error("Scale modified the original's steps")
	}
	tiny := s.Scale(1e-9)
	if tiny.Num != 100 || tiny.WriteBufferSize != minScaledBuffer || tiny.Steps[0].Reads != 100 {
		t.Errorf("Scale(1e-9) = %+v, want floors", tiny)
	}
	if ScaleBytes(0, 0.5) != 0 || ScaleBytes(64<<20, 0.5) != 32<<20 || ScaleBytes(64<<20, 1e-6) != minScaledBuffer {
		t.Error("ScaleBytes")
	}
}

func TestRunOrder(t *testing.T) {
	c := DefaultContenders(2)
	for i, want := range [][]string{{"vigil", "pebble"}, {"pebble", "vigil"}, {"vigil", "pebble"}, {"pebble", "vigil"}} {
		got := RunOrder(c, i)
		if got[0].Name != want[0] || got[1].Name != want[1] {
			t.Errorf("run %d: %s, %s", i, got[0].Name, got[1].Name)
		}
	}
	if c[0].Name != "vigil" {
		t.Error("RunOrder modified its input")
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(tc.xs); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}

func sample(scenario, engine string, run int, name string, ops int64, elapsed time.Duration) Sample {
	r := bench.Result{Name: name, Ops: ops, Elapsed: elapsed}
	return Sample{Scenario: scenario, Engine: engine, Run: run, OpsPerSec: r.OpsPerSec(), Result: r}
}

// keyed sets a sample's key shape (sample's are db_bench's).
func keyed(s Sample, keys string) Sample {
	s.Keys = keys
	return s
}

func TestRowsAndTable(t *testing.T) {
	rep := &Report{Engines: []string{"vigil", "pebble"}, Runs: 3}
	// ops/sec: vigil 100, 300, 200 -> median 200, spread 100 %;
	// pebble 100, 100, 100 -> median 100. flush: vigil 2 s, pebble 1 s.
	for run, v := range []int64{100, 300, 200} {
		rep.Samples = append(rep.Samples,
			sample("memtable", "vigil", run+1, "fillseq", v, time.Second),
			sample("memtable", "pebble", run+1, "fillseq", 100, time.Second),
			sample("ondisk", "vigil", run+1, "flush", 1, 2*time.Second),
			sample("ondisk", "pebble", run+1, "flush", 1, time.Second),
			sample("ondisk", "vigil", run+1, "readrandom", 70, time.Second),
			sample("ondisk", "pebble", run+1, "readrandom", 100, time.Second),
		)
	}
	// Warm-ups are printed by kvbench but never counted.
	warm := sample("memtable", "vigil", 1, "fillseq", 1e6, time.Second)
	warm.Result.Warmup = true
	rep.Samples = append(rep.Samples, warm)
	rows := rep.Rows()
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	fill, flush, rr := rows[0], rows[1], rows[2]
	if fill.Benchmark != "fillseq" || fill.Median[0] != 200 || fill.Median[1] != 100 || fill.Ratio() != 2 ||
		math.Abs(fill.Spread[0]-1) > 1e-9 || fill.Spread[1] != 0 || fill.Samples[0] != 3 {
		t.Errorf("fillseq row = %+v ratio %v", fill, fill.Ratio())
	}
	if !flush.Setup || flush.Median[0] != 2 || flush.Median[1] != 1 || flush.Ratio() != 0.5 {
		t.Errorf("flush row = %+v ratio %v (want seconds, ratio pebble/vigil time)", flush, flush.Ratio())
	}
	if math.Abs(rr.Ratio()-0.7) > 1e-9 {
		t.Errorf("readrandom ratio %v", rr.Ratio())
	}

	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	want := `scenario  keys     benchmark   vigil ops/s  pebble ops/s  vigil/pebble  target          n  spread vigil/pebble
memtable  dbbench  fillseq             200           100         2.00x  >= 1.0x met     3            100% / 0%
ondisk    dbbench  readrandom           70           100         0.70x  >= 0.8x MISSED  3              0% / 0%
(ops/sec: median of n samples per engine = 3 runs x repeats per run; spread = (max-min)/median)

Steps timed in seconds (median of 3 runs; flush and compact are not part of any read figure; batch-apply + batch-flush make up bigbatch):
scenario  keys     step   vigil s  pebble s  speedup  n  spread vigil/pebble
ondisk    dbbench  flush     2.00      1.00    0.50x  3              0% / 0%
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}

	b.Reset()
	if err := rep.WriteJSON(&b, ThisMachine()); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Machine Machine
		Report  Report
		Rows    []struct {
			Scenario, Benchmark string
			Median              []float64
			Ratio               float64
		}
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Report.Samples) != len(rep.Samples) || len(doc.Rows) != 3 || doc.Rows[0].Ratio != 2 || doc.Machine.NumCPU < 1 {
		t.Errorf("JSON round trip: %d samples, rows %+v, machine %+v", len(doc.Report.Samples), doc.Rows, doc.Machine)
	}

	if err := (&Report{Engines: []string{"a"}}).WriteTable(&b); err == nil {
		t.Error("table with one engine accepted")
	}
}

func TestTargets(t *testing.T) {
	if r, ok := TargetFor("memtable", "readrandom"); !ok || r != 1.0 {
		t.Errorf("memtable readrandom target %v %v", r, ok)
	}
	if r, ok := TargetFor("ondisk", "readseq"); !ok || r != 0.8 {
		t.Errorf("ondisk readseq target %v %v", r, ok)
	}
	for _, sc := range []string{"fillrandom", "fillrandom-nocompress"} {
		if r, ok := TargetFor(sc, "fillrandom"); !ok || r != 1.3 {
			t.Errorf("%s target %v %v", sc, r, ok)
		}
	}
	if r, ok := TargetFor("bigbatch", BigBatchBenchmark); !ok || r != 1.3 {
		t.Errorf("bigbatch target %v %v", r, ok)
	}
	if r, ok := TargetFor("geth", "fillrandom"); !ok || r != 1.3 {
		t.Errorf("geth fillrandom target %v %v", r, ok)
	}
	if r, ok := TargetFor("geth", "readrandom"); !ok || r != 1.5 {
		t.Errorf("geth readrandom target %v %v", r, ok)
	}
	if _, ok := TargetFor("ondisk", "fillseq"); ok {
		t.Error("ondisk fillseq has a target")
	}
	// Every target names a benchmark its scenario runs.
	for _, tg := range Targets {
		found := false
		for _, s := range AllScenarios() {
			for _, st := range s.Steps {
				specs, _ := bench.ParseSpecs(st.Benchmarks)
				for _, sp := range specs {
					if s.Name == tg.Scenario && sp.Name == tg.Benchmark {
						found = true
					}
				}
			}
		}
		if !found {
			t.Errorf("target %+v matches no scenario benchmark", tg)
		}
	}
}

// TestCompare runs every default scenario, shrunk to a few hundred keys,
// twice on both engines: the samples must cover every benchmark of every
// run on each engine, in the alternating order, and every temporary
// directory must be gone afterwards.
func TestCompare(t *testing.T) {
	dir := t.TempDir()
	var scenarios []Scenario
	for _, s := range DefaultScenarios() {
		scenarios = append(scenarios, s.Scale(0.001))
	}
	var progress bytes.Buffer
	o := Options{
		Scenarios: scenarios, Runs: 2, Contenders: DefaultContenders(2),
		Engine:  bench.EngineOptions{ChecksumType: 4, BlockSize: 4096, CacheSize: 1 << 20, BloomBits: 10, Compression: "snappy"},
		KeySize: 16, ValueSize: 100, CompressionRatio: 0.5, Seed: 1, Dir: dir, Progress: &progress,
	}
	if testing.Short() {
		o.Scenarios = o.Scenarios[:1]
	}
	rep, err := Compare(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	perRun := 0
	for _, s := range o.Scenarios {
		for _, st := range s.Steps {
			specs, _ := bench.ParseSpecs(st.Benchmarks)
			for _, sp := range specs {
				if sp.Name == BigBatchBenchmark {
					perRun += 5 // bigbatch and its four phases
					continue
				}
				perRun += sp.Repeats + sp.Warmups
			}
		}
	}
	if want := perRun * o.Runs * 2; len(rep.Samples) != want {
		t.Fatalf("%d samples, want %d", len(rep.Samples), want)
	}
	for _, s := range rep.Samples {
		wantFirst := (s.Run%2 == 1) == (s.Engine == "vigil")
		if s.First != wantFirst {
			t.Errorf("%s run %d %s: first = %v", s.Scenario, s.Run, s.Engine, s.First)
		}
		if s.Result.Ops <= 0 || s.OpsPerSec <= 0 {
			t.Errorf("%s %s %s: %+v", s.Scenario, s.Engine, s.Result.Name, s.Result)
		}
		// Reads find what the fills wrote.
		if s.Result.Name == "readrandom" && !strings.HasPrefix(s.Result.Message, "(") {
			t.Errorf("readrandom message %q", s.Result.Message)
		}
		if s.Result.Name == "readseq" && s.Result.Ops != o.Scenarios[0].Num && s.Scenario == "memtable" {
			t.Errorf("memtable readseq read %d keys, want all %d", s.Result.Ops, o.Scenarios[0].Num)
		}
	}
	if n := strings.Count(progress.String(), "\n"); n != len(o.Scenarios)*o.Runs*2 {
		t.Errorf("%d progress lines:\n%s", n, progress.String())
	}
	left, err := os.ReadDir(dir)
	if err != nil || len(left) != 0 {
		t.Errorf("temporary directories left behind: %v %v", left, err)
	}
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, s := range o.Scenarios {
		if !strings.Contains(b.String(), s.Name) {
			t.Errorf("table lacks scenario %s:\n%s", s.Name, b.String())
		}
	}
}

func TestCompareFullScansOnDisk(t *testing.T) {
	// ondisk's second step must scan every key although readrandom's
	// --reads is smaller than --num.
	s := DefaultScenarios()[1].Scale(0.0005)
	if s.Steps[0].Reads >= s.Num {
		t.Fatalf("scaled scenario reads %d >= num %d; the test needs fewer", s.Steps[0].Reads, s.Num)
	}
	rep, err := Compare(context.Background(), Options{
		Scenarios: []Scenario{s}, Runs: 1, Contenders: DefaultContenders(2),
		Engine:  bench.EngineOptions{ChecksumType: 4, BlockSize: 4096, CacheSize: 1 << 20, BloomBits: 10, Compression: "snappy"},
		KeySize: 16, ValueSize: 100, CompressionRatio: 0.5, Seed: 3, Dir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, sm := range rep.Samples {
		switch sm.Result.Name {
		case "readseq", "readreverse":
			if sm.Result.Ops != s.Num {
				t.Errorf("%s %s read %d keys, want %d", sm.Engine, sm.Result.Name, sm.Result.Ops, s.Num)
			}
		case "readrandom":
			if sm.Result.Ops != s.Steps[0].Reads {
				t.Errorf("%s readrandom did %d reads, want %d", sm.Engine, sm.Result.Ops, s.Steps[0].Reads)
			}
			if want := "(" + itoa(s.Steps[0].Reads) + " of "; !strings.HasPrefix(sm.Result.Message, want) {
				t.Errorf("%s readrandom: %q, want every key found", sm.Engine, sm.Result.Message)
			}
		}
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestCompareErrors(t *testing.T) {
	good := Options{Scenarios: DefaultScenarios()[:1], Runs: 1, Contenders: DefaultContenders(2), Seed: 1}
	for name, mod := range map[string]func(*Options){
		"one engine": func(o *Options) { o.Contenders = o.Contenders[:1] },
		"no runs":    func(o *Options) { o.Runs = 0 },
		"seed 0":     func(o *Options) { o.Seed = 0 },
		"none":       func(o *Options) { o.Scenarios = nil },
	} {
		o := good
		mod(&o)
		if _, err := Compare(context.Background(), o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := Compare(ctx, good)
	if !errors.Is(err, context.Canceled) || rep == nil || len(rep.Samples) != 0 {
		t.Errorf("canceled: %v, %+v", err, rep)
	}
	// A failing engine stops the comparison with its error.
	bad := good
	bad.Scenarios = []Scenario{DefaultScenarios()[2].Scale(0.0001)}
	bad.Dir = t.TempDir()
	boom := errors.New("boom")
	bad.Contenders = []Contender{DefaultContenders(2)[0], {Name: "broken", Open: func(bench.EngineOptions) (bench.Engine, error) { return nil, boom }}}
	bad.Engine = bench.EngineOptions{BlockSize: 4096, Compression: "snappy", ChecksumType: 4}
	if _, err := Compare(context.Background(), bad); !errors.Is(err, boom) {
		t.Errorf("broken engine: %v", err)
	}
}

func TestCPUModel(t *testing.T) {
	x86 := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t: fpu\n"
	if got := CPUModel([]byte(x86)); got != "AMD EPYC 7B13" {
		t.Errorf("x86: %q", got)
	}
	arm := "processor\t: 0\nBogoMIPS\t: 50.00\nHardware\t: BCM2835\n"
	if got := CPUModel([]byte(arm)); got != "BCM2835" {
		t.Errorf("arm: %q", got)
	}
	if got := CPUModel([]byte("nothing here\n")); got != "" {
		t.Errorf("none: %q", got)
	}
	m := ThisMachine()
	if m.NumCPU < 1 || m.GOMAXPROCS < 1 || m.GoVersion == "" || !strings.Contains(m.String(), m.GoVersion) {
		t.Errorf("ThisMachine = %+v", m)
	}
}

func TestSummarize(t *testing.T) {
	rs := []bench.Result{
		{Name: "fillseq", Ops: 100, Elapsed: time.Second},
		{Name: "flush", Ops: 1, Elapsed: 1500 * time.Millisecond},
		{Name: "readseq", Ops: 1000, Elapsed: time.Second, Warmup: true},
		{Name: "readseq", Ops: 10, Elapsed: time.Second},
		{Name: "readseq", Ops: 30, Elapsed: time.Second},
		{Name: "readseq", Ops: 20, Elapsed: time.Second},
	}
	if got, want := summarize(rs), "fillseq 100/s, flush 1.50s, readseq 20/s (x3)"; got != want {
		t.Errorf("summarize = %q, want %q", got, want)
	}
}
