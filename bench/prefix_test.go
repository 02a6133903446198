package bench

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeysPerPrefixLayoutAsDBBench pins db_bench's keys under
// --prefix_size and --keys_per_prefix byte for byte. The keys are those
// `ldb scan --key_hex` listed after db_bench 7.8.3's fillseq with the same
// flags (the missing keys, which db_bench never writes, follow its
// readmissing: the same layout for --key_size+1 bytes).
func TestKeysPerPrefixLayoutAsDBBench(t *testing.T) {
	for _, tc := range []struct {
		keySize, prefixSize int
		perPrefix, num      int64
		v                   uint64
		key, missing        string // hex
	}{
		// 30 keys, 3 prefixes: v's prefix is v mod 3.
		{16, 8, 10, 30, 0, "00000000000000000000000000000000", "0000000000000000000000000000000030"},
		{16, 8, 10, 30, 3, "00000000000000000000000000000003", "0000000000000000000000000000000330"},
		{16, 8, 10, 30, 4, "00000000000000010000000000000004", "0000000000000001000000000000000430"},
		// A 12-byte prefix: 8 bytes of it, then '0's; 250 prefixes.
		{20, 12, 4, 1000, 250, "000000000000000030303030" + "00000000000000fa", "000000000000000030303030" + "00000000000000fa30"},
		{20, 12, 4, 1000, 777, "000000000000001b30303030" + "0000000000000309", ""},
		// 6 bytes left for v: its low 6 bytes, 7 in the missing key.
		{10, 4, 2, 100, 99, "00000031" + "000000000063", "00000031" + "00000000000063"},
		{10, 4, 2, 100, 49, "00000031" + "000000000031", ""},
		{10, 4, 2, 100, 50, "00000000" + "000000000032", ""},
		// 2 bytes left: v's low 2 bytes (so v and v+65536 share them).
		{6, 4, 7, 70000, 1024, "00000400" + "0400", "00000400" + "000400"},
		{6, 4, 7, 70000, 11024, "00000400" + "2b10", ""},
		// --keys_per_prefix without --prefix_size, and the reverse: keys as
		// without them.
		{16, 0, 10, 30, 4, "00000000000000043030303030303030", ""},
		{16, 8, 0, 30, 4, "00000000000000043030303030303030", ""},
	} {
		g := NewKeyGen(KeyDBBench, tc.keySize)
		g.SetPrefixes(tc.prefixSize, tc.perPrefix, tc.num)
		name := fmt.Sprintf("key_size=%d prefix_size=%d keys_per_prefix=%d num=%d v=%d", tc.keySize, tc.prefixSize, tc.perPrefix, tc.num, tc.v)
		if got := fmt.Sprintf("%x", g.Key(tc.v)); got != tc.key {
			t.Errorf("%s: key %s, want %s", name, got, tc.key)
		}
		if got := fmt.Sprintf("%x", g.Missing(tc.v)); tc.missing != "" && got != tc.missing {
			t.Errorf("%s: missing key %s, want %s", name, got, tc.missing)
		}
	}
	// The merge benchmarks number prefixes by --merge_keys: 1000 keys of
	// 10 a prefix make 100 prefixes, so 123's is 23.
	g := NewKeyGen(KeyDBBench, 16)
	g.SetPrefixes(8, 10, 4000)
	if got, want := fmt.Sprintf("%x", g.KeyIn(123, 1000)), "0000000000000017000000000000007b"; got != want {
		t.Errorf("KeyIn(123, 1000) = %s, want %s", got, want)
	}
	if a := testing.AllocsPerRun(100, func() { g.Key(77); g.Missing(77) }); a != 0 {
		t.Errorf("%v allocations per key", a)
	}
}

