package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigildb/vigil/bench/peers"
)

// TestMain lets this test binary be the child process of isolated runs,
// as the vs binary is: run re-executes os.Executable().
func TestMain(m *testing.M) {
	if peers.IsChild(os.Args) {
		os.Exit(peers.ChildMain(os.Stdin, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestRunSmoke is .ci/run's smoke run in miniature: one scaled-down run of
// one scenario, with the table on stdout, progress on stderr and the JSON.
func TestRunSmoke(t *testing.T) {
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	args := []string{"--runs", "1", "--num-scale", "0.001", "--scenarios", "fillrandom,memtable",
		"--dir", dir, "--json", jsonPath, "--cpuprofile", filepath.Join(dir, "prof")}
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"CPU:", "GOMAXPROCS", "go1.", "pebble crc32c", "SCALED:", "vigil/pebble",
		"fillrandom  dbbench  fillrandom", "memtable    dbbench  readreverse", "Load avg", "one child process per", "vigil RSS MiB", "ru_maxrss"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(stderr.String(), "\n"); n != 4 {
		t.Errorf("stderr has %d lines, want 4 progress lines:\n%s", n, stderr.String())
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Report struct {
			Samples    []json.RawMessage
			EngineRuns []struct {
				MaxRSSKiB int64 `json:"max_rss_kib"`
			} `json:"engine_runs"`
		}
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	// fillrandom 1 + memtable (fillseq, readrandom, 10 readseq, 10 readreverse) = 23, x 2 engines.
	if len(doc.Report.Samples) != 46 {
		t.Errorf("%d samples in the JSON", len(doc.Report.Samples))
	}
	if len(doc.Report.EngineRuns) != 4 {
		t.Errorf("%d engine runs in the JSON", len(doc.Report.EngineRuns))
	}
	for _, r := range doc.Report.EngineRuns {
		if r.MaxRSSKiB <= 0 {
			t.Errorf("engine run without RSS: %+v", r)
		}
	}
	profiles, _ := filepath.Glob(filepath.Join(dir, "prof-*.pprof"))
	if len(profiles) != 4 {
		t.Errorf("profiles: %v", profiles)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "vs-*"))
	if len(left) != 0 {
		t.Errorf("temporary directories left: %v", left)
	}
}

// TestRunInProcess: --isolate=false runs in this process, without RSS.
func TestRunInProcess(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := []string{"--runs", "1", "--num-scale", "0.001", "--scenarios", "fillrandom-nocompress,bigbatch", "--dir", dir, "--isolate=false"}
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"this one process", "fillrandom-nocompress  dbbench  fillrandom", "bigbatch               dbbench  bigbatch",
		"compression=none", "key_size=32", "batch-apply"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "RSS MiB") {
		t.Errorf("in-process run shows RSS:\n%s", out)
	}
}

// TestRunKeys: --keys runs each scenario once per shape, geth with its own
// hashed keys only.
func TestRunKeys(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"--runs", "1", "--num-scale", "0.001", "--scenarios", "fillrandom,geth", "--keys", "decimal,prefixed",
		"--dir", t.TempDir(), "--isolate=false"}
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"Keys:     decimal, prefixed", "keys=hashed", "fillrandom  decimal   fillrandom", "fillrandom  prefixed  fillrandom",
		"geth        hashed    fillrandom", "geth        hashed    readrandom"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "dbbench  fillrandom") || strings.Count(out, "geth        hashed    fillrandom") != 1 {
		t.Errorf("wrong runs:\n%s", out)
	}
}

func TestRunUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--runs", "0"},
		{"--scenarios", "bogus"},
		{"--keys", "bogus"},
		{"--keys", ""},
		{"--seed", "0"},
		{"--num-scale", "0"},
		{"--compression_type", "zstd"},
		{"--checksum_type", "9"},
		{"--block_size", "1"},
		{"--memtable_protection_bytes_per_key", "3"},
		{"--no-such-flag"},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, stderr.String())
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: printed to stdout: %q", args, stdout.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "-num-scale") {
		t.Errorf("-h: exit %d, %q", code, stderr.String())
	}
}

func TestRunCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"--runs", "1", "--num-scale", "0.001", "--dir", t.TempDir()}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "canceled") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}
