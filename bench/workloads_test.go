package bench

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// runKV runs kvbench in-process with a command line and returns stdout.
func runKV(t *testing.T, args ...string) string {
	t.Helper()
	c := NewCLI()
	if err := c.Parse(args); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.Config()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	cfg.Stdout, cfg.Stderr = &out, &errOut
	cfg.DB = filepath.Join(t.TempDir(), "db")
	if err := NewRunner(cfg).Run(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return out.String()
}

var resultLine = regexp.MustCompile(`^(\S+)\s+:\s+[\d.]+ micros/op \d+ ops/sec [\d.]+ seconds (\d+) operations;(.*)$`)

// results returns "name ops message" for each result line, in order.
func results(out string) []string {
	var rs []string
	for _, l := range strings.Split(out, "\n") {
		m := resultLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		msg := m[3]
		if i := strings.Index(msg, "("); i >= 0 {
			msg = msg[i:]
		} else {
			msg = ""
		}
		rs = append(rs, strings.TrimSpace(m[1]+" "+m[2]+" "+msg))
	}
	return rs
}

// checkAgainstDBBench compares kvbench's result lines (name, operations,
// message) with what db_bench 7.8.3 printed for the same command line.
func checkAgainstDBBench(t *testing.T, out string, want []string) {
	t.Helper()
	got := results(out)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("results differ from db_bench's:\n got\n  %s\nwant\n  %s\noutput:\n%s",
			strings.Join(got, "\n  "), strings.Join(want, "\n  "), out)
	}
}

// The expected lines below are db_bench 7.8.3's (Debian rocksdb-tools)
// for the same flags, timings left out: kvbench draws the same keys, so
// found counts agree exactly.

func TestSameKeysAsDBBench(t *testing.T) {
	out := runKV(t, "--benchmarks=fillrandom,seekrandom,readrandom,updaterandom,readrandomwriterandom,readmissing,deleterandom,readrandom,seekrandom,deleteseq,readrandom",
		"--num=4000", "--seed=1")
	checkAgainstDBBench(t, out, []string{
		"fillrandom 4000",
		"seekrandom 4000 (2517 of 4000 found)",
		"readrandom 4000 (2565 of 4000 found)",
		"updaterandom 4000 ( updates:4000 found:3044)",
		"readrandomwriterandom 4000 ( reads:3600 writes:400 total:4000 found:3133)",
		"readmissing 4000 (0 of 4000 found)",
		"deleterandom 4000",
		"readrandom 4000 (1274 of 4000 found)",
		"seekrandom 4000 (1311 of 4000 found)",
		"deleteseq 4000",
		"readrandom 4000 (0 of 4000 found)",
	})
	// db_bench prints MB/s only where bytes moved, and an empty line after
	// the messages of readrandom and seekrandom.
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "seekrandom ") && strings.Contains(l, "MB/s") {
			t.Errorf("seekrandom without --seek_nexts counts no bytes: %q", l)
		}
		if strings.HasPrefix(l, "deleteseq ") && !strings.HasSuffix(l, "operations;") {
			t.Errorf("deleteseq line ends %q", l)
		}
	}
	if !strings.Contains(out, "(2517 of 4000 found)\n\n") {
		t.Error("no empty line after seekrandom's line")
	}
}

func TestBatchesThreadsAndSeekNextsAsDBBench(t *testing.T) {
	out := runKV(t, "--benchmarks=fillrandom,readrandom,deleterandom,readrandom,fillbatch,readrandom,seekrandom",
		"--num=4000", "--seed=7", "--batch_size=7", "--threads=2", "--seek_nexts=3", "--reverse_iterator")
	// Two threads: the counts are summed, the message is one thread's, as
	// db_bench keeps one thread's message when it merges their figures.
	checkAgainstDBBench(t, out, []string{
		"fillrandom 7994",
		"readrandom 8000 (3446 of 4000 found)",
		"deleterandom 7994",
		"readrandom 8000 (494 of 4000 found)",
		"fillbatch 8000",
		"readrandom 8000 (4000 of 4000 found)",
		"seekrandom 8000 (4000 of 4000 found)",
	})
}

func TestFillSyncAndFill100KAsDBBench(t *testing.T) {
	if testing.Short() {
		t.Skip("500 synced writes")
	}
	out := runKV(t, "--benchmarks=fillsync,readrandom,fill100K,readrandom,readseq,readreverse", "--num=5000", "--seed=3", "--writes=500")
	checkAgainstDBBench(t, out, []string{
		"fillsync 500 (5 ops)",
		"readrandom 5000 (4 of 5000 found)",
		"fill100K 500 (5 ops)",
		"readrandom 5000 (2 of 5000 found)",
		"readseq 5",
		"readreverse 5",
	})
}

