package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

var live = flag.Bool("vsrocksdb.live", false, "also run a real, scaled-down comparison against the installed db_bench (slow)")

func TestParseResults(t *testing.T) {
	out := "Set seed to 1 because --seed was 0\n" +
		"DB path: [/tmp/x]\n" +
		"fillseq      :       1.099 micros/op 908445 ops/sec 0.033 seconds 30000 operations;  100.5 MB/s\n" +
		"... finished 100 ops\r... finished 200 ops\rreadrandom   :       1.644 micros/op 608146 ops/sec 0.822 seconds 500000 operations;   67.3 MB/s (250000 of 250000 found)\n" +
		"\n" +
		"Running benchmark for 2 times\n" +
		"readseq      :       0.030 micros/op 33000000 ops/sec 0.008 seconds 250000 operations; 3600.0 MB/s\n" +
		"readseq      :       0.031 micros/op 32000000 ops/sec 0.008 seconds 250000 operations; 3500.0 MB/s\n" +
		"readseq [AVG 2 runs] : 32500000 (± 980000) ops/sec; 3550.0 (± 98.0) MB/sec\n" +
		"readseq [AVG    2 runs] : 32500000 (± 980000) ops/sec; 3550.0 (± 98.0) MB/sec\n" +
		"readseq [MEDIAN 2 runs] : 32500000 ops/sec; 3550.0 MB/sec\n" +
		"deleteseq    :       5.325 micros/op 187671 ops/sec 0.107 seconds 20000 operations;\n" +
		"xxh3         :       0.16 micros/op 6250000 ops/sec; 24000.0 MB/s (4096 per op)\n"
	got := parseResults(out)
	want := []benchFigure{{"fillseq", 908445, 100.5, nil}, {"readrandom", 608146, 67.3, nil}, {"readseq", 32500000, 3550, nil},
		{"deleteseq", 187671, 0, nil}, {"xxh3", 6250000, 24000, nil}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("figure %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestDBBenchFlagsAdapt(t *testing.T) {
	known := map[string]bool{"benchmarks": true, "num": true}
	out, why := dbBenchFlags([]string{"--benchmarks=fillseq", "--num=5", "--paranoid_memory_checks=false"}, known)
	if why != "" || strings.Join(out, " ") != "--benchmarks=fillseq --num=5" {
		t.Errorf("off flag not dropped: %v %q", out, why)
	}
	if _, why := dbBenchFlags([]string{"--paranoid_memory_checks=true"}, known); !strings.Contains(why, "--paranoid_memory_checks") {
		t.Errorf("reason %q", why)
	}
	if out, _ := dbBenchFlags([]string{"--x=1"}, nil); len(out) != 1 {
		t.Error("nil known set should keep every flag")
	}
}

func TestSkipsWithoutDBBench(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--db_bench", filepath.Join(t.TempDir(), "no-db_bench")}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "skipping") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"--runs", "0"}, {"--scale", "0"}, {"--scenarios", "bogus"}, {"extra"}, {"--bogus"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// fakeScript writes an executable shell script.
func fakeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// needShell skips a test that runs shell scripts standing in for the
// engines where there is no sh.
func needShell(t *testing.T) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("shell scripts")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
}

// TestFakeEngines drives the whole comparison with two scripts standing in
// for vigil and db_bench: alternation, n/a cases, the table and the JSON.
func TestFakeEngines(t *testing.T) {
	needShell(t)
	dir := t.TempDir()
	vig := fakeScript(t, dir, "vigil", `case "$1" in version) echo "vigil (fake)"; exit 0;; esac
case "$*" in *crc64*) echo "crc64        :       0.300 micros/op 3333333 ops/sec 0.3 seconds 1000 operations; 13000.0 MB/s (4096 per op)"; exit 0;; esac
echo "kvbench: --memtablerep=vector: not applicable to Vigil; the skiplist ran" >&2
echo "crc32c       :       0.150 micros/op 6666666 ops/sec 0.1 seconds 1000 operations; 26000.0 MB/s (4096 per op)"
echo "xxhash       :       0.500 micros/op 2000000 ops/sec 0.5 seconds 1000 operations; 7800.0 MB/s (4096 per op)"
`)
	dbb := fakeScript(t, dir, "db_bench", `case "$1" in --version) echo "db_bench version 0.0 (fake)"; exit 0;; --helpxml) echo "<flag><name>benchmarks</name></flag><flag><name>block_size</name></flag><flag><name>num</name></flag><flag><name>db</name></flag>"; exit 1;; esac
echo "WARNING: Assertions are enabled; benchmarks unnecessarily slow"
echo "crc32c       :       0.200 micros/op 5000000 ops/sec 0.2 seconds 1000 operations; 19500.0 MB/s (4096 per op)"
echo "xxhash       :       0.700 micros/op 1500000 ops/sec 0.7 seconds 1000 operations; 5800.0 MB/s (4096 per op)"
`)
	js := filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--vigil", vig, "--db_bench", dbb, "--runs", "2", "--scenarios", "checksum",
		"--scale", "0.001", "--dir", dir, "--json", js}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"vigil/db_bench", "vigil RSS MiB", "db_bench RSS MiB", "checksum  4096 B", "1.33x",
		"checksum/4096 B (crc64): db_bench has no crc64 benchmark", "Assertions are enabled", "vigil: --memtablerep=vector", "SCALED:"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Report Report `json:"report"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	// 2 runs x (vigil 2 + db_bench 2 benchmarks) + 2 runs x vigil's crc64.
	if n := len(doc.Report.Samples); n != 10 {
		t.Fatalf("%d samples", n)
	}
	firsts := map[string]int{}
	for _, s := range doc.Report.Samples {
		if s.Case == "4096 B" && s.First {
			firsts[s.Engine+"/"+s.Bench]++
		}
		if s.RSSKiB <= 0 {
			t.Errorf("sample without RSS: %+v", s)
		}
	}
	if firsts["vigil/crc32c"] != 1 || firsts["db_bench/crc32c"] != 1 {
		t.Errorf("engines did not alternate: %v", firsts)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "vsrocksdb-*"))
	if len(left) != 0 {
		t.Errorf("temporary directories left: %v", left)
	}
}

// TestLive runs the real thing, scaled down, when asked to
// (go test ./bench/cmd/vsrocksdb -vsrocksdb.live) and db_bench is installed.
func TestLive(t *testing.T) {
	if !*live {
		t.Skip("pass -vsrocksdb.live to compare with the installed db_bench")
	}
	if _, err := exec.LookPath("db_bench"); err != nil {
		t.Skip("db_bench not installed")
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--runs", "1", "--scale", "0.01"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	t.Log(stdout.String())
	for _, want := range []string{"memtable  paranoid=off", "fillseq   checksum=4", "xxhash"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
}
