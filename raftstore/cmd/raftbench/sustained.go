package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"time"

	"github.com/vigildb/vigil/raftstore/internal/benchsuite"
)

// childArg, as the first argument, makes raftbench a child that runs one
// sustained run (flags: childFlags) and prints its result on one line
// beginning with resultPrefix. It is not a flag of the command's own.
const (
	childArg     = "-raftbench-child"
	resultPrefix = "raftbench-result "
)

// childArgs returns the arguments that make a child run cfg on engine in
// dir.
func childArgs(engine, dir string, cfg benchsuite.Sustained) []string {
	return []string{childArg,
		"-engine", engine, "-dir", dir, "-duration", cfg.Duration.String(),
		"-batch", strconv.Itoa(cfg.Batch), "-entry", strconv.Itoa(cfg.Entry),
		"-compact-every", strconv.FormatUint(cfg.CompactEvery, 10), "-trailing", strconv.FormatUint(cfg.Trailing, 10)}
}

// childMain runs a child: args are what follows childArg. It returns the
// process's exit code.
func childMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("raftbench child", flag.ContinueOnError)
	fs.SetOutput(stderr)
	engine := fs.String("engine", "", "engine")
	dir := fs.String("dir", "", "existing empty directory for the store")
	var cfg benchsuite.Sustained
	fs.DurationVar(&cfg.Duration, "duration", 0, "")
	fs.IntVar(&cfg.Batch, "batch", 0, "")
	fs.IntVar(&cfg.Entry, "entry", 0, "")
	fs.Uint64Var(&cfg.CompactEvery, "compact-every", 0, "")
	fs.Uint64Var(&cfg.Trailing, "trailing", 0, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	e, ok := benchsuite.EngineByName(*engine)
	if !ok || *dir == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "raftbench child: bad arguments %q\n", args)
		return 2
	}
	res, err := benchsuite.RunSustained(e, *dir, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "raftbench child: %s: %v\n", e.Name, err)
		return 1
	}
	line, err := formatResult(res)
	if err != nil {
		fmt.Fprintf(stderr, "raftbench child: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, line)
	return 0
}

// formatResult returns the child's result line (without a newline).
func formatResult(r benchsuite.SustainedResult) (string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	return resultPrefix + string(b), nil
}

// parseResult finds the one result line in a child's output.
func parseResult(out []byte) (benchsuite.SustainedResult, error) {
	var res benchsuite.SustainedResult
	found := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte(resultPrefix))
		if !ok {
			continue
		}
		if found {
			return res, errors.New("two result lines")
		}
		if err := json.Unmarshal(rest, &res); err != nil {
			return res, fmt.Errorf("result line: %w", err)
		}
		found = true
	}
	if err := sc.Err(); err != nil {
		return res, err
	}
	if !found {
		return res, errors.New("no result line")
	}
	if res.Engine == "" || res.Appends <= 0 || res.Elapsed <= 0 {
		return res, fmt.Errorf("result line without a run: %+v", res)
	}
	return res, nil
}

// runChild runs engine in a child process exe (this binary) in a fresh
// directory under parent, removed afterwards, and returns its result with
// the child's peak RSS.
func runChild(exe, engine, parent string, cfg benchsuite.Sustained, stderr io.Writer) (benchsuite.SustainedResult, error) {
	dir, err := os.MkdirTemp(parent, "raftbench-"+engine+"-")
	if err != nil {
		return benchsuite.SustainedResult{}, err
	}
	defer os.RemoveAll(dir)
	var out bytes.Buffer
	cmd := exec.Command(exe, childArgs(engine, dir, cfg)...)
	cmd.Stdout, cmd.Stderr = &out, stderr
	if err := cmd.Run(); err != nil {
		return benchsuite.SustainedResult{}, fmt.Errorf("%s: child: %w", engine, err)
	}
	res, err := parseResult(out.Bytes())
	if err != nil {
		return res, fmt.Errorf("%s: child: %w", engine, err)
	}
	if res.Engine != engine {
		return res, fmt.Errorf("%s: child ran %s", engine, res.Engine)
	}
	res.MaxRSSKiB = maxRSSKiB(cmd.ProcessState)
	return res, nil
}

