package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestParseHistograms feeds the --histogram=1 output of a tiny real run of
// each engine (fillrandom, readrandom, seekrandom of 2000 keys, captured in
// testdata) and checks every benchmark's latency summary.
func TestParseHistograms(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []benchFigure
	}{
		{"db_bench_histogram.txt", []benchFigure{
			{"fillrandom", 153256, 17, &Latency{Min: 1, Median: 1.8132, Max: 4115, P50: 1.81, P99: 7.85, P999: 2900, P9999: 4115}},
			{"readrandom", 919117, 64.5, &Latency{Min: 0, Median: 0.559, Max: 97, P50: 0.56, P99: 2.78, P999: 76, P9999: 97}},
			{"seekrandom", 301522, 0, &Latency{Min: 0, Median: 0.6127, Max: 4112, P50: 0.61, P99: 3.62, P999: 110, P9999: 4100}},
		}},
		{"kvbench_histogram.txt", []benchFigure{
			{"fillrandom", 968134, 107.1, &Latency{Min: 0.316, Median: 0.514, Max: 162.106, P50: 0.51, P99: 3.84, P999: 131.07, P9999: 162.11}},
			{"readrandom", 2232075, 153.8, &Latency{Min: 0.104, Median: 0.202, Max: 44.966, P50: 0.2, P99: 0.58, P999: 31.74, P9999: 44.85}},
			{"seekrandom", 685718, 0, &Latency{Min: 0.242, Median: 0.376, Max: 436.776, P50: 0.38, P99: 29.78, P999: 58.37, P9999: 436.78}},
		}},
	} {
		data, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		got := parseResults(string(data))
		if len(got) != len(tc.want) {
			t.Fatalf("%s: got %+v", tc.file, got)
		}
		for i, w := range tc.want {
			g := got[i]
			if g.name != w.name || g.ops != w.ops || g.mbs != w.mbs || g.lat == nil || *g.lat != *w.lat {
				t.Errorf("%s figure %d: %+v %+v, want %+v %+v", tc.file, i, g, g.lat, w, w.lat)
			}
		}
	}
}

// TestParseHistogramFirstOnly checks that only the first histogram after a
// result line counts (a benchmark with several operation types prints its
// main one first) and that lines without a benchmark are ignored.
func TestParseHistogramFirstOnly(t *testing.T) {
	out := "Percentiles: P50: 9 P75: 9 P99: 9 P99.9: 9 P99.99: 9\n" +
		"readwhilewriting :       2.000 micros/op 500000 ops/sec 1.0 seconds 500000 operations; (1 of 1 found)\n" +
		"Microseconds per read:\nMin: 1  Median: 2  Max: 30\nPercentiles: P50: 2.00 P75: 3.00 P99: 10.00 P99.9: 20.00 P99.99: 30.00\n" +
		"Microseconds per write:\nMin: 5  Median: 6  Max: 900\nPercentiles: P50: 6.00 P75: 7.00 P99: 80.00 P99.9: 90.00 P99.99: 900.00\n"
	got := parseResults(out)
	if len(got) != 1 || got[0].lat == nil || got[0].lat.P99 != 10 || got[0].lat.Max != 30 {
		t.Fatalf("got %+v", got)
	}
}

func TestLargeScenario(t *testing.T) {
	all, err := SelectScenarios("all")
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(all, func(s Scenario) bool { return s.Name == "large" }) {
		t.Error("large is part of all")
	}
	sel, err := SelectScenarios("large")
	if err != nil || len(sel) != 1 {
		t.Fatalf("%v %v", sel, err)
	}
	cs := sel[0].Cases(1)
	if len(cs) != 1 || !cs[0].Latency || cs[0].ShmDB {
		t.Fatalf("cases %+v", cs)
	}
	flags := strings.Join(cs[0].Flags, " ")
	for _, want := range []string{"--benchmarks=fillrandom,readrandom,seekrandom", "--num=10000000", "--reads=1000000",
		"--seek_nexts=0", "--cache_size=67108864", "--write_buffer_size=67108864", "--compression_type=snappy",
		"--histogram=1", "--threads=1", "--bloom_bits=10", "--value_size=100", "--key_size=16"} {
		if !strings.Contains(flags, want) {
			t.Errorf("flags lack %s: %s", want, flags)
		}
	}
	small := strings.Join(sel[0].Cases(0.01)[0].Flags, " ")
	for _, want := range []string{"--num=100000", "--reads=10000", "--cache_size=1048576", "--write_buffer_size=1048576"} {
		if !strings.Contains(small, want) {
			t.Errorf("scaled flags lack %s: %s", want, small)
		}
	}
	if got := strings.Join(sel[0].Cases(0.5)[0].Flags, " "); !strings.Contains(got, "--cache_size=33554432") {
		t.Errorf("half scale: %s", got)
	}
}

