package peers

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Row is one line of the comparison table: a benchmark of a scenario with
// each engine's median over its runs.
type Row struct {
	Scenario string
	// Keys is the key shape the scenario ran with.
	Keys      string
	Benchmark string
	// Setup marks the steps timed in seconds (SetupBenchmarks): Median
	// holds seconds, not ops/sec.
	Setup bool
	// Median per engine, in Report.Engines order: ops/sec (or seconds for
	// setup rows).
	Median []float64
	// Spread per engine: (max-min)/median over the samples, a noise gauge.
	Spread []float64
	// Samples per engine behind the median: runs times the benchmark's
	// repeats per run ([-Xn]), warm-ups left out.
	Samples []int
	// RSSKiB per engine: the median peak RSS of the scenario's engine
	// runs (one process each covers all its benchmarks), 0 if unknown.
	RSSKiB []float64
}

// Ratio is the first engine's median over the second's (for setup rows,
// the second's time over the first's, so > 1 still means the first is
// faster); 0 when undefined.
func (r Row) Ratio() float64 {
	if len(r.Median) < 2 {
		return 0
	}
	a, b := r.Median[0], r.Median[1]
	if r.Setup {
		a, b = b, a
	}
	if b <= 0 {
		return 0
	}
	return a / b
}

// RSSRatio is the first engine's median peak RSS over the second's (< 1:
// the first used less memory); 0 when unknown.
func (r Row) RSSRatio() float64 {
	if len(r.RSSKiB) < 2 || r.RSSKiB[0] <= 0 || r.RSSKiB[1] <= 0 {
		return 0
	}
	return r.RSSKiB[0] / r.RSSKiB[1]
}

// RSS returns each engine's median peak RSS (KiB, in Engines order) over
// the engine runs of a scenario with a key shape ("" = db_bench's) that
// report one; 0 for an engine without.
func (rep *Report) RSS(scenario, keys string) []float64 {
	out := make([]float64, len(rep.Engines))
	for e, name := range rep.Engines {
		var xs []float64
		for _, r := range rep.EngineRuns {
			if r.Scenario == scenario && keyShapeName(r.Keys) == keyShapeName(keys) && r.Engine == name && r.MaxRSSKiB > 0 {
				xs = append(xs, float64(r.MaxRSSKiB))
			}
		}
		out[e] = Median(xs)
	}
	return out
}

// HasRSS says whether any engine run reported a peak RSS.
func (rep *Report) HasRSS() bool {
	return slices.ContainsFunc(rep.EngineRuns, func(r EngineRun) bool { return r.MaxRSSKiB > 0 })
}

// Rows reduces the samples to one row per (scenario, key shape,
// benchmark), in the
// order the benchmarks ran: the median of every sample of each engine
// (all runs, all repeats within a run; warm-ups left out).
func (rep *Report) Rows() []Row {
	type key struct{ scenario, keys, bench string }
	var order []key
	vals := map[key][][]float64{}
	for _, s := range rep.Samples {
		if s.Result.Warmup {
			continue
		}
		k := key{s.Scenario, keyShapeName(s.Keys), s.Result.Name}
		v, ok := vals[k]
		if !ok {
			order = append(order, k)
			v = make([][]float64, len(rep.Engines))
			vals[k] = v
		}
		e := slices.Index(rep.Engines, s.Engine)
		if e < 0 {
			continue
		}
		x := s.OpsPerSec
		if SetupBenchmarks[s.Result.Name] {
			x = s.Result.Elapsed.Seconds()
		}
		v[e] = append(v[e], x)
	}
	rows := make([]Row, 0, len(order))
	for _, k := range order {
		v := vals[k]
		row := Row{Scenario: k.scenario, Keys: k.keys, Benchmark: k.bench, Setup: SetupBenchmarks[k.bench], RSSKiB: rep.RSS(k.scenario, k.keys)}
		for _, xs := range v {
			med := Median(xs)
			spread := 0.0
			if len(xs) > 1 && med > 0 {
				spread = (slices.Max(xs) - slices.Min(xs)) / med
			}
			row.Median = append(row.Median, med)
			row.Spread = append(row.Spread, spread)
			row.Samples = append(row.Samples, len(xs))
		}
		rows = append(rows, row)
	}
	return rows
}