// sustainedRounds runs cfg on each engine in a child process of its own,
// engines in order, rounds times; res[round][engine].
func sustainedRounds(exe string, engines []benchsuite.Engine, cfg benchsuite.Sustained, rounds int, dir string, progress io.Writer) ([][]benchsuite.SustainedResult, error) {
	res := make([][]benchsuite.SustainedResult, rounds)
	for r := range rounds {
		res[r] = make([]benchsuite.SustainedResult, len(engines))
		for ei, e := range engines {
			rr, err := runChild(exe, e.Name, dir, cfg, progress)
			if err != nil {
				return nil, err
			}
			res[r][ei] = rr
			fmt.Fprintf(progress, "round %d %-7s %8.0f appends/s %9.0f entries/s %7.2f MB/s  p50 %v p99 %v p99.9 %v max %v  %d compactions (max %v)  peak RSS %s\n",
				r+1, e.Name, rr.AppendsPerSec(), rr.EntriesPerSec(), rr.MBPerSec(), round(rr.P50), round(rr.P99), round(rr.P999), round(rr.Max),
				rr.Compactions, round(rr.CompactMax), fmtKiB(float64(rr.MaxRSSKiB)))
		}
	}
	return res, nil
}

// printSustained prints sustainedRounds' results as two Markdown tables:
// each engine's medians over the rounds (peak RSS: the largest), then the
// per-round ratios against the first engine, oriented so that above 1
// means the first did better.
func printSustained(w io.Writer, engines []benchsuite.Engine, res [][]benchsuite.SustainedResult) {
	col := func(ei int, f func(benchsuite.SustainedResult) float64) []float64 {
		xs := make([]float64, len(res))
		for r := range res {
			xs[r] = f(res[r][ei])
		}
		return xs
	}
	var (
		appends = func(r benchsuite.SustainedResult) float64 { return r.AppendsPerSec() }
		entries = func(r benchsuite.SustainedResult) float64 { return r.EntriesPerSec() }
		mbs     = func(r benchsuite.SustainedResult) float64 { return r.MBPerSec() }
		p50     = func(r benchsuite.SustainedResult) float64 { return float64(r.P50) }
		p99     = func(r benchsuite.SustainedResult) float64 { return float64(r.P99) }
		p999    = func(r benchsuite.SustainedResult) float64 { return float64(r.P999) }
		maxLat  = func(r benchsuite.SustainedResult) float64 { return float64(r.Max) }
		rss     = func(r benchsuite.SustainedResult) float64 { return float64(r.MaxRSSKiB) }
	)
	printRow(w, []string{"engine", "appends/s", "entries/s", "MB/s", "P50", "P99", "P99.9", "max", "peak RSS"})
	printRule(w, 9)
	for ei, e := range engines {
		printRow(w, []string{e.Name,
			fmt.Sprintf("%.0f", median(col(ei, appends))), fmt.Sprintf("%.0f", median(col(ei, entries))), fmt.Sprintf("%.2f", median(col(ei, mbs))),
			fmtNs(median(col(ei, p50))), fmtNs(median(col(ei, p99))), fmtNs(median(col(ei, p999))), fmtNs(median(col(ei, maxLat))),
			fmtKiB(slices.Max(col(ei, rss)))})
	}
	if len(engines) < 2 {
		return
	}
	base := engines[0].Name
	fmt.Fprintln(w)
	printRow(w, []string{"vs " + base, "entries/s " + base + "/other", "P99 other/" + base, "P99.9 other/" + base, "peak RSS other/" + base})
	printRule(w, 5)
	for ei := 1; ei < len(engines); ei++ {
		printRow(w, []string{engines[ei].Name,
			fmtRatios(perRound(col(0, entries), col(ei, entries))),
			fmtRatios(perRound(col(ei, p99), col(0, p99))),
			fmtRatios(perRound(col(ei, p999), col(0, p999))),
			fmtRatios(perRound(col(ei, rss), col(0, rss)))})
	}
	fmt.Fprintf(w, "\nmedians of %d rounds (peak RSS: the largest); ratios: per round, then their median (rounds in brackets); above 1: %s did better\n", len(res), base)
}

func fmtKiB(kib float64) string {
	if kib <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f MiB", kib/1024)
}

// round rounds d for the progress lines.
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	case d >= time.Microsecond:
		return d.Round(100 * time.Nanosecond)
	}
	return d
}