// TestRepeatLines: db_bench 7.8's [AVG n runs] / [MEDIAN n runs] lines,
// without MB/sec when a benchmark moves no bytes, and [CI95 n runs] with
// --confidence_interval_only.
func TestRepeatLines(t *testing.T) {
	out := runKV(t, "--benchmarks=fillseq[-X3],deleteseq[-X2],readrandom[-W1-X2]", "--num=500", "--seed=1", "--confidence_interval_only")
	for _, re := range []string{
		`(?m)^Running benchmark for 3 times$`,
		`(?m)^fillseq \[CI95 2 runs\] : \(-?\d+, \d+\) ops/sec; \(-?[\d.]+, [\d.]+\) MB/sec$`,
		`(?m)^fillseq \[AVG    3 runs\] : \d+ \(± \d+\) ops/sec; +[\d.]+ \(± [\d.]+\) MB/sec$`,
		`(?m)^fillseq \[MEDIAN 3 runs\] : \d+ ops/sec; +[\d.]+ MB/sec$`,
		`(?m)^deleteseq \[CI95 2 runs\] : \(-?\d+, \d+\) ops/sec$`,
		`(?m)^deleteseq \[AVG    2 runs\] : \d+ \(± \d+\) ops/sec$`,
		`(?m)^deleteseq \[MEDIAN 2 runs\] : \d+ ops/sec$`,
		`(?m)^Warming up benchmark by running 1 times$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output lacks %s:\n%s", re, out)
		}
	}
	if strings.Contains(out, "ms/op") {
		t.Error("db_bench 7.8 prints no ms/op")
	}
}

func TestStatisticsAndHistogram(t *testing.T) {
	out := runKV(t, "--benchmarks=fillseq,flush,readrandom,seekrandom,readseq", "--num=3000", "--seed=1", "--statistics", "--histogram",
		"--seek_nexts=1")
	for _, want := range []string{
		"STATISTICS:\n",
		"rocksdb.block.cache.hit COUNT : ",
		"rocksdb.block.cache.miss COUNT : ",
		"rocksdb.number.keys.written COUNT : 3000\n",
		"rocksdb.number.keys.read COUNT : 3000\n",
		"rocksdb.bytes.written COUNT : 393000\n", // 3000 batches of 131 bytes, as RocksDB counts
		"rocksdb.bytes.read COUNT : 300000\n",
		"rocksdb.number.db.seek COUNT : 3001\n", // 3000 seeks + readseq's First
		"rocksdb.number.db.next COUNT : 6000\n",
		"rocksdb.num.iterator.created COUNT : 3001\n",
		"rocksdb.wal.bytes COUNT : 393000\n",
		"rocksdb.db.get.micros P50 : ",
		"COUNT : 3000 SUM : ",
		"Microseconds per write:\nCount: 3000 Average: ",
		"Microseconds per read:\n",
		"Microseconds per seek:\n",
		"Percentiles: P50: ",
		"------------------------------------------------------\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if !regexp.MustCompile(`(?m)^\[       0,       1 \]|^\(\s+\d+,\s+\d+ \]\s+\d+\s+[\d.]+%\s+[\d.]+% #*$`).MatchString(out) {
		t.Errorf("no histogram bucket line in db_bench's format:\n%s", out)
	}
}

func TestUseExistingDBSkipsFills(t *testing.T) {
	out := runKV(t, "--benchmarks=fillseq,readrandom", "--num=100", "--seed=1", "--use_existing_db")
	if !strings.Contains(out, "fillseq      : skipped (--use_existing_db is true)") {
		t.Errorf("fill not skipped:\n%s", out)
	}
}

func TestDBBenchBucketBounds(t *testing.T) {
	want := []float64{1, 2, 3, 4, 6, 10, 15, 22, 34, 51, 76, 110, 170, 250, 380, 580, 870, 1300, 1900, 2900, 4400, 6600}
	for i, w := range want {
		if dbBenchBuckets[i] != w {
			t.Fatalf("bucket %d = %v, want %v (all: %v)", i, dbBenchBuckets[i], w, dbBenchBuckets[:len(want)])
		}
	}
	for i := 1; i < len(dbBenchBuckets); i++ {
		if dbBenchBuckets[i] <= dbBenchBuckets[i-1] {
			t.Fatalf("bounds not increasing at %d", i)
		}
	}
	if coarseIndex(0.5) != 0 || coarseIndex(1) != 1 || coarseIndex(5.9) != 4 || coarseIndex(1e30) != len(dbBenchBuckets)-1 {
		t.Error("coarseIndex")
	}
}

func TestUnknownAndUnsupportedBenchmarks(t *testing.T) {
	for name, want := range map[string]string{"nosuch": "unknown benchmark", "mixgraph": "db_bench's, but kvbench does not have it"} {
		cfg := Config{Benchmarks: name, Num: 10, Reads: -1, Writes: -1, DB: t.TempDir()}
		var out bytes.Buffer
		cfg.Stdout, cfg.Stderr = &out, &out
		err := NewRunner(cfg).Run()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
}