// TestPrefixKeysAsDBBench: with --prefix_size and --keys_per_prefix the
// found counts are db_bench 7.8.3's for the same flags (its lines, timings
// left out): the keys are the same, also where short keys make indexes
// share one, where the merge benchmarks number prefixes by --merge_keys,
// and where --seek_missing_prefix seeks prefixes no key has.
func TestPrefixKeysAsDBBench(t *testing.T) {
	for _, tc := range []struct {
		args string
		want []string
	}{
		{"--benchmarks=fillrandom,seekrandom,readrandom,readmissing,deleterandom,seekrandom,readrandom --num=4000 --seed=1 --prefix_size=8 --keys_per_prefix=10",
			[]string{"fillrandom 4000", "seekrandom 4000 (2517 of 4000 found)", "readrandom 4000 (2565 of 4000 found)",
				"readmissing 4000 (0 of 4000 found)", "deleterandom 4000", "seekrandom 4000 (926 of 4000 found)", "readrandom 4000 (912 of 4000 found)"}},
		{"--benchmarks=fillrandom,seekrandom,seekrandom --num=4000 --seed=2 --prefix_size=12 --keys_per_prefix=4 --key_size=20 --seek_nexts=2",
			[]string{"fillrandom 4000", "seekrandom 4000 (2467 of 4000 found)", "seekrandom 4000 (2484 of 4000 found)"}},
		{"--benchmarks=fillrandom,mergerandom,readrandom --merge_operator=put --merge_keys=1000 --num=4000 --seed=3 --prefix_size=8 --keys_per_prefix=10",
			[]string{"fillrandom 4000", "mergerandom 4000 ( updates:4000)", "readrandom 4000 (2529 of 4000 found)"}},
		{"--benchmarks=fillrandom,readmissing,readrandom --num=4000 --seed=4 --prefix_size=4 --keys_per_prefix=3 --key_size=6",
			[]string{"fillrandom 4000", "readmissing 4000 (0 of 4000 found)", "readrandom 4000 (2540 of 4000 found)"}},
		{"--benchmarks=fillrandom,readrandom,seekrandom,deleteseq,readrandom --num=4000 --seed=5 --prefix_size=4 --keys_per_prefix=100 --key_size=5",
			[]string{"fillrandom 4000", "readrandom 4000 (3857 of 4000 found)", "seekrandom 4000 (3857 of 4000 found)",
				"deleteseq 4000", "readrandom 4000 (0 of 4000 found)"}},
		{"--benchmarks=fillseq,seekrandom,readrandom --num=4000 --seed=2 --prefix_size=12 --keys_per_prefix=4 --key_size=20 --seek_missing_prefix",
			[]string{"fillseq 4000", "seekrandom 4000 (0 of 4000 found)", "readrandom 4000 (4000 of 4000 found)"}},
		{"--benchmarks=fillrandom,readrandommergerandom,readrandom --merge_operator=put --merge_keys=300 --num=3000 --seed=6 --prefix_size=3 --keys_per_prefix=7 --key_size=4",
			[]string{"fillrandom 3000", "readrandommergerandom 3000 (reads:921 merges:2079 total:3000 hits:811 maxlength:100)",
				"readrandom 3000 (1887 of 3000 found)"}},
	} {
		out := runKV(t, strings.Fields(tc.args)...)
		checkAgainstDBBench(t, out, tc.want)
	}
}

// seekRecord is one seek of seekrandom as the engine saw it: the key
// sought, how, and the keys the iterator was at.
type seekRecord struct {
	method string // SeekGE, SeekPrefixGE, SeekLT
	prefix []byte // the iterator's prefix (NewPrefixIter), or nil
	target []byte
	keys   [][]byte // where the seek and each step landed, while valid
}

// recEngine records the seeks made on a Vigil engine's iterators.
type recEngine struct {
	Engine
	seeks []*seekRecord
}

func (e *recEngine) NewIter() (Iter, error) { return e.wrap(e.Engine.NewIter, nil) }

func (e *recEngine) NewPrefixIter(prefix []byte) (Iter, error) {
	return e.wrap(func() (Iter, error) { return e.Engine.(PrefixEngine).NewPrefixIter(prefix) }, prefix)
}

func (e *recEngine) wrap(open func() (Iter, error), prefix []byte) (Iter, error) {
	it, err := open()
	if err != nil {
		return nil, err
	}
	rec := &seekRecord{prefix: bytes.Clone(prefix)}
	e.seeks = append(e.seeks, rec)
	return &recIter{Iter: it, rec: rec}, nil
}