// Median returns the median of xs (the mean of the middle two for an even
// count); 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Target is the project's goal for a benchmark's ratio (first engine over
// the second), whatever the keys' shape.
type Target struct {
	Scenario, Benchmark string
	MinRatio            float64
}

// Targets are the goals for Vigil over Pebble: issue 8's (at least match
// Pebble on memtable workloads, stay within 0.8× on disk), and the later
// ones for writes: fillrandom ≥ 1.3× with snappy and without compression,
// and the big batch (apply + flush) ≥ 1.3×, and go-ethereum's pattern
// (geth): its fillrandom ≥ 1.3× and readrandom ≥ 1.5×; and with a DB ten
// times the cache (large), readrandom and seekrandom ≥ 1.5×.
var Targets = []Target{
	{"memtable", "fillseq", 1.0},
	{"memtable", "readrandom", 1.0},
	{"memtable", "readseq", 1.0},
	{"memtable", "readreverse", 1.0},
	{"ondisk", "readrandom", 0.8},
	{"ondisk", "readseq", 0.8},
	{"ondisk", "readreverse", 0.8},
	{"fillrandom", "fillrandom", 1.3},
	{"fillrandom-nocompress", "fillrandom", 1.3},
	{"bigbatch", BigBatchBenchmark, 1.3},
	{"geth", "fillrandom", 1.3},
	{"geth", "readrandom", 1.5},
	{"large", "readrandom", 1.5},
	{"large", "seekrandom", 1.5},
}

// MaxRSSRatio is the goal for memory: Vigil's peak RSS at most Pebble's,
// in every scenario.
const MaxRSSRatio = 1.0

// TargetFor returns the ratio target of a row, if the project set one.
func TargetFor(scenario, benchmark string) (float64, bool) {
	for _, t := range Targets {
		if t.Scenario == scenario && t.Benchmark == benchmark {
			return t.MinRatio, true
		}
	}
	return 0, false
}

// mib renders KiB as MiB for the table.
func mib(kib float64) string {
	if kib <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", kib/1024)
}

