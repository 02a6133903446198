package vigil

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/testcmp"
)

// model is the reference the DB is checked against: a plain map, copied
// for snapshots.
type model map[string]string

func (m model) clone() model {
	c := make(model, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// sortedKeys returns the keys in [lower, upper) in c's order (nil: bytewise).
func (m model) sortedKeys(c *Comparer, lower, upper []byte) []string {
	c = c.Resolve()
	var ks []string
	for k := range m {
		if lower != nil && c.Compare([]byte(k), lower) < 0 {
			continue
		}
		if upper != nil && c.Compare([]byte(k), upper) >= 0 {
			continue
		}
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return c.Compare([]byte(ks[i]), []byte(ks[j])) < 0 })
	return ks
}

// modelComparers are the orders the model test runs under: bytewise, and
// two that differ from it throughout (see package testcmp).
var modelComparers = []*Comparer{nil, testcmp.Reverse, testcmp.Versioned}

// keyGen returns the model's key maker for comparer c: n keys, which
// under testcmp.Versioned are n/8 prefixes with 8 versions each.
func keyGen(c *Comparer) func(rng *rand.Rand, n int) []byte {
	if c == testcmp.Versioned {
		return func(rng *rand.Rand, n int) []byte {
			x := rng.IntN(n)
			return testcmp.VersionedKey(fmt.Appendf(nil, "k%04d", x/8), uint64(x%8)<<(8*uint(x%3)))
		}
	}
	return modelKey
}

// smallOptions make flushes and compactions happen after a few hundred writes.
func smallOptions(fs vfs.FS, rng *rand.Rand) *Options {
	o := &Options{
		FS:                  fs,
		WriteBufferSize:     minWriteBufferSize,
		BlockSize:           256 << rng.IntN(3),
		TargetFileSize:      8 << 10,
		LBaseMaxBytes:       32 << 10,
		L0CompactionTrigger: 2,
		L0StopWritesTrigger: 8,
		// None, one that holds everything, or one so small that reverse
		// scans step out of blocks it has already evicted (Lookback).
		BlockCacheSize:       []int64{0, 1 << 20, 16 << 10}[rng.IntN(3)],
		ChecksumType:         ChecksumType(1 + rng.IntN(6)),
		ParanoidMemoryChecks: rng.IntN(2) == 0,
	}
	if o.ChecksumType != ChecksumNone {
		o.MemtableProtectionBytesPerKey = []int{0, 1, 2, 4, 8}[rng.IntN(5)]
	}
	if rng.IntN(2) == 0 {
		o.Compression = NoCompression
	}
	if o.BlockCacheSize == 0 {
		o.BlockCacheSize = -1
	}
	if o.ChecksumType != ChecksumNone {
		o.BatchProtectionBytesPerKey = []int{0, 1, 2, 4, 8}[rng.IntN(5)]
	}
	return o
}

func modelKey(rng *rand.Rand, n int) []byte {
	return []byte(fmt.Sprintf("key%05d", rng.IntN(n)))
}

// checkIter walks it forward and backward (with seeks) and compares with m.
func checkIter(t *testing.T, it *Iterator, m model, lower, upper []byte, rng *rand.Rand, what string) {
	t.Helper()
	checkIterCmp(t, nil, modelKey, it, m, lower, upper, rng, what)
}

// checkIterCmp is checkIter for keys in c's order, made by key.
func checkIterCmp(t *testing.T, c *Comparer, key func(*rand.Rand, int) []byte, it *Iterator, m model, lower, upper []byte, rng *rand.Rand, what string) {
	t.Helper()
	c = c.Resolve()
	want := m.sortedKeys(c, lower, upper)
	search := func(k []byte) int {
		return sort.Search(len(want), func(i int) bool { return c.Compare([]byte(want[i]), k) >= 0 })
	}
	var got []string
	for ok := it.First(); ok; ok = it.Next() {
		if v := string(it.Value()); v != m[string(it.Key())] {
			t.Fatalf("%s: forward: key %q value %q, want %q", what, it.Key(), v, m[string(it.Key())])
		}
		got = append(got, string(it.Key()))
	}
	if err := it.Error(); err != nil {
		t.Fatalf("%s: forward: %v", what, err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: forward scan\n got %v\nwant %v", what, got, want)
	}
	got = got[:0]
	for ok := it.Last(); ok; ok = it.Prev() {
		if v := string(it.Value()); v != m[string(it.Key())] {
			t.Fatalf("%s: reverse: key %q value %q, want %q", what, it.Key(), v, m[string(it.Key())])
		}
		got = append(got, string(it.Key()))
	}
	if err := it.Error(); err != nil {
		t.Fatalf("%s: reverse: %v", what, err)
	}
	for i, j := 0, len(got)-1; i < j; i, j = i+1, j-1 {
		got[i], got[j] = got[j], got[i]
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: reverse scan\n got %v\nwant %v", what, got, want)
	}
	// Random seeks with a few steps in random directions.
	for i := 0; i < 10; i++ {
		k := key(rng, 600)
		ge := search(k)
		if it.SeekGE(k) != (ge < len(want)) || (ge < len(want) && string(it.Key()) != want[ge]) {
			t.Fatalf("%s: SeekGE(%s): valid=%v key=%q, want index %d of %d", what, k, it.Valid(), it.Key(), ge, len(want))
		}
		pos := ge
		if !it.Valid() {
			continue
		}
		for s := 0; s < 5; s++ {
			if rng.IntN(2) == 0 {
				pos++
				it.Next()
			} else {
				pos--
				it.Prev()
			}
			if pos < 0 || pos >= len(want) {
				if it.Valid() {
					t.Fatalf("%s: stepping after SeekGE(%s): at %q, want exhausted", what, k, it.Key())
				}
				break
			}
			if !it.Valid() || string(it.Key()) != want[pos] {
				t.Fatalf("%s: stepping after SeekGE(%s): valid=%v key=%q want %q (err %v)", what, k, it.Valid(), it.Key(), want[pos], it.Error())
			}
		}
		if c.Split != nil {
			// SeekPrefixGE: the first key >= k of k's prefix, if any (the
			// sources whose filters exclude the prefix stay unread).
			i := search(k)
			want1 := i < len(want) && c.Equal(c.Prefix([]byte(want[i])), c.Prefix(k))
			if it.SeekPrefixGE(k) != want1 || (want1 && string(it.Key()) != want[i]) {
				t.Fatalf("%s: SeekPrefixGE(%x): valid=%v key=%x, want %v (err %v)", what, k, it.Valid(), it.Key(), want1, it.Error())
			}
		}
		lt := search(k) - 1
		if it.SeekLT(k) != (lt >= 0) || (lt >= 0 && string(it.Key()) != want[lt]) {
			t.Fatalf("%s: SeekLT(%s): valid=%v key=%q, want index %d", what, k, it.Valid(), it.Key(), lt)
		}
	}
}

// TestModel runs random writes, reads, iterators, snapshots, flushes,
// compactions and reopens against a map, with options drawn per seed and
// tiny buffers so that the LSM has many files at several levels.
func TestModel(t *testing.T) {
	seeds := 24
	ops := 3000
	if testing.Short() {
		seeds, ops = 6, 1500
	}
	first := 1
	// VIGIL_MODEL_SEEDS=first:count runs other seeds, for soak runs.
	if env := os.Getenv("VIGIL_MODEL_SEEDS"); env != "" {
		if _, err := fmt.Sscanf(env, "%d:%d", &first, &seeds); err != nil {
			t.Fatalf("VIGIL_MODEL_SEEDS=%q: want first:count", env)
		}
	}
	for seed := first; seed < first+seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runModel(t, nil, uint64(seed), ops)
		})
	}
}