type recIter struct {
	Iter
	rec *seekRecord
}

func (i *recIter) land(ok bool) bool {
	if ok {
		i.rec.keys = append(i.rec.keys, bytes.Clone(i.Key()))
	}
	return ok
}

func (i *recIter) seek(method string, k []byte, ok bool) bool {
	i.rec.method, i.rec.target = method, bytes.Clone(k)
	return i.land(ok)
}

func (i *recIter) SeekGE(k []byte) bool { return i.seek("SeekGE", k, i.Iter.SeekGE(k)) }
func (i *recIter) SeekLT(k []byte) bool {
	return i.seek("SeekLT", k, i.Iter.(ReverseSeeker).SeekLT(k))
}
func (i *recIter) SeekPrefixGE(k []byte) bool {
	return i.seek("SeekPrefixGE", k, i.Iter.(PrefixSeeker).SeekPrefixGE(k))
}
func (i *recIter) Next() bool { return i.land(i.Iter.Next()) }
func (i *recIter) Prev() bool { return i.land(i.Iter.Prev()) }

// runRecorded runs kvbench's command line on Vigil, recording the seeks
// of the last benchmark; it returns them and stdout. generic hides the
// engine's PrefixEngine, as an engine without prefixes would.
func runRecorded(t *testing.T, generic bool, args ...string) ([]*seekRecord, string) {
	t.Helper()
	c := parse(t, args...)
	cfg, err := c.Config()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cfg.Stdout, cfg.Stderr = &out, &out
	cfg.DB = filepath.Join(t.TempDir(), "db")
	var rec *recEngine
	cfg.Open = func(o EngineOptions) (Engine, error) {
		e, err := OpenVigil(o)
		rec = &recEngine{Engine: e}
		if generic {
			return struct{ Engine }{rec}, err
		}
		return rec, err
	}
	if err := NewRunner(cfg).Run(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return rec.seeks, out.String()
}

// prefixSeekCase is one way of seeking of TestSeekRandomStaysInPrefix.
type prefixSeekCase struct {
	flags      []string
	generic    bool   // the engine is no PrefixEngine
	method     string // how the engine's iterator was positioned
	prefixIter bool   // by NewPrefixIter
	// inside: every key kvbench reached has the target's prefix; the
	// engine's iterator may be one key past it where kvbench stops it
	// (lastOut). total: keys of other prefixes follow a landing inside
	// one, as in key order.
	inside, lastOut, total bool
}

// check checks the positions of the seeks of one case.
func (tc prefixSeekCase) check(t *testing.T, name string, seeks []*seekRecord) {
	t.Helper()
	var outside, steps int
	for _, s := range seeks {
		p := s.target[:8]
		if s.method != tc.method || (s.prefix != nil) != tc.prefixIter || s.prefix != nil && !bytes.Equal(s.prefix, p) {
			t.Fatalf("%s: seek of %x by %s (prefix %x), want %s (prefix iterator: %v)", name, s.target, s.method, s.prefix, tc.method, tc.prefixIter)
		}
		for i, k := range s.keys {
			if bytes.HasPrefix(k, p) {
				continue
			}
			outside++
			switch {
			case tc.total:
			case i == 0 && len(s.keys) > 1:
				t.Fatalf("%s: seek of %x landed on %x, outside its prefix, and stepped on", name, s.target, k)
			case tc.inside && !(tc.lastOut && i == len(s.keys)-1):
				t.Fatalf("%s: seek of %x reached %x (step %d), outside its prefix", name, s.target, k, i)
			}
		}
		steps += len(s.keys)
	}
	if tc.inside && steps >= len(seeks)*16 {
		t.Errorf("%s: %d positions for %d seeks of 15 steps: the steps did not stop at the prefix's edge", name, steps, len(seeks))
	}
	if tc.total && outside == 0 {
		t.Errorf("%s: no step left the prefix, as key order must", name)
	}
}

// TestSeekRandomStaysInPrefix: with --prefix_size seekrandom seeks as
// db_bench's read options say, on 200 prefixes of 10 keys (about 63 %
// written, in a table and the memtable), 15 steps after each seek: a
// prefix seek (the default) lands only on keys of the target's prefix; with
// --prefix_same_as_start (or --auto_prefix_mode, or backwards) every key
// the iterator reaches has it, and the steps stop at the prefix's edge;
// --total_order_seek seeks in key order. An engine without prefixes gets
// total-order iterators that kvbench limits to the same keys. The found
// counts are those of total-order seeks: all modes find the same keys.
func TestSeekRandomStaysInPrefix(t *testing.T) {
	base := []string{"--benchmarks=fillrandom,flush,overwrite,seekrandom", "--num=2000", "--seed=5",
		"--writes=300", "--reads=400", "--seek_nexts=15", "--keys_per_prefix=10"}
	_, total := runRecorded(t, false, base...)
	base = append(base, "--prefix_size=8")
	for _, tc := range []prefixSeekCase{
		{method: "SeekPrefixGE"},
		{flags: []string{"--prefix_same_as_start"}, method: "SeekGE", prefixIter: true, inside: true},
		{flags: []string{"--auto_prefix_mode"}, method: "SeekGE", prefixIter: true, inside: true},
		{flags: []string{"--reverse_iterator"}, method: "SeekLT", prefixIter: true, inside: true},
		{flags: []string{"--prefix_same_as_start", "--total_order_seek"}, method: "SeekGE", inside: true, lastOut: true},
		{flags: []string{"--total_order_seek"}, method: "SeekGE", total: true},
		{generic: true, method: "SeekGE"},
		{flags: []string{"--prefix_same_as_start"}, generic: true, method: "SeekGE", inside: true, lastOut: true},
		{flags: []string{"--reverse_iterator"}, generic: true, method: "SeekLT", inside: true, lastOut: true},
	} {
		name := fmt.Sprintf("%s (generic engine: %v)", strings.Join(tc.flags, " "), tc.generic)
		seeks, out := runRecorded(t, tc.generic, append(base, tc.flags...)...)
		if want := results(total)[3]; results(out)[3] != want {
			t.Errorf("%s: %s, total order: %s", name, results(out)[3], want)
		}
		if len(seeks) != 400 {
			t.Fatalf("%s: %d seeks recorded, want 400", name, len(seeks))
		}
		tc.check(t, name, seeks)
	}
}

// TestPrefixStepsAsDBBench: seekrandom's steps stop where db_bench's do:
// its --statistics counted 2222 Next calls, 1822 of them landing on a key,
// under --prefix_same_as_start (its prefixes have 10 keys, so 15 steps
// cross them), and 5993 without (prefix seeks step on in key order, as
// RocksDB's do here: its tables had no filter to skip).
func TestPrefixStepsAsDBBench(t *testing.T) {
	args := []string{"--benchmarks=fillseq,seekrandom", "--num=2000", "--seed=5", "--prefix_size=8", "--keys_per_prefix=10",
		"--seek_nexts=15", "--reads=400", "--statistics"}
	for _, tc := range []struct {
		flag string
		want []string
	}{
		{"--prefix_same_as_start", []string{"rocksdb.number.db.next COUNT : 2222\n", "rocksdb.number.db.next.found COUNT : 1822\n"}},
		{"--prefix_same_as_start=false", []string{"rocksdb.number.db.next COUNT : 5993\n"}},
	} {
		out := runKV(t, append(args, tc.flag)...)
		checkAgainstDBBench(t, out, []string{"fillseq 2000", "seekrandom 400 (400 of 400 found)"})
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", tc.flag, w, out)
			}
		}
	}
}