// WriteTable renders the rows as an aligned text table: scenario, key
// shape, benchmark, each engine's median ops/sec, the ratio, the target, then,
// when the runs had processes of their own, each engine's median peak RSS
// and their ratio against MaxRSSRatio (on the first row of each scenario:
// one process covers all its benchmarks), and the number of samples and
// their spread; the steps timed in seconds follow in their own section.
func (rep *Report) WriteTable(w io.Writer) error {
	if len(rep.Engines) != 2 {
		return fmt.Errorf("table: need 2 engines, got %d", len(rep.Engines))
	}
	a, b := rep.Engines[0], rep.Engines[1]
	withRSS := rep.HasRSS()
	rows := rep.Rows()
	var main, setup [][]string
	rssShown := map[[2]string]bool{}
	for _, r := range rows {
		ratio := "-"
		if x := r.Ratio(); x > 0 {
			ratio = fmt.Sprintf("%.2fx", x)
		}
		spread := "-"
		if r.Samples[0] > 1 || r.Samples[1] > 1 {
			spread = fmt.Sprintf("%.0f%% / %.0f%%", 100*r.Spread[0], 100*r.Spread[1])
		}
		n := fmt.Sprint(r.Samples[0])
		if r.Samples[1] != r.Samples[0] {
			n += "/" + fmt.Sprint(r.Samples[1])
		}
		if r.Setup {
			setup = append(setup, []string{r.Scenario, r.Keys, r.Benchmark,
				fmt.Sprintf("%.2f", r.Median[0]), fmt.Sprintf("%.2f", r.Median[1]), ratio, n, spread})
			continue
		}
		target := ""
		if t, ok := TargetFor(r.Scenario, r.Benchmark); ok {
			verdict := "met"
			if r.Ratio() < t {
				verdict = "MISSED"
			}
			target = fmt.Sprintf(">= %.1fx %s", t, verdict)
		}
		line := []string{r.Scenario, r.Keys, r.Benchmark,
			fmt.Sprintf("%.0f", r.Median[0]), fmt.Sprintf("%.0f", r.Median[1]), ratio, target}
		if withRSS {
			var ra, rb, rr string
			if run := [2]string{r.Scenario, r.Keys}; !rssShown[run] {
				rssShown[run] = true
				ra, rb, rr = mib(r.RSSKiB[0]), mib(r.RSSKiB[1]), "-"
				if x := r.RSSRatio(); x > 0 {
					verdict := "met"
					if x > MaxRSSRatio {
						verdict = "MISSED"
					}
					rr = fmt.Sprintf("%.2fx %s", x, verdict)
				}
			}
			line = append(line, ra, rb, rr)
		}
		main = append(main, append(line, n, spread))
	}
	header := []string{"scenario", "keys", "benchmark", a + " ops/s", b + " ops/s", a + "/" + b, "target"}
	right := []bool{false, false, false, true, true, true, false}
	if withRSS {
		header = append(header, a+" RSS MiB", b+" RSS MiB", fmt.Sprintf("RSS %s/%s (<= %.1fx)", a, b, MaxRSSRatio))
		right = append(right, true, true, false)
	}
	header = append(header, "n", "spread "+a+"/"+b)
	right = append(right, true, true)
	if err := writeAligned(w, header, main, right); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "(ops/sec: median of n samples per engine = %d runs x repeats per run; spread = (max-min)/median)\n", rep.Runs); err != nil {
		return err
	}
	if withRSS {
		floor := ""
		if rep.ParentPeakKiB > 0 {
			floor = fmt.Sprintf("; none can read below the parent's own peak, %.0f MiB", float64(rep.ParentPeakKiB)/1024)
		}
		if _, err := fmt.Fprintf(w, "(RSS: peak resident set of the scenario's process, one per engine run, median of %d runs, from wait4's ru_maxrss%s)\n", rep.Runs, floor); err != nil {
			return err
		}
	}
	if len(setup) > 0 {
		if _, err := fmt.Fprintf(w, "\nSteps timed in seconds (median of %d runs; flush and compact are not part of any read figure; batch-apply + batch-flush make up bigbatch):\n", rep.Runs); err != nil {
			return err
		}
		header := []string{"scenario", "keys", "step", a + " s", b + " s", "speedup", "n", "spread " + a + "/" + b}
		if err := writeAligned(w, header, setup, []bool{false, false, false, true, true, true, true, true}); err != nil {
			return err
		}
	}
	return nil
}

// writeAligned prints header and rows with columns padded to their widest
// cell, right-aligned where right says so, two spaces apart.
func writeAligned(w io.Writer, header []string, rows [][]string, right []bool) error {
	width := make([]int, len(header))
	for _, r := range append([][]string{header}, rows...) {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	line := func(r []string) error {
		var b strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if i > 0 {
				b.WriteString("  ")
			}
			if right[i] {
				b.WriteString(pad + c)
			} else {
				b.WriteString(c + pad)
			}
		}
		_, err := fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
		return err
	}
	if err := line(header); err != nil {
		return err
	}
	for _, r := range rows {
		if err := line(r); err != nil {
			return err
		}
	}
	return nil
}

// WriteJSON writes the report (settings, every sample and engine run, and
// the table rows) as one indented JSON document.
func (rep *Report) WriteJSON(w io.Writer, machine Machine) error {
	type jsonRow struct {
		Scenario  string    `json:"scenario"`
		Keys      string    `json:"keys"`
		Benchmark string    `json:"benchmark"`
		Setup     bool      `json:"setup,omitempty"`
		Median    []float64 `json:"median"`
		Spread    []float64 `json:"spread"`
		Ratio     float64   `json:"ratio"`
		RSSKiB    []float64 `json:"rss_kib,omitempty"`
		RSSRatio  float64   `json:"rss_ratio,omitempty"`
	}
	doc := struct {
		Machine Machine   `json:"machine"`
		Report  *Report   `json:"report"`
		Rows    []jsonRow `json:"rows"`
	}{Machine: machine, Report: rep}
	for _, r := range rep.Rows() {
		jr := jsonRow{r.Scenario, r.Keys, r.Benchmark, r.Setup, r.Median, r.Spread, r.Ratio(), nil, r.RSSRatio()}
		if jr.RSSRatio > 0 {
			jr.RSSKiB = r.RSSKiB
		}
		doc.Rows = append(doc.Rows, jr)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
