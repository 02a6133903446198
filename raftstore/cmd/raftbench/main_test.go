package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vigildb/vigil/raftstore/internal/benchsuite"
)

// TestMain lets the test binary be raftbench's sustained child, as
// os.Executable() is the test binary in TestSustainedSmoke.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == childArg {
		os.Exit(childMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestResultLine(t *testing.T) {
	want := benchsuite.SustainedResult{Engine: "raftwal", Appends: 10, Entries: 640, Bytes: 163840, Compactions: 1,
		Elapsed: 2 * time.Second, P50: time.Millisecond, P99: 3 * time.Millisecond, P999: 4 * time.Millisecond,
		Max: 5 * time.Millisecond, CompactMax: 6 * time.Millisecond}
	line, err := formatResult(want)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(line, "\n") || !strings.HasPrefix(line, resultPrefix) {
		t.Fatalf("result line %q", line)
	}
	got, err := parseResult([]byte("noise from the engine\n" + line + "\nmore noise\n"))
	if err != nil || got != want {
		t.Fatalf("parseResult = %+v, %v; want %+v", got, err, want)
	}
	if got.EntriesPerSec() != 320 || got.AppendsPerSec() != 5 || got.MBPerSec() != 163840/2/1e6 {
		t.Fatalf("rates %v %v %v", got.AppendsPerSec(), got.EntriesPerSec(), got.MBPerSec())
	}
	for _, bad := range []string{
		"",
		"no result here\n",
		line + "\n" + line + "\n",
		resultPrefix + "{not json\n",
		resultPrefix + `{"engine":"vigil"}` + "\n", // no appends
	} {
		if _, err := parseResult([]byte(bad)); err == nil {
			t.Errorf("parseResult(%q) succeeded", bad)
		}
	}
}

func TestChildArgs(t *testing.T) {
	cfg := benchsuite.Sustained{Duration: 1500 * time.Millisecond, Batch: 3, Entry: 7, CompactEvery: 11, Trailing: 13}
	args := childArgs("vigil", "/x", cfg)
	if args[0] != childArg {
		t.Fatalf("args %q", args)
	}
	// A child with a bad engine or no directory exits 2 without running.
	var out, errOut bytes.Buffer
	if code := childMain([]string{"-engine", "nope", "-dir", "/x"}, &out, &errOut); code != 2 || out.Len() != 0 {
		t.Fatalf("bad engine: exit %d, output %q", code, out.String())
	}
	if code := childMain(childArgs("vigil", "", cfg)[1:], &out, &errOut); code != 2 || out.Len() != 0 {
		t.Fatalf("no dir: exit %d, output %q", code, out.String())
	}
}

func TestParseEngines(t *testing.T) {
	es, err := parseEngines("raftwal, vigil")
	if err != nil || len(es) != 2 || es[0].Name != "raftwal" || es[1].Name != "vigil" {
		t.Fatalf("parseEngines = %v, %v", es, err)
	}
	for _, bad := range []string{"", "vigil,", "vigil,vigil", "rocks"} {
		if _, err := parseEngines(bad); err == nil {
			t.Errorf("parseEngines(%q) succeeded", bad)
		}
	}
}

func TestRatios(t *testing.T) {
	if got := fmtRatios(perRound([]float64{2, 9, 3}, []float64{1, 3, 1})); got != "3.00x [2.00 3.00 3.00]" {
		t.Errorf("fmtRatios = %q", got)
	}
	if got := fmtRatios(nil); got != "n/a" {
		t.Errorf("fmtRatios(nil) = %q", got)
	}
	if median([]float64{4, 1, 3, 2}) != 2.5 || median([]float64{5}) != 5 {
		t.Error("median")
	}
}

// TestSustainedSmoke runs the sustained mode for a moment per engine, each
// in a child process (this test binary), and prints its tables.
func TestSustainedSmoke(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A -race child would sleep 1 s at exit (the race runtime's default).
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cfg := benchsuite.Sustained{Duration: 300 * time.Millisecond, Batch: 16, Entry: 256, CompactEvery: 256, Trailing: 256}
	var progress bytes.Buffer
	res, err := sustainedRounds(exe, benchsuite.Engines, cfg, 1, t.TempDir(), &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	for ei, e := range benchsuite.Engines {
		r := res[0][ei]
		if r.Engine != e.Name || r.Appends == 0 || r.Entries != 16*r.Appends || r.Bytes != 256*r.Entries || r.Max < r.P50 {
			t.Errorf("%s: %+v", e.Name, r)
		}
		if r.MaxRSSKiB <= 1024 { // a Go process with a store is well above 1 MiB
			t.Errorf("%s: peak RSS %d KiB", e.Name, r.MaxRSSKiB)
		}
	}
	var out bytes.Buffer
	printSustained(&out, benchsuite.Engines, res)
	for _, want := range []string{"| vigil |", "| boltdb |", "| raftwal |", "| vs vigil |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	t.Logf("\n%s\n%s", progress.String(), out.String())
}

// TestBenchSmoke runs two benchmarks for one round on every engine,
// raft-wal included, and prints the table.
func TestBenchSmoke(t *testing.T) {
	old := flag.Lookup("test.benchtime").Value.String()
	if err := flag.Set("test.benchtime", "20x"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set("test.benchtime", old) })
	var cases []benchsuite.Case
	for _, c := range benchsuite.Cases {
		if c.Name == "GetLog" || c.Name == "DeleteRange" {
			cases = append(cases, c)
		}
	}
	var progress, out bytes.Buffer
	res, err := benchRounds(benchsuite.Engines, cases, 2, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	printBench(&out, benchsuite.Engines, cases, res)
	if got := len(res[1][2].ns); got != 0 { // DeleteRange on raftwal
		t.Errorf("DeleteRange ran %d times on raftwal", got)
	}
	if !strings.Contains(out.String(), "| DeleteRange |") || !strings.Contains(out.String(), "n/a") {
		t.Errorf("table:\n%s", out.String())
	}
	t.Logf("\n%s\n%s", progress.String(), out.String())
}