// TestReadSeqPrefixSameAsStart: under --prefix_same_as_start readseq and
// readreverse read the first (last) key's prefix only, as RocksDB's
// iterators do (db_bench 7.8.3 read 10 keys each here too); without it,
// every key.
func TestReadSeqPrefixSameAsStart(t *testing.T) {
	out := runKV(t, "--benchmarks=fillseq,readseq,readreverse", "--num=1000", "--prefix_size=8", "--keys_per_prefix=10", "--prefix_same_as_start")
	checkAgainstDBBench(t, out, []string{"fillseq 1000", "readseq 10", "readreverse 10"})
	out = runKV(t, "--benchmarks=fillseq,readseq,readreverse", "--num=1000", "--prefix_size=8", "--keys_per_prefix=10")
	checkAgainstDBBench(t, out, []string{"fillseq 1000", "readseq 1000", "readreverse 1000"})
}

// TestSeekModes: how seekrandom seeks under each combination of
// db_bench's read options.
func TestSeekModes(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want seekMode
	}{
		{Config{}, seekTotal},
		{Config{PrefixSameAsStart: true, AutoPrefixMode: true}, seekTotal},
		{Config{Engine: EngineOptions{PrefixSize: 8}}, seekPrefix},
		{Config{Engine: EngineOptions{PrefixSize: 8}, ReverseIterator: true}, seekInPrefix},
		{Config{Engine: EngineOptions{PrefixSize: 8}, PrefixSameAsStart: true}, seekInPrefix},
		{Config{Engine: EngineOptions{PrefixSize: 8}, AutoPrefixMode: true}, seekInPrefix},
		{Config{Engine: EngineOptions{PrefixSize: 8}, AutoPrefixMode: true, ReverseIterator: true}, seekTotal},
		{Config{Engine: EngineOptions{PrefixSize: 8}, TotalOrderSeek: true}, seekTotal},
		{Config{Engine: EngineOptions{PrefixSize: 8}, TotalOrderSeek: true, PrefixSameAsStart: true}, seekInPrefixAllTables},
		{Config{Engine: EngineOptions{PrefixSize: 8}, TotalOrderSeek: true, AutoPrefixMode: true}, seekInPrefixAllTables},
	} {
		if got := tc.cfg.seekMode(); got != tc.want {
			t.Errorf("prefix %d, total_order_seek %v, prefix_same_as_start %v, auto_prefix_mode %v, reverse %v: mode %d, want %d",
				tc.cfg.Engine.PrefixSize, tc.cfg.TotalOrderSeek, tc.cfg.PrefixSameAsStart, tc.cfg.AutoPrefixMode, tc.cfg.ReverseIterator, got, tc.want)
		}
	}
}

