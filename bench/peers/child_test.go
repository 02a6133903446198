package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/vigildb/vigil/bench"
)

// TestMain lets this test binary serve as the child of isolated runs, as
// the vs binary does.
func TestMain(m *testing.M) {
	if IsChild(os.Args) {
		os.Exit(ChildMain(os.Stdin, os.Stderr))
	}
	os.Exit(m.Run())
}

func selfChild(t *testing.T) []string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, ChildArg}
}

func tinyOptions(dir string) Options {
	return Options{
		Runs: 2, Contenders: DefaultContenders(2), PebbleCacheCredit: 2,
		Engine:  bench.EngineOptions{ChecksumType: 4, BlockSize: 4096, CacheSize: 1 << 20, BloomBits: 10, Compression: "snappy"},
		KeySize: 16, ValueSize: 100, CompressionRatio: 0.5, Seed: 7, Dir: dir,
	}
}

// TestCompareIsolated runs scenarios in child processes: every engine run
// reports a peak RSS, the table shows it, and no directory is left.
func TestCompareIsolated(t *testing.T) {
	dir := t.TempDir()
	o := tinyOptions(dir)
	o.ChildCommand = selfChild(t)
	for _, name := range []string{"fillrandom", "bigbatch"} {
		s, err := SelectScenarios(DefaultScenarios(), name)
		if err != nil {
			t.Fatal(err)
		}
		o.Scenarios = append(o.Scenarios, s[0].Scale(0.002))
	}
	var progress bytes.Buffer
	o.Progress = &progress
	rep, err := Compare(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.EngineRuns) != len(o.Scenarios)*o.Runs*2 {
		t.Fatalf("%d engine runs", len(rep.EngineRuns))
	}
	for i, r := range rep.EngineRuns {
		if r.MaxRSSKiB <= 0 || r.Wall <= 0 {
			t.Errorf("engine run %+v without RSS or wall time", r)
		}
		// Order: vigil, pebble; pebble, vigil; per scenario.
		if want := (i%4 == 0 || i%4 == 3) == (r.Engine == "vigil"); !want {
			t.Errorf("engine run %d is %s (run %d)", i, r.Engine, r.Run)
		}
		if r.First != (i%2 == 0) {
			t.Errorf("engine run %d: first = %v", i, r.First)
		}
	}
	if rep.ParentPeakKiB <= 0 {
		t.Error("no parent peak")
	}
	found := map[string]bool{}
	for _, s := range rep.Samples {
		found[s.Scenario+"/"+s.Result.Name] = true
		if s.Result.Name == "readrandom" && !strings.Contains(s.Result.Message, "of") {
			t.Errorf("readrandom message %q", s.Result.Message)
		}
	}
	for _, want := range []string{"fillrandom/fillrandom", "bigbatch/bigbatch", "bigbatch/batch-apply", "bigbatch/readrandom", "bigbatch/readseq"} {
		if !found[want] {
			t.Errorf("no %s sample", want)
		}
	}
	if !strings.Contains(progress.String(), "peak RSS") {
		t.Errorf("progress lacks RSS:\n%s", progress.String())
	}
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "vigil RSS MiB") || !strings.Contains(b.String(), "RSS vigil/pebble") {
		t.Errorf("table lacks RSS columns:\n%s", b.String())
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestChildFailure: a child that fails stops the comparison with what it
// wrote on stderr, and its directory is removed all the same.
func TestChildFailure(t *testing.T) {
	dir := t.TempDir()
	o := tinyOptions(dir)
	o.Runs = 1
	o.ChildCommand = selfChild(t)
	o.Scenarios = []Scenario{DefaultScenarios()[2].Scale(0.0001)}
	// The child knows only vigil and pebble.
	o.Contenders = []Contender{o.Contenders[0], {Name: "nosuch"}}
	_, err := Compare(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), `unknown engine "nosuch"`) || !strings.Contains(err.Error(), "child's stdout and stderr") {
		t.Errorf("error %v, want the child's stderr", err)
	}
	// A command that is no child at all.
	o.Contenders = DefaultContenders(2)
	o.ChildCommand = []string{"/bin/sh", "-c", "echo broken >&2; exit 3"}
	_, err = Compare(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "broken") {
		t.Errorf("error %v", err)
	}
	o.ChildCommand = []string{"/bin/true"}
	_, err = Compare(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "no result") {
		t.Errorf("error %v", err)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
	// A canceled comparison kills its child.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	o.ChildCommand = []string{"/bin/sleep", "30"}
	start := time.Now()
	if _, err := Compare(ctx, o); err == nil || time.Since(start) > 10*time.Second {
		t.Errorf("canceled: %v after %v", err, time.Since(start))
	}
}

func TestChildMainErrors(t *testing.T) {
	var stderr bytes.Buffer
	if code := ChildMain(strings.NewReader("not json"), &stderr); code != 1 || !strings.Contains(stderr.String(), "reading the job") {
		t.Errorf("bad job: %d %q", code, stderr.String())
	}
	stderr.Reset()
	job, _ := json.Marshal(Job{Engine: "vigil"})
	if code := ChildMain(bytes.NewReader(job), &stderr); code != 1 || !strings.Contains(stderr.String(), "directory") {
		t.Errorf("no dir: %d %q", code, stderr.String())
	}
	if IsChild([]string{"vs"}) || !IsChild([]string{"vs", ChildArg}) || IsChild([]string{"vs", ChildArg, "x"}) {
		t.Error("IsChild")
	}
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 8}
	if !strings.Contains(tb.report(), "nothing") {
		t.Error(tb.report())
	}
	tb.Write([]byte("0123456789"))
	tb.Write([]byte("ab"))
	if string(tb.buf) != "456789ab" || !tb.dropped {
		t.Errorf("%q", tb.buf)
	}
}

