package peers

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	"github.com/vigildb/vigil"
	"github.com/vigildb/vigil/bench"
)

func baseOptions() bench.EngineOptions {
	return bench.EngineOptions{
		WriteBufferSize: 8 << 20,
		ChecksumType:    4,
		BlockSize:       8192,
		CacheSize:       16 << 20,
		BloomBits:       12,
		Compression:     "snappy",
	}
}

func TestPebbleOptionsMapping(t *testing.T) {
	o := baseOptions()
	po, err := PebbleOptions(o, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer po.Cache.Unref()
	if po.MemTableSize != uint64(o.WriteBufferSize) {
		t.Errorf("MemTableSize = %d, want %d", po.MemTableSize, o.WriteBufferSize)
	}
	if want := o.CacheSize + 2*int64(o.WriteBufferSize); po.Cache.MaxSize() != want {
		t.Errorf("cache = %d, want %d", po.Cache.MaxSize(), want)
	}
	if po.MemTableStopWritesThreshold != vigil.DefaultMaxImmutableMemtables {
		t.Errorf("MemTableStopWritesThreshold = %d", po.MemTableStopWritesThreshold)
	}
	if po.L0CompactionThreshold != vigil.DefaultL0CompactionTrigger || po.L0CompactionFileThreshold != vigil.DefaultL0CompactionTrigger {
		t.Errorf("L0 compaction thresholds = %d/%d, want %d", po.L0CompactionThreshold, po.L0CompactionFileThreshold, vigil.DefaultL0CompactionTrigger)
	}
	if po.L0StopWritesThreshold != vigil.DefaultL0StopWritesTrigger {
		t.Errorf("L0StopWritesThreshold = %d", po.L0StopWritesThreshold)
	}
	if po.LBaseMaxBytes != vigil.DefaultLBaseMaxBytes {
		t.Errorf("LBaseMaxBytes = %d", po.LBaseMaxBytes)
	}
	if po.MaxOpenFiles != vigil.DefaultMaxOpenFiles {
		t.Errorf("MaxOpenFiles = %d", po.MaxOpenFiles)
	}
	if po.DisableWAL || po.WALBytesPerSync != 0 {
		t.Errorf("WAL: disabled %v, bytes per sync %d; want on, never synced", po.DisableWAL, po.WALBytesPerSync)
	}
	if len(po.Levels) != pebbleNumLevels {
		t.Fatalf("%d levels, want %d", len(po.Levels), pebbleNumLevels)
	}
	for i, l := range po.Levels {
		if l.BlockSize != o.BlockSize || l.BlockRestartInterval != vigil.DefaultBlockRestartInterval {
			t.Errorf("L%d: block size %d, restart interval %d", i, l.BlockSize, l.BlockRestartInterval)
		}
		if l.Compression != pebble.SnappyCompression {
			t.Errorf("L%d: compression %v", i, l.Compression)
		}
		if l.FilterPolicy != bloom.FilterPolicy(o.BloomBits) || l.FilterType != pebble.TableFilter {
			t.Errorf("L%d: filter %v type %v, want %d-bit table bloom", i, l.FilterPolicy, l.FilterType, o.BloomBits)
		}
		if l.TargetFileSize != vigil.DefaultTargetFileSize {
			t.Errorf("L%d: target file size %d", i, l.TargetFileSize)
		}
		if l.IndexBlockSize < 1<<30 {
			t.Errorf("L%d: index block size %d allows two-level indexes", i, l.IndexBlockSize)
		}
	}
}

func TestPebbleOptionsVariants(t *testing.T) {
	o := baseOptions()
	o.Compression = "none"
	o.BloomBits = 0
	o.CacheSize = 0
	o.DisableWAL = true
	o.DisableAutomaticCompactions = true
	po, err := PebbleOptions(o, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer po.Cache.Unref()
	if po.Levels[0].Compression != pebble.NoCompression || po.Levels[6].Compression != pebble.NoCompression {
		t.Errorf("compression none mapped to %v", po.Levels[0].Compression)
	}
	if po.Levels[0].FilterPolicy != nil {
		t.Errorf("bloom bits 0 still sets filter %v", po.Levels[0].FilterPolicy)
	}
	if po.Cache.MaxSize() != 0 {
		t.Errorf("cache = %d with no cache and no credit", po.Cache.MaxSize())
	}
	if !po.DisableWAL || !po.DisableAutomaticCompactions {
		t.Errorf("DisableWAL %v, DisableAutomaticCompactions %v not passed through", po.DisableWAL, po.DisableAutomaticCompactions)
	}

	for _, bad := range []func(*bench.EngineOptions){
		func(o *bench.EngineOptions) { o.Compression = "zstd" },
		func(o *bench.EngineOptions) { o.ChecksumType = 9 },
		func(o *bench.EngineOptions) { o.WriteBufferSize = 1 },
	} {
		o := baseOptions()
		bad(&o)
		if po, err := PebbleOptions(o, 2); err == nil {
			po.Cache.Unref()
			t.Errorf("%+v: no error", o)
		}
	}
	if _, err := PebbleOptions(baseOptions(), -1); !errors.Is(err, vigil.ErrInvalidArgument) {
		t.Errorf("negative credit: %v, want ErrInvalidArgument", err)
	}
}

func TestPebbleEngine(t *testing.T) {
	o := baseOptions()
	o.Dir = filepath.Join(t.TempDir(), "db")
	e, err := OpenPebble(o)
	if err != nil {
		t.Fatal(err)
	}
	pe := e.(*PebbleEngine)
	// Compact on an empty store has nothing to do.
	if err := e.Compact(); err != nil {
		t.Fatalf("compact empty: %v", err)
	}
	it, err := e.NewIter()
	if err != nil {
		t.Fatal(err)
	}
	if it.First() || it.Last() || it.Valid() {
		t.Error("iterator over an empty store is positioned")
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if err := e.Put([]byte(fmt.Sprintf("k%03d", i)), []byte(strings.Repeat("v", i)), i%10 == 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Delete([]byte("k050"), false); err != nil {
		t.Fatal(err)
	}
	check := func(stage string) {
		t.Helper()
		for _, tc := range []struct {
			key   string
			found bool
			n     int
		}{{"k007", true, 7}, {"k099", true, 99}, {"k050", false, 0}, {"k100", false, 0}, {"a", false, 0}} {
			found, n, err := e.Get([]byte(tc.key), nil)
			if err != nil || found != tc.found || n != tc.n {
				t.Errorf("%s: Get(%s) = %v, %d, %v; want %v, %d", stage, tc.key, found, n, err, tc.found, tc.n)
			}
		}
	}
	check("memtable")
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := e.Put([]byte("k200"), []byte("x"), false); err != nil {
		t.Fatal(err)
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := pe.DB().Metrics().Levels[0].NumFiles; n != 2 {
		t.Errorf("after two flushes L0 has %d files, want 2", n)
	}
	if err := e.Compact(); err != nil {
		t.Fatal(err)
	}
	m := pe.DB().Metrics()
	if m.Levels[0].NumFiles != 0 {
		t.Errorf("after Compact L0 still has %d files", m.Levels[0].NumFiles)
	}
	var files int64
	for _, l := range m.Levels {
		files += l.NumFiles
	}
	if files == 0 {
		t.Error("after Compact no level has files")
	}
	check("compacted")
	if s := e.Metrics(); !strings.Contains(s, "level") {
		t.Errorf("Metrics() = %q", s)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestEnginesAgree drives both engines through the same kvbench fills and
// deletes and checks that they end up holding exactly the same data, read
// forwards, backwards, by seeks and by Get: the comparison is only
// meaningful if both engines do the same work.
func TestEnginesAgree(t *testing.T) {
	const num = 3000
	o := baseOptions()
	o.WriteBufferSize = 256 << 10 // several flushes and an L0 compaction
	o.CacheSize = 1 << 20
	dirs := map[string]string{}
	for _, c := range DefaultContenders(PebbleMemtableCacheCredit) {
		dir := filepath.Join(t.TempDir(), c.Name)
		dirs[c.Name] = dir
		for _, step := range []struct {
			benchmarks string
			writes     int64
		}{{"fillrandom", -1}, {"deleterandom", num / 4}, {"fillseq", num / 10}} {
			cfg := bench.Config{
				Benchmarks: step.benchmarks, Num: num, Reads: -1, Writes: step.writes, Seed: 7,
				KeySize: 16, ValueSize: 100, DB: dir, UseExistingDB: true,
				Engine: o, Open: c.Open, EngineName: c.Name, BlockSize: o.BlockSize,
				Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{},
			}
			if err := bench.NewRunner(cfg).Run(); err != nil {
				t.Fatalf("%s %s: %v", c.Name, step.benchmarks, err)
			}
		}
	}
	engines := map[string]bench.Engine{}
	for _, c := range DefaultContenders(PebbleMemtableCacheCredit) {
		eo := o
		eo.Dir = dirs[c.Name]
		e, err := c.Open(eo)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		engines[c.Name] = e
	}
	v, p := engines["vigil"], engines["pebble"]
	fwd, rev := dump(t, v, true), dump(t, p, true)
	if len(fwd) < num/3 { // ~63 % of indexes filled, a quarter of those deleted
		t.Fatalf("vigil holds only %d keys", len(fwd))
	}
	if d := diff(fwd, rev); d != "" {
		t.Fatalf("forward scans differ: %s", d)
	}
	if d := diff(dump(t, v, false), dump(t, p, false)); d != "" {
		t.Fatalf("reverse scans differ: %s", d)
	}
	if d := diff(fwd, reverse(dump(t, v, false))); d != "" {
		t.Fatalf("vigil forward and reverse scans differ: %s", d)
	}
	// Point reads and seeks over every index, present or deleted.
	key := make([]byte, 16)
	vi, _ := v.NewIter()
	pi, _ := p.NewIter()
	defer vi.Close()
	defer pi.Close()
	for i := uint64(0); i <= num; i++ {
		bench.MakeKey(key, i)
		vf, vn, verr := v.Get(key, nil)
		pf, pn, perr := p.Get(key, nil)
		if verr != nil || perr != nil || vf != pf || vn != pn {
			t.Fatalf("Get(%x): vigil %v %d %v, pebble %v %d %v", key, vf, vn, verr, pf, pn, perr)
		}
		vs, ps := vi.SeekGE(key), pi.SeekGE(key)
		if vs != ps || (vs && (!bytes.Equal(vi.Key(), pi.Key()) || !bytes.Equal(vi.Value(), pi.Value()))) {
			t.Fatalf("SeekGE(%x) differs", key)
		}
	}
}

type kv struct{ k, v string }

func dump(t *testing.T, e bench.Engine, forward bool) []kv {
	t.Helper()
	it, err := e.NewIter()
	if err != nil {
		t.Fatal(err)
	}
	var out []kv
	var ok bool
	if forward {
		ok = it.First()
	} else {
		ok = it.Last()
	}
	for ; ok; ok = map[bool]func() bool{true: it.Next, false: it.Prev}[forward]() {
		out = append(out, kv{string(it.Key()), string(it.Value())})
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func reverse(s []kv) []kv {
	out := make([]kv, len(s))
	for i, x := range s {
		out[len(s)-1-i] = x
	}
	return out
}

func diff(a, b []kv) string {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return fmt.Sprintf("entry %d: %x=%q vs %x=%q", i, a[i].k, a[i].v, b[i].k, b[i].v)
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d entries vs %d", len(a), len(b))
	}
	return ""
}

func TestDescribe(t *testing.T) {
	d, err := Describe(baseOptions(), 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"block 8192 B", "bloom 12 bits/key", "vigil xxh3", "pebble crc32c", "vigil 16 MiB of blocks; pebble 16 MiB + 2 x write buffer", "L0 trigger 4", "target file 4 MiB"} {
		if !strings.Contains(d, want) {
			t.Errorf("Describe lacks %q:\n%s", want, d)
		}
	}
	o := baseOptions()
	o.CostWriteBufferToCache = true
	if d, err := Describe(o, 2); err != nil || !strings.Contains(d, "both 16 MiB + 2 x write buffer, memtables charged") {
		t.Errorf("Describe with memtables charged to both caches (%v):\n%s", err, d)
	}
	o = baseOptions()
	o.Compression = "lz4"
	if _, err := Describe(o, 2); err == nil {
		t.Error("Describe accepted an unknown compression")
	}
}

// TestVigilCacheWithCredit checks that with memtables charged to the cache
// Vigil gets one limit (MemoryBudget) as large as Pebble's cache, and that
// otherwise its cache stays --cache_size of blocks.
func TestVigilCacheWithCredit(t *testing.T) {
	o := baseOptions()
	o.CostWriteBufferToCache = true
	po, err := PebbleOptions(o, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer po.Cache.Unref()
	vo, err := bench.VigilOptions(VigilCacheWithCredit(o, 2))
	if err != nil {
		t.Fatal(err)
	}
	if vo.MemoryBudget != po.Cache.MaxSize() {
		t.Errorf("Vigil's MemoryBudget %d, Pebble's cache %d: want them equal", vo.MemoryBudget, po.Cache.MaxSize())
	}
	o.CostWriteBufferToCache = false
	if vo, err = bench.VigilOptions(VigilCacheWithCredit(o, 2)); err != nil || vo.MemoryBudget != 0 || vo.BlockCacheSize != o.CacheSize {
		t.Errorf("blocks only: MemoryBudget %d, BlockCacheSize %d (%v); want 0 and %d", vo.MemoryBudget, vo.BlockCacheSize, err, o.CacheSize)
	}
	o.CostWriteBufferToCache, o.CacheSize = true, 0
	if got := VigilCacheWithCredit(o, 2); got.CacheSize != 0 {
		t.Errorf("no cache: credit gave Vigil %d bytes", got.CacheSize)
	}
}