// TestPrefixStatistics: --statistics names the four bloom filter tickers
// of db_bench's, in RocksDB's order, and the header the prefix flags.
func TestPrefixStatistics(t *testing.T) {
	out := runKV(t, "--benchmarks=fillrandom,flush,readrandom,readmissing,seekrandom", "--num=3000", "--seed=1",
		"--prefix_size=8", "--keys_per_prefix=10", "--statistics")
	if !strings.Contains(out, "Entries:    3000\nPrefix:    8 bytes\nKeys per prefix:    10\n") {
		t.Errorf("header lacks db_bench's prefix lines:\n%s", out)
	}
	last := -1
	for _, name := range []string{"rocksdb.block.cache.hit", "rocksdb.bloom.filter.useful", "rocksdb.bloom.filter.full.positive",
		"rocksdb.number.keys.written", "rocksdb.stall.micros", "rocksdb.bloom.filter.prefix.checked",
		"rocksdb.bloom.filter.prefix.useful", "rocksdb.wal.bytes"} {
		i := strings.Index(out, "\n"+name+" COUNT : ")
		if i < 0 {
			t.Errorf("statistics lack %s:\n%s", name, out)
			continue
		}
		if i < last {
			t.Errorf("%s out of RocksDB's order", name)
		}
		last = i
	}
	var checked, useful, positive, prefixChecked, prefixUseful int64
	for _, l := range strings.Split(out, "\n") {
		fmt.Sscanf(l, "rocksdb.bloom.filter.useful COUNT : %d", &useful)
		fmt.Sscanf(l, "rocksdb.bloom.filter.full.positive COUNT : %d", &positive)
		fmt.Sscanf(l, "rocksdb.bloom.filter.prefix.checked COUNT : %d", &prefixChecked)
		fmt.Sscanf(l, "rocksdb.bloom.filter.prefix.useful COUNT : %d", &prefixUseful)
	}
	checked = useful + positive
	if useful < 0 || positive < 0 || prefixUseful < 0 || prefixUseful > prefixChecked || checked > 6000 {
		t.Errorf("filter tickers: useful %d, full.positive %d, prefix checked %d, useful %d", useful, positive, prefixChecked, prefixUseful)
	}
}

