package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vigildb/vigil"
)

// runMergeKV runs kvbench in-process with a command line on the DB
// directory dir (kept afterwards) and returns stdout and the runner.
func runMergeKV(t *testing.T, dir string, args ...string) (string, *Runner) {
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
	cfg.DB = dir
	r := NewRunner(cfg)
	if err := r.Run(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return out.String(), r
}

// dbContents reopens the DB at dir with merger m and returns every key's
// value, merged.
func dbContents(t *testing.T, dir string, m *vigil.Merger) map[string][]byte {
	t.Helper()
	db, err := vigil.Open(dir, &vigil.Options{Merger: m})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	kv := map[string][]byte{}
	for ok := it.First(); ok; ok = it.Next() {
		kv[string(it.Key())] = bytes.Clone(it.Value())
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return kv
}

// counterSum adds up the uint64add counters of kv, each of which must
// have 8 bytes.
func counterSum(t *testing.T, kv map[string][]byte) int64 {
	t.Helper()
	var sum int64
	for k, v := range kv {
		if len(v) != 8 {
			t.Fatalf("key %x: %d-byte value under uint64add", k, len(v))
		}
		sum += int64(binary.LittleEndian.Uint64(v))
	}
	return sum
}

// TestMergeRandomUint64Add: with uint64add every merge adds 1, so the
// counters of all keys add up to the merges done, by every thread; the
// operands are 8 bytes whatever --value_size, and the note says so.
func TestMergeRandomUint64Add(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	out, r := runMergeKV(t, dir, "--benchmarks=mergerandom,flush,mergerandom", "--merge_operator=uint64add",
		"--num=300", "--seed=1", "--threads=2", "--value_size=100", "--histogram")
	checkAgainstDBBench(t, out, []string{"mergerandom 600 ( updates:300)", "flush 1", "mergerandom 600 ( updates:300)"})
	if !strings.Contains(out, "mergerandom: --merge_operator=uint64add: each merge adds 1 (an 8-byte little-endian operand), not a --value_size=100 value\n") {
		t.Errorf("no note on the 8-byte operands:\n%s", out)
	}
	if !strings.Contains(out, "Microseconds per merge:\nCount: 600 ") {
		t.Errorf("no merge histogram:\n%s", out)
	}
	res := r.Results()[0]
	if want := int64(600 * (16 + 8)); res.Bytes != want {
		t.Errorf("bytes %d, want %d (key and 8-byte operand per merge)", res.Bytes, want)
	}
	kv := dbContents(t, dir, vigil.Uint64AddMerger)
	if sum := counterSum(t, kv); sum != 1200 {
		t.Errorf("counters add up to %d, want the 1200 merges", sum)
	}
	if len(kv) > 300 {
		t.Errorf("%d keys, want at most --num=300", len(kv))
	}
}

// TestMergeRandomDurationAndMergeKeys: with --duration the merges done are
// the operations reported, and --merge_keys bounds the keys.
func TestMergeRandomDurationAndMergeKeys(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	_, r := runMergeKV(t, dir, "--benchmarks=mergerandom", "--merge_operator=UInt64AddOperator",
		"--num=1000", "--merge_keys=7", "--seed=2", "--threads=2", "--duration=50ms", "--ops_between_duration_checks=10")
	ops := r.Results()[0].Ops
	if ops == 0 {
		t.Fatal("no merges")
	}
	kv := dbContents(t, dir, vigil.Uint64AddMerger)
	if sum := counterSum(t, kv); sum != ops {
		t.Errorf("counters add up to %d, want the %d merges", sum, ops)
	}
	if len(kv) > 7 {
		t.Errorf("%d keys, want at most --merge_keys=7", len(kv))
	}
}

// rrmrModel replays one readrandommergerandom thread's draws (seeded as
// the runner seeds it) against the counters in counts, as db_bench draws
// them: the DB, the key, then merge or read. It returns the thread's
// reads, merges and hits.
func rrmrModel(seed uint64, ops, keys int64, mergePercent int, counts map[uint64]int64) (reads, merges, hits int64) {
	rng := newRandom64(seed)
	for range ops {
		rng.Next()
		k := rng.Next() % uint64(keys)
		if int(rng.Next()%100) < mergePercent {
			counts[k]++
			merges++
			continue
		}
		reads++
		if counts[k] > 0 {
			hits++
		}
	}
	return reads, merges, hits
}

// TestReadRandomMergeRandomAsModel: one thread's counts equal a replay of
// db_bench's draws, and the DB's counters are the replay's, key by key.
func TestReadRandomMergeRandomAsModel(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	out, _ := runMergeKV(t, dir, "--benchmarks=readrandommergerandom", "--merge_operator=uint64add",
		"--num=400", "--merge_keys=150", "--seed=5", "--mergereadpercent=60")
	counts := map[uint64]int64{}
	reads, merges, hits := rrmrModel(5+1, 400, 150, 60, counts)
	if reads == 0 || merges == 0 || hits == 0 {
		t.Fatalf("degenerate model: reads %d merges %d hits %d", reads, merges, hits)
	}
	checkAgainstDBBench(t, out, []string{
		fmt.Sprintf("readrandommergerandom 400 (reads:%d merges:%d total:400 hits:%d maxlength:8)", reads, merges, hits),
	})
	kv := dbContents(t, dir, vigil.Uint64AddMerger)
	keys := NewKeyGen(KeyDBBench, 16)
	for k, n := range counts {
		v, ok := kv[string(keys.Key(k))]
		if !ok || len(v) != 8 || int64(binary.LittleEndian.Uint64(v)) != n {
			t.Errorf("key %d: value %x, want the counter %d", k, v, n)
		}
	}
	if len(kv) != len(counts) {
		t.Errorf("%d keys in the DB, want the %d merged", len(kv), len(counts))
	}
}

// TestReadRandomMergeRandomThreads: with two threads each draws from its
// own seed, so the merges of both (and the first thread's counts) are the
// replays', whatever the interleaving.
func TestReadRandomMergeRandomThreads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	out, _ := runMergeKV(t, dir, "--benchmarks=readrandommergerandom", "--merge_operator=uint64add",
		"--num=300", "--seed=9", "--threads=2")
	counts := map[uint64]int64{}
	reads0, merges0, _ := rrmrModel(9+1, 300, 300, 70, counts)
	_, merges1, _ := rrmrModel(9+2, 300, 300, 70, counts)
	m := regexp.MustCompile(`\(reads:(\d+) merges:(\d+) total:300 hits:\d+ maxlength:(\d+)\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no readrandommergerandom message:\n%s", out)
	}
	if m[1] != strconv.FormatInt(reads0, 10) || m[2] != strconv.FormatInt(merges0, 10) {
		t.Errorf("first thread: reads %s merges %s, want %d %d", m[1], m[2], reads0, merges0)
	}
	if sum := counterSum(t, dbContents(t, dir, vigil.Uint64AddMerger)); sum != merges0+merges1 {
		t.Errorf("counters add up to %d, want the %d merges", sum, merges0+merges1)
	}
}

// TestMergeRandomPut: with put the newest operand wins, so each key holds
// the last value merged into it, the values db_bench's generator gives in
// order.
func TestMergeRandomPut(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	out, r := runMergeKV(t, dir, "--benchmarks=mergerandom", "--merge_operator=put", "--num=200", "--seed=3", "--value_size=32")
	if strings.Contains(out, "each merge adds 1") {
		t.Errorf("a uint64add note with put:\n%s", out)
	}
	want := map[string][]byte{}
	rng := newRandom64(3 + 1)
	keys := NewKeyGen(KeyDBBench, 16)
	values := NewValueGenerator(r.cfg.CompressionRatio, r.valueBufferSize())
	for range 200 {
		rng.Next()
		k := keys.Key(rng.Next() % 200)
		want[string(k)] = bytes.Clone(values.Next(32))
	}
	got := dbContents(t, dir, vigil.PutMerger)
	if len(got) != len(want) {
		t.Errorf("%d keys, want %d", len(got), len(want))
	}
	for k, v := range want {
		if !bytes.Equal(got[k], v) {
			t.Errorf("key %x: %q, want the last operand %q", k, got[k], v)
		}
	}
	if res := r.Results()[0]; res.Bytes != 200*(16+32) {
		t.Errorf("bytes %d, want %d", res.Bytes, 200*(16+32))
	}
}

// TestMergeBenchmarksNeedMergeOperator: without --merge_operator the merge
// benchmarks are refused before anything runs, as db_bench refuses them.
func TestMergeBenchmarksNeedMergeOperator(t *testing.T) {
	for _, name := range []string{"mergerandom", "readrandommergerandom"} {
		c := parse(t, "--benchmarks=fillseq,"+name, "--num=10", "--seed=1")
		cfg, err := c.Config()
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		cfg.Stdout, cfg.Stderr = &out, &out
		cfg.DB = filepath.Join(t.TempDir(), "db")
		err = NewRunner(cfg).Run()
		if err == nil || !strings.Contains(err.Error(), name+": --merge_operator must be specified") {
			t.Errorf("%s: %v, want --merge_operator must be specified", name, err)
		}
		if out.Len() != 0 {
			t.Errorf("%s: ran before refusing:\n%s", name, out.String())
		}
	}
}

// noMergeEngine hides an engine's Merge.
type noMergeEngine struct{ Engine }

func TestMergeBenchmarksNeedMergeEngine(t *testing.T) {
	var out bytes.Buffer
	cfg := Config{Benchmarks: "mergerandom", Num: 10, Reads: -1, Writes: -1, DB: t.TempDir(), Stdout: &out, Stderr: &out,
		Engine: EngineOptions{MergeOperator: "put", Compression: "snappy", BlockSize: 4096},
		Open: func(o EngineOptions) (Engine, error) {
			e, err := OpenVigil(o)
			return noMergeEngine{e}, err
		}}
	err := NewRunner(cfg).Run()
	if err == nil || !strings.Contains(err.Error(), "has no merge operator") {
		t.Errorf("%v, want the engine's lack of merges", err)
	}
}

// TestMergeFlags: --merge_operator takes RocksDB's names for uint64add and
// put and refuses others; --mergereadpercent and --merge_keys take effect
// without notices; --max_successive_merges is not applicable.
func TestMergeFlags(t *testing.T) {
	for in, want := range map[string]string{"": "", "uint64add": "uint64add", "UInt64AddOperator": "uint64add",
		"put": "put", "PutOperator": "put", "put_v1": "put"} {
		c := parse(t, "--merge_operator="+in, "--mergereadpercent=50", "--merge_keys=10")
		cfg, err := c.Config()
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if cfg.Engine.MergeOperator != want || cfg.MergeReadPercent != 50 || cfg.MergeKeys != 10 {
			t.Errorf("%q: operator %q percent %d keys %d", in, cfg.Engine.MergeOperator, cfg.MergeReadPercent, cfg.MergeKeys)
		}
		if n := c.Notices(); len(n) != 0 {
			t.Errorf("%q: notices %v", in, n)
		}
		opts, err := VigilOptions(cfg.Engine)
		if err != nil {
			t.Fatal(err)
		}
		if got := ""; opts.Merger != nil {
			got = opts.Merger.Name
			if got != want {
				t.Errorf("%q: vigil.Options.Merger %q, want %q", in, got, want)
			}
		} else if want != "" {
			t.Errorf("%q: no vigil.Options.Merger", in)
		}
	}
	for _, args := range [][]string{{"--merge_operator=max"}, {"--merge_operator=stringappend"}, {"--merge_operator=Put"},
		{"--mergereadpercent=101"}, {"--mergereadpercent=-1"}, {"--merge_keys=0"}} {
		_, err := parse(t, args...).Config()
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	if n := parse(t, "--max_successive_merges=5").Notices(); len(n) != 1 || !strings.Contains(n[0].Instead, "merge operands") {
		t.Errorf("--max_successive_merges=5: notices %v", n)
	}
	if _, err := VigilOptions(EngineOptions{MergeOperator: "max", Compression: "snappy"}); !errors.Is(err, vigil.ErrInvalidArgument) {
		t.Errorf("VigilOptions with merge operator max: %v", err)
	}
}
