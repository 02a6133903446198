package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Case is one command line run by both engines: the same db_bench flags
// for `vigil kvbench` and for db_bench, one process per engine and run.
type Case struct {
	Scenario string `json:"scenario"`
	// Name tells the cases of a scenario apart ("paranoid=on", "checksum=1").
	Name  string   `json:"name"`
	Flags []string `json:"flags"`
	// VigilOnly says db_bench cannot run the case at all (a benchmark it
	// lacks), and why.
	VigilOnly string `json:"vigil_only,omitempty"`
	// ShmDB puts the DB on /dev/shm when it exists, as PR #9069 measured.
	ShmDB bool `json:"shm_db,omitempty"`
	// Latency asks for the latency table (the flags must include
	// --histogram=1) and the DB's size on disk when the process ends.
	Latency bool `json:"latency,omitempty"`
}

// Scenario is a group of cases from one source.
type Scenario struct {
	Name  string
	About string
	Cases func(scale float64) []Case
	// Explicit keeps the scenario out of "all": it runs only when named.
	Explicit bool
}

func scaled(n int64, f float64) string {
	return strconv.FormatInt(max(int64(math.Round(float64(n)*f)), 100), 10)
}

// scaledBytes scales a cache or buffer size by f, at least 1 MiB.
func scaledBytes(n int64, f float64) string {
	if f == 1 {
		return strconv.FormatInt(n, 10)
	}
	return strconv.FormatInt(max(int64(math.Round(float64(n)*f)), 1<<20), 10)
}

// largeCase is the "DB ten times the cache" case: a random fill of 10M
// keys (~1.1 GB raw, ~0.6 GB with snappy) with a 64 MiB cache and 64 MiB
// write buffers, then random point reads and seeks on the DB it made, in
// the same process, latency histograms on. Counts, cache and write buffer
// scale with f, keeping their ratio to the data.
func largeCase(f float64) Case {
	return Case{Scenario: "large", Name: "10M keys", Latency: true, Flags: []string{
		"--benchmarks=fillrandom,readrandom,seekrandom",
		"--num=" + scaled(10_000_000, f), "--reads=" + scaled(1_000_000, f), "--seek_nexts=0",
		"--cache_size=" + scaledBytes(64<<20, f), "--write_buffer_size=" + scaledBytes(64<<20, f),
		"--compression_type=snappy", "--key_size=16", "--value_size=100", "--bloom_bits=10",
		"--histogram=1", "--threads=1", "--seed=1"}}
}

// Scenarios are the seeds' measurements: RocksDB PR #12889's memtable
// reads with paranoid memory checks off and on, PR #9069's fillseq per
// checksum type, and its checksum micro-benchmarks at 4 KiB blocks; and
// large, a DB ten times the cache (only when named: it takes minutes).
var Scenarios = []Scenario{
	{
		Name: "memtable",
		About: "PR #12889: fillseq of 250k keys into a 256 MiB memtable, then readrandom x500k, readseq and " +
			"readreverse (each repeated 10 times: one pass is too short to time), paranoid memory checks off/on",
		Cases: func(f float64) []Case {
			base := []string{"--benchmarks=fillseq,readrandom,readseq[-X10],readreverse[-X10]",
				"--num=" + scaled(250_000, f), "--reads=" + scaled(500_000, f),
				"--write_buffer_size=268435456", "--seed=1723056275"}
			return []Case{
				{Scenario: "memtable", Name: "paranoid=off", Flags: append(slices.Clone(base), "--paranoid_memory_checks=false")},
				{Scenario: "memtable", Name: "paranoid=on", Flags: append(slices.Clone(base), "--paranoid_memory_checks=true")},
			}
		},
	},
	{
		Name: "fillseq",
		About: "PR #9069: fillseq -memtablerep=vector -allow_concurrent_memtable_write=false per checksum type " +
			"(the PR wrote 30M keys on /dev/shm; here 1M x --scale)",
		Cases: func(f float64) []Case {
			var cs []Case
			for ct := 0; ct <= 5; ct++ {
				c := Case{Scenario: "fillseq", Name: fmt.Sprintf("checksum=%d", ct), ShmDB: true,
					Flags: []string{"--benchmarks=fillseq", "--memtablerep=vector", "--allow_concurrent_memtable_write=false",
						"--num=" + scaled(1_000_000, f), fmt.Sprintf("--checksum_type=%d", ct), "--seed=1"}}
				if ct == 5 {
					c.Name = "checksum=5 (crc64)"
					c.VigilOnly = "RocksDB has no checksum type 5 (CRC-64 is Vigil's)"
				}
				cs = append(cs, c)
			}
			return cs
		},
	},
	{
		Name:  "checksum",
		About: "PR #9069's micro-benchmarks: one op hashes a 4096-byte block, ~5 GB per benchmark (crc64 is Vigil's own)",
		Cases: func(f float64) []Case {
			bytes := int64(5000 << 20)
			num := func() []string {
				if f == 1 {
					return nil // kvbench's default, db_bench's fixed amount: 5000 MiB
				}
				return []string{"--num=" + scaled(bytes/4096, f)}
			}
			return []Case{
				{Scenario: "checksum", Name: "4096 B", Flags: append([]string{"--benchmarks=crc32c,xxhash,xxhash64,xxh3", "--block_size=4096"}, num()...)},
				{Scenario: "checksum", Name: "4096 B (crc64)", Flags: append([]string{"--benchmarks=crc64", "--block_size=4096"}, num()...),
					VigilOnly: "db_bench has no crc64 benchmark"},
			}
		},
	},
	{
		Name: "large",
		About: "a DB ten times the cache: fillrandom of 10M keys (64 MiB cache and write buffers, snappy), then " +
			"readrandom and seekrandom x1M on it, on disk; latency P99, P99.9, max and the DB size (not in all)",
		Cases:    func(f float64) []Case { return []Case{largeCase(f)} },
		Explicit: true,
	},
}

// SelectScenarios picks scenarios by name ("" or "all": every one but the
// Explicit ones).
func SelectScenarios(list string) ([]Scenario, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "all" {
		return slices.DeleteFunc(slices.Clone(Scenarios), func(s Scenario) bool { return s.Explicit }), nil
	}
	var out []Scenario
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(Scenarios, func(s Scenario) bool { return s.Name == name })
		if i < 0 {
			var names []string
			for _, s := range Scenarios {
				names = append(names, s.Name)
			}
			return nil, fmt.Errorf("unknown scenario %q (have %s)", name, strings.Join(names, ", "))
		}
		out = append(out, Scenarios[i])
	}
	return out, nil
}

// dbBenchFlags adapts a case's flags to the installed db_bench: a flag it
// lacks is dropped when it asks for the off/default value (false, 0, ""),
// and otherwise makes the case unrunnable there (reason returned). known
// holds the installed db_bench's flag names; nil means "assume all".
func dbBenchFlags(flags []string, known map[string]bool) (out []string, reason string) {
	for _, f := range flags {
		name, val, _ := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if known == nil || known[name] {
			out = append(out, f)
			continue
		}
		switch strings.ToLower(val) {
		case "false", "0", "":
			continue
		}
		return nil, fmt.Sprintf("this db_bench has no --%s", name)
	}
	return out, ""
}