// TestPrefixFlags: the prefix flags parse into the Config and the engine
// options, and Vigil opens with the fixed-prefix comparer; db_bench's
// refusals are usage errors; flags Vigil cannot honour are named.
func TestPrefixFlags(t *testing.T) {
	c := parse(t, "--prefix_size=12", "--keys_per_prefix=10", "--total_order_seek", "--prefix_same_as_start",
		"--auto_prefix_mode", "--seek_missing_prefix", "--whole_key_filtering=false")
	cfg, err := c.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Engine.PrefixSize != 12 || cfg.KeysPerPrefix != 10 || !cfg.TotalOrderSeek || !cfg.PrefixSameAsStart ||
		!cfg.AutoPrefixMode || !cfg.SeekMissingPrefix {
		t.Errorf("config %+v", cfg)
	}
	if n := c.Notices(); len(n) != 0 {
		t.Errorf("honoured prefix flags reported: %v", n)
	}
	o, err := VigilOptions(cfg.Engine)
	if err != nil {
		t.Fatal(err)
	}
	if o.Comparer == nil || o.Comparer.Name != "vigil.FixedPrefix(12)" || o.Comparer.Split([]byte("0123456789abcdef")) != 12 {
		t.Errorf("comparer %+v", o.Comparer)
	}
	if o, _ := VigilOptions(EngineOptions{}); o.Comparer != nil {
		t.Error("a comparer without --prefix_size")
	}
	for args, want := range map[string]string{
		"--prefix_size=17":                              "--prefix_size=17 is larger than the key size (16 bytes)",
		"--prefix_size=-1":                              "--prefix_size must be in",
		"--prefix_size=8 --seek_missing_prefix":         "--seek_missing_prefix needs --prefix_size > 8",
		"--prefix_size=8 --keys_per_prefix=11 --num=10": "--keys_per_prefix=11 is more than --num=10",
		"--prefix_size=8 --keys_per_prefix=11 --merge_keys=5 --benchmarks=mergerandom --merge_operator=put": "is more than --merge_keys=5",
	} {
		_, err := parse(t, strings.Fields(args)...).Config()
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a usage error with %q", args, err, want)
		}
	}
	for args, want := range map[string]string{
		"--prefix_size=8": "--whole_key_filtering=true (db_bench's default): not applicable to Vigil; with --prefix_size Vigil's bloom filters hold prefixes only",
		"--prefix_size=8 --whole_key_filtering=true":                                             "--whole_key_filtering=true: not applicable",
		"--whole_key_filtering=false":                                                            "--whole_key_filtering=false: not applicable to Vigil; without --prefix_size",
		"--key_shape=decimal --keys_per_prefix=4":                                                "--keys_per_prefix=4: not applicable to Vigil; it lays out db_bench's keys only; --key_shape=decimal's keys ran",
		"--key_shape=decimal --prefix_size=12 --seek_missing_prefix --whole_key_filtering=false": "--seek_missing_prefix=true: not applicable",
	} {
		n := parse(t, strings.Fields(args)...).Notices()
		if len(n) != 1 || !strings.Contains(n[0].String(), want) {
			t.Errorf("%s: notices %v, want one with %q", args, n, want)
		}
	}
	for _, args := range []string{"--prefix_size=8 --bloom_bits=0", "--prefix_size=8 --whole_key_filtering=false", "--keys_per_prefix=3"} {
		if n := parse(t, strings.Fields(args)...).Notices(); len(n) != 0 {
			t.Errorf("%s: notices %v", args, n)
		}
	}
}