// TestFakeLatency drives the large scenario with two scripts that print
// histograms and write a file into their DB directory: the latency table,
// the DB size, the goals and the JSON.
func TestFakeLatency(t *testing.T) {
	needShell(t)
	dir := t.TempDir()
	// Both write 2 MiB into the DB directory (--db=...).
	body := func(fill, read, seek, readP99, fillMax string) string {
		return `for a; do case "$a" in --db=*) db="${a#--db=}";; esac; done
mkdir -p "$db" && head -c 2097152 /dev/zero > "$db/000001.sst"
echo "fillrandom   :       1.000 micros/op ` + fill + ` ops/sec 1.0 seconds 1000 operations;  100.0 MB/s"
echo "Microseconds per write:"
echo "Min: 0.5  Median: 1.0  Max: ` + fillMax + `"
echo "Percentiles: P50: 1.00 P75: 1.50 P99: 4.00 P99.9: 50.00 P99.99: 900.00"
echo "readrandom   :       1.000 micros/op ` + read + ` ops/sec 1.0 seconds 1000 operations;  100.0 MB/s (630 of 1000 found)"
echo "Microseconds per read:"
echo "Min: 0.5  Median: 1.0  Max: 300"
echo "Percentiles: P50: 1.00 P75: 1.50 P99: ` + readP99 + ` P99.9: 40.00 P99.99: 200.00"
echo "seekrandom   :       1.000 micros/op ` + seek + ` ops/sec 1.0 seconds 1000 operations; (630 of 1000 found)"
echo "Microseconds per seek:"
echo "Min: 0.5  Median: 1.0  Max: 400"
echo "Percentiles: P50: 1.00 P75: 1.50 P99: 12.00 P99.9: 45.00 P99.99: 300.00"
`
	}
	vig := fakeScript(t, dir, "vigil", `case "$1" in version) echo "vigil (fake)"; exit 0;; esac
`+body("800000", "300000", "150000", "5.00", "2500"))
	dbb := fakeScript(t, dir, "db_bench", `case "$1" in --version) echo "db_bench version 0.0 (fake)"; exit 0;; --helpxml) exit 1;; esac
`+body("400000", "100000", "120000", "8.00", "1000"))
	js := filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--vigil", vig, "--db_bench", dbb, "--runs", "1", "--scenarios", "large",
		"--scale", "0.001", "--dir", dir, "--json", js}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"Latency, microseconds", "vigil P99.9", "db_bench max", "vigil DB MiB",
		"large     10M keys  readrandom       5.00          8.00", "2.00",
		"readrandom ops/s 3.00x (>= 1.5x): met", "readrandom P99 5.00 us vs 8.00 us (<=): met",
		"seekrandom ops/s 1.25x (>= 1.5x): MISSED", "seekrandom P99 12.00 us vs 12.00 us (<=): met",
		"fillrandom slowest write 2500 us vs 1000 us (<= 2x and <= 10000 us): MISSED", "peak RSS"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr.String(), "readrandom 300000/s (P99 5.0 us, max 300 us)") || !strings.Contains(stderr.String(), "DB 2.0 MiB") {
		t.Errorf("progress lines:\n%s", stderr.String())
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Report Report `json:"report"`
		Rows   []Row  `json:"rows"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if n := len(doc.Report.Samples); n != 6 {
		t.Fatalf("%d samples", n)
	}
	for _, s := range doc.Report.Samples {
		if s.Latency == nil || s.Latency.P999 <= 0 || s.DBBytes != 2<<20 {
			t.Errorf("sample %+v (latency %+v)", s, s.Latency)
		}
	}
	if len(doc.Rows) != 3 || doc.Rows[0].MaxLat != [2]float64{2500, 1000} || doc.Rows[1].P99 != [2]float64{5, 8} {
		t.Errorf("rows %+v", doc.Rows)
	}
}