func TestParseHWM(t *testing.T) {
	if got := parseHWM("Name:\tvs\nVmPeak:\t  999 kB\nVmHWM:\t   12345 kB\nVmRSS:\t 1 kB\n"); got != 12345 {
		t.Errorf("got %d", got)
	}
	if parseHWM("VmRSS: 1 kB\n") != 0 || parseHWM("VmHWM:\n") != 0 {
		t.Error("missing VmHWM")
	}
	if selfHWMKiB() <= 0 {
		t.Skip("no /proc/self/status")
	}
}

func TestPermutation(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 100, 1000, 4096, 10007} {
		p := newPermutation(n, 301)
		seen := make([]bool, n)
		inOrder := 0
		for i := uint64(0); i < n; i++ {
			x := p.Next()
			if x >= n || seen[x] {
				t.Fatalf("n=%d: %d repeated or out of range at %d", n, x, i)
			}
			seen[x] = true
			if x == i {
				inOrder++
			}
		}
		if n >= 100 && inOrder > int(n/10) {
			t.Errorf("n=%d: %d numbers in their own place, not much of a shuffle", n, inOrder)
		}
		// The same seed gives the same order, another seed another one.
		a, b, c := newPermutation(n, 301), newPermutation(n, 301), newPermutation(n, 302)
		same, differ := true, false
		for i := uint64(0); i < n; i++ {
			x := a.Next()
			same = same && x == b.Next()
			differ = differ || x != c.Next()
		}
		if !same || (n >= 100 && !differ) {
			t.Errorf("n=%d: same seed same %v, other seed differs %v", n, same, differ)
		}
	}
}