// TestModelComparers is TestModel under the other orders of
// modelComparers: every part of the engine that orders keys must use the
// comparer, or keys go missing or come back out of order here.
func TestModelComparers(t *testing.T) {
	seeds, ops := 8, 3000
	if testing.Short() {
		seeds, ops = 3, 1500
	}
	for _, c := range modelComparers[1:] {
		for seed := 1; seed <= seeds; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", c.Name, seed), func(t *testing.T) {
				runModel(t, c, uint64(seed), ops)
			})
		}
	}
}

func runModel(t *testing.T, cmp *Comparer, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	fs := vfs.NewMem()
	opts := smallOptions(fs, rng)
	opts.Comparer = cmp
	modelKey := keyGen(cmp)
	rc := cmp.Resolve()
	// Merges, with a counter (values are 8-byte integers) or an append
	// operator, checked against the model's own combining.
	counter := rng.IntN(2) == 0
	opts.Merger = AppendMerger
	if counter {
		opts.Merger = Uint64AddMerger
	}
	db, err := Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if db != nil {
			db.Close()
		}
	}()
	m := model{}
	type snap struct {
		s *Snapshot
		m model
	}
	var snaps []snap
	const keys = 600
	value := func() string {
		if counter {
			return string(binary.LittleEndian.AppendUint64(nil, rng.Uint64N(1e6)))
		}
		return fmt.Sprintf("v%d-%s", rng.IntN(1e6), bytes.Repeat([]byte{'x'}, rng.IntN(200)))
	}
	merge := func(m model, k []byte, op string) {
		old, ok := m[string(k)]
		if !counter {
			m[string(k)] = old + op
			return
		}
		var n uint64
		if ok {
			n = binary.LittleEndian.Uint64([]byte(old))
		}
		m[string(k)] = string(binary.LittleEndian.AppendUint64(nil, n+binary.LittleEndian.Uint64([]byte(op))))
	}
	for i := 0; i < ops; i++ {
		switch r := rng.IntN(100); {
		case r < 28:
			k, v := modelKey(rng, keys), value()
			if err := db.Put(k, []byte(v), nil); err != nil {
				t.Fatal(err)
			}
			m[string(k)] = v
		case r < 40:
			k, v := modelKey(rng, keys), value()
			if err := db.Merge(k, []byte(v), nil); err != nil {
				t.Fatal(err)
			}
			merge(m, k, v)
		case r < 50:
			k := modelKey(rng, keys)
			if err := db.Delete(k, nil); err != nil {
				t.Fatal(err)
			}
			delete(m, string(k))
		case r < 53:
			a, b := modelKey(rng, keys), modelKey(rng, keys)
			if rc.Compare(a, b) > 0 {
				a, b = b, a
			}
			if bytes.Equal(a, b) {
				continue
			}
			if err := db.DeleteRange(a, b, nil); err != nil {
				t.Fatal(err)
			}
			for k := range m {
				if rc.Compare([]byte(k), a) >= 0 && rc.Compare([]byte(k), b) < 0 {
					delete(m, k)
				}
			}
		case r < 60:
			b := db.NewBatch()
			for j := rng.IntN(10); j >= 0; j-- {
				k := modelKey(rng, keys)
				switch rng.IntN(3) {
				case 0:
					b.Delete(k)
					delete(m, string(k))
				case 1:
					v := value()
					b.Merge(k, []byte(v))
					merge(m, k, v)
				default:
					v := value()
					b.Put(k, []byte(v))
					m[string(k)] = v
				}
			}
			if err := db.Apply(b, nil); err != nil {
				t.Fatal(err)
			}
		case r < 80:
			k := modelKey(rng, keys)
			v, err := db.Get(k)
			want, ok := m[string(k)]
			if ok != (err == nil) || (ok && string(v) != want) || (!ok && !errors.Is(err, ErrNotFound)) {
				t.Fatalf("op %d: Get(%s) = %q, %v; want %q, %v", i, k, v, err, want, ok)
			}
		case r < 83:
			var lower, upper []byte
			if rng.IntN(2) == 0 {
				lower = modelKey(rng, keys)
			}
			if rng.IntN(2) == 0 {
				upper = modelKey(rng, keys)
			}
			if lower != nil && upper != nil && rc.Compare(lower, upper) > 0 {
				lower, upper = upper, lower
			}
			it, err := db.NewIter(&IterOptions{LowerBound: lower, UpperBound: upper})
			if err != nil {
				t.Fatal(err)
			}
			checkIterCmp(t, cmp, modelKey, it, m, lower, upper, rng, fmt.Sprintf("op %d iter [%s,%s)", i, lower, upper))
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
		case r < 86:
			snaps = append(snaps, snap{db.NewSnapshot(), m.clone()})
		case r < 90 && len(snaps) > 0:
			j := rng.IntN(len(snaps))
			s := snaps[j]
			k := modelKey(rng, keys)
			v, err := s.s.Get(k)
			want, ok := s.m[string(k)]
			if ok != (err == nil) || (ok && string(v) != want) {
				t.Fatalf("op %d: snapshot Get(%s) = %q, %v; want %q, %v", i, k, v, err, want, ok)
			}
			if rng.IntN(4) == 0 {
				it, err := s.s.NewIter(nil)
				if err != nil {
					t.Fatal(err)
				}
				checkIterCmp(t, cmp, modelKey, it, s.m, nil, nil, rng, fmt.Sprintf("op %d snapshot iter", i))
				it.Close()
			}
			if rng.IntN(3) == 0 {
				s.s.Close()
				snaps = append(snaps[:j], snaps[j+1:]...)
			}
		case r < 93:
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		case r < 95:
			a := modelKey(rng, keys)
			b := modelKey(rng, keys)
			if rc.Compare(a, b) > 0 {
				a, b = b, a
			}
			if err := db.Compact(a, b); err != nil {
				t.Fatal(err)
			}
		case r < 97:
			// Reopen: snapshots die with the DB.
			for _, s := range snaps {
				s.s.Close()
			}
			snaps = nil
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = nil
			if db, err = Open("db", opts); err != nil {
				t.Fatal(err)
			}
		}
	}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	checkIterCmp(t, cmp, modelKey, it, m, nil, nil, rng, "final")
	it.Close()
	if err := db.Verify(); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	met := db.Metrics()
	t.Logf("merger %s; options %s/%v/paranoid=%v/prot=%d/batchprot=%d; flushes %d, compactions %d; levels %v",
		opts.Merger.Name, opts.ChecksumType, opts.Compression, opts.ParanoidMemoryChecks, opts.MemtableProtectionBytesPerKey, opts.BatchProtectionBytesPerKey,
		met.Flush.Count, met.Compact.Count, levelFiles(met))
	for _, s := range snaps {
		s.s.Close()
	}
}

func levelFiles(m *Metrics) []int {
	var out []int
	for _, l := range m.Levels {
		out = append(out, l.NumFiles)
	}
	return out
}