// TestBigBatch runs the bigbatch step on both engines in-process: all keys
// land (a readrandom afterwards finds each); then Pebble's WriteBatch on
// its own.
func TestBigBatch(t *testing.T) {
	s, _ := SelectScenarios(DefaultScenarios(), "bigbatch")
	sc := s[0].Scale(0.005)
	o := tinyOptions(t.TempDir())
	o.Runs = 1
	o.Scenarios = []Scenario{sc}
	rep, err := Compare(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, sm := range rep.Samples {
		names[sm.Result.Name]++
		switch sm.Result.Name {
		case BigBatchBenchmark:
			if sm.Result.Ops != sc.Num || !strings.Contains(sm.Result.Message, "apply") {
				t.Errorf("%s: %+v", sm.Engine, sm.Result)
			}
		case "readrandom":
			if want := "(" + itoa(sc.Num) + " of " + itoa(sc.Num) + " found)"; sm.Result.Message != want {
				t.Errorf("%s readrandom: %q, want %q", sm.Engine, sm.Result.Message, want)
			}
		case "readseq":
			if sm.Result.Ops != sc.Num {
				t.Errorf("%s readseq read %d", sm.Engine, sm.Result.Ops)
			}
		}
	}
	for _, n := range []string{BigBatchBenchmark, "batch-build", "batch-apply", "batch-flush", "batch-close", "readrandom", "readseq"} {
		if names[n] != 2 {
			t.Errorf("%s: %d samples, want 2", n, names[n])
		}
	}

	// Pebble's WriteBatch: the same batch (over half a memtable, so a
	// flushable batch inside Pebble), read back before any flush.
	eo := o.forScenario(sc).Engine
	eo.Dir = filepath.Join(t.TempDir(), "db")
	e, err := OpenPebble(eo)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	wb := e.(*PebbleEngine).NewWriteBatch()
	key := make([]byte, sc.KeySize)
	perm := newPermutation(uint64(sc.Num), 1)
	for i := int64(0); i < sc.Num; i++ {
		wb.Put(bench.MakeKey(key, perm.Next()), make([]byte, sc.ValueSize))
	}
	if err := wb.Commit(false); err != nil {
		t.Fatal(err)
	}
	db := e.(*PebbleEngine).DB()
	v, closer, err := db.Get(bench.MakeKey(key, uint64(sc.Num-1)))
	if err != nil || len(v) != sc.ValueSize {
		t.Fatalf("get after the batch: %v %d", err, len(v))
	}
	closer.Close()
	if _, _, err := db.Get(bench.MakeKey(key, uint64(sc.Num))); err != pebble.ErrNotFound {
		t.Errorf("key past the batch: %v", err)
	}
	// An empty commit is a no-op; a batch is reusable after Commit.
	if err := wb.Commit(false); err != nil {
		t.Error(err)
	}
	wb.Delete(bench.MakeKey(key, 0))
	if err := wb.Commit(true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Get(bench.MakeKey(key, 0)); err != pebble.ErrNotFound {
		t.Errorf("deleted key: %v", err)
	}
}

func TestTableRSS(t *testing.T) {
	rep := &Report{Engines: []string{"vigil", "pebble"}, Runs: 3, ParentPeakKiB: 10 << 10}
	for run := 1; run <= 3; run++ {
		rep.Samples = append(rep.Samples,
			sample("bigbatch", "vigil", run, "bigbatch", 300, time.Second),
			sample("bigbatch", "pebble", run, "bigbatch", 200, time.Second),
			sample("bigbatch", "vigil", run, "readseq", 100, time.Second),
			sample("bigbatch", "pebble", run, "readseq", 100, time.Second),
			sample("bigbatch", "vigil", run, "batch-apply", 1, 2*time.Second),
			sample("bigbatch", "pebble", run, "batch-apply", 1, time.Second),
			sample("fillrandom", "vigil", run, "fillrandom", 100, time.Second),
			sample("fillrandom", "pebble", run, "fillrandom", 100, time.Second),
			keyed(sample("fillrandom", "vigil", run, "fillrandom", 260, time.Second), "hashed"),
			keyed(sample("fillrandom", "pebble", run, "fillrandom", 200, time.Second), "hashed"),
		)
		// vigil 100, 200, 300 MiB -> 200; pebble 100 -> ratio 2 (bigbatch);
		// fillrandom: 50 against 100 MiB.
		rep.EngineRuns = append(rep.EngineRuns,
			EngineRun{Scenario: "bigbatch", Engine: "vigil", Run: run, MaxRSSKiB: int64(run) * 100 << 10},
			EngineRun{Scenario: "bigbatch", Engine: "pebble", Run: run, MaxRSSKiB: 100 << 10},
			EngineRun{Scenario: "fillrandom", Engine: "vigil", Run: run, MaxRSSKiB: 50 << 10},
			EngineRun{Scenario: "fillrandom", Engine: "pebble", Run: run, MaxRSSKiB: 100 << 10},
			// The same scenario with other keys is a row (and RSS) of its own.
			EngineRun{Scenario: "fillrandom", Keys: "hashed", Engine: "vigil", Run: run, MaxRSSKiB: 80 << 10},
			EngineRun{Scenario: "fillrandom", Keys: "hashed", Engine: "pebble", Run: run, MaxRSSKiB: 100 << 10},
		)
	}
	rows := rep.Rows()
	if r := rows[0]; r.RSSKiB[0] != 200<<10 || r.RSSKiB[1] != 100<<10 || r.RSSRatio() != 2 {
		t.Errorf("bigbatch row %+v", r)
	}
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	want := `scenario    keys     benchmark   vigil ops/s  pebble ops/s  vigil/pebble  target          vigil RSS MiB  pebble RSS MiB  RSS vigil/pebble (<= 1.0x)  n  spread vigil/pebble
bigbatch    dbbench  bigbatch            300           200         1.50x  >= 1.3x met               200             100  2.00x MISSED                3              0% / 0%
bigbatch    dbbench  readseq             100           100         1.00x                                                                             3              0% / 0%
fillrandom  dbbench  fillrandom          100           100         1.00x  >= 1.3x MISSED             50             100  0.50x met                   3              0% / 0%
fillrandom  hashed   fillrandom          260           200         1.30x  >= 1.3x met                80             100  0.80x met                   3              0% / 0%
(ops/sec: median of n samples per engine = 3 runs x repeats per run; spread = (max-min)/median)
(RSS: peak resident set of the scenario's process, one per engine run, median of 3 runs, from wait4's ru_maxrss; none can read below the parent's own peak, 10 MiB)

Steps timed in seconds (median of 3 runs; flush and compact are not part of any read figure; batch-apply + batch-flush make up bigbatch):
scenario  keys     step         vigil s  pebble s  speedup  n  spread vigil/pebble
bigbatch  dbbench  batch-apply     2.00      1.00    0.50x  3              0% / 0%
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := rep.WriteJSON(&b, ThisMachine()); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Report struct {
			EngineRuns []EngineRun `json:"engine_runs"`
		}
		Rows []struct {
			RSSKiB   []float64 `json:"rss_kib"`
			RSSRatio float64   `json:"rss_ratio"`
		}
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Report.EngineRuns) != 18 || doc.Rows[0].RSSRatio != 2 || doc.Rows[0].RSSKiB[0] != 200<<10 {
		t.Errorf("JSON: %+v", doc)
	}
}

// TestKeyShapeReachesChild: a job's key shape reaches the child and both
// engines: after a child's fillseq (kvbench) or bigbatch (this package)
// with decimal keys, each engine's store holds the decimal key of the last
// index and not db_bench's.
func TestKeyShapeReachesChild(t *testing.T) {
	o := tinyOptions(t.TempDir())
	o.ChildCommand = selfChild(t)
	fill := Scenario{Name: "fill", Num: 300, WriteBufferSize: 1 << 20, KeyShape: "decimal",
		Steps: []Step{{Benchmarks: "fillseq", Reads: -1}}}
	big, _ := SelectScenarios(DefaultScenarios(), "bigbatch")
	batch := big[0].Scale(0.0003)
	batch.KeyShape = "decimal"
	for _, sc := range []Scenario{fill, batch} {
		for _, c := range DefaultContenders(2) {
			dir := t.TempDir()
			job := Job{Scenario: sc, Engine: c.Name, Run: 1, Dir: dir, EngineOptions: o.Engine, KeySize: o.KeySize,
				ValueSize: o.ValueSize, CompressionRatio: o.CompressionRatio, Seed: o.Seed, PebbleCacheCredit: 2}
			if _, _, err := spawn(context.Background(), o, job); err != nil {
				t.Fatalf("%s on %s: %v", sc.Name, c.Name, err)
			}
			eo := o.forScenario(sc).Engine
			eo.Dir = filepath.Join(dir, "db")
			e, err := c.Open(eo)
			if err != nil {
				t.Fatal(err)
			}
			var buf []byte
			last := uint64(sc.Num - 1)
			decimal, _ := bench.ParseKeyShape("decimal")
			found, _, err := e.Get(bench.NewKeyGen(decimal, o.KeySize).Key(last), &buf)
			if err != nil || !found {
				t.Errorf("%s on %s: decimal key of %d: found %v, %v", sc.Name, c.Name, last, found, err)
			}
			if found, _, _ := e.Get(bench.MakeKey(make([]byte, o.forScenario(sc).KeySize), last), &buf); found {
				t.Errorf("%s on %s: db_bench's key of %d is there too", sc.Name, c.Name, last)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
