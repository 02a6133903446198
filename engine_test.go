package vigil

// Unit tests of the engine core that lives in the root package: the merging
// iterator, the level iterator and the compaction picker, each driven by a
// testdata file that shows input and output side by side.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/manifest"
	"github.com/vigildb/vigil/sst"
)

// testIter is an InternalIterator over sorted entries, in both directions.
type testIter struct {
	keys []base.InternalKey
	vals [][]byte
	i    int
}

func (s *testIter) seek(i int) bool       { s.i = i; return s.Valid() }
func (s *testIter) First() bool           { return s.seek(0) }
func (s *testIter) Last() bool            { return s.seek(len(s.keys) - 1) }
func (s *testIter) Next() bool            { return s.seek(s.i + 1) }
func (s *testIter) Prev() bool            { return s.seek(s.i - 1) }
func (s *testIter) Valid() bool           { return s.i >= 0 && s.i < len(s.keys) }
func (s *testIter) Key() base.InternalKey { return s.keys[s.i] }
func (s *testIter) Value() []byte         { return s.vals[s.i] }
func (s *testIter) Error() error          { return nil }
func (s *testIter) Close() error          { return nil }
func (s *testIter) SeekGE(k []byte) bool {
	return s.seek(sort.Search(len(s.keys), func(i int) bool { return string(s.keys[i].UserKey) >= string(k) }))
}
func (s *testIter) SeekLT(k []byte) bool {
	return s.seek(sort.Search(len(s.keys), func(i int) bool { return string(s.keys[i].UserKey) >= string(k) }) - 1)
}

// parseEntries reads "key#seq,KIND[=value]" tokens (KIND: SET, DEL),
// sorted into internal-key order.
func parseEntries(t testing.TB, s string) *testIter {
	it := &testIter{}
	type kv struct {
		k base.InternalKey
		v []byte
	}
	var kvs []kv
	for _, f := range strings.Fields(s) {
		body, val, _ := strings.Cut(f, "=")
		uk, rest, ok := strings.Cut(body, "#")
		seqStr, kindStr, ok2 := strings.Cut(rest, ",")
		seq, err := strconv.ParseUint(seqStr, 10, 64)
		if !ok || !ok2 || err != nil {
			t.Fatalf("bad entry %q", f)
		}
		kind := base.KindSet
		if kindStr == "DEL" {
			kind = base.KindDelete
		}
		kvs = append(kvs, kv{base.MakeInternalKey([]byte(uk), seq, kind), []byte(val)})
	}
	sort.Slice(kvs, func(i, j int) bool { return base.CompareInternal(kvs[i].k, kvs[j].k) < 0 })
	for _, e := range kvs {
		it.keys = append(it.keys, e.k)
		it.vals = append(it.vals, e.v)
	}
	return it
}

func fmtEntry(it base.InternalIterator, ok bool) string {
	if !ok {
		if err := it.Error(); err != nil {
			return "err: " + err.Error()
		}
		return "."
	}
	k := it.Key()
	kind := "SET"
	if k.Kind() == base.KindDelete {
		kind = "DEL"
	}
	return fmt.Sprintf("%s#%d,%s=%s", k.UserKey, k.SeqNum(), kind, it.Value())
}

// runIterOps applies the ops of input, one per line (first, last, next,
// prev, seek-ge k, seek-lt k), and prints each result.
func runIterOps(t testing.TB, it base.InternalIterator, input string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(input), "\n") {
		f := strings.Fields(line)
		var ok bool
		switch f[0] {
		case "first":
			ok = it.First()
		case "last":
			ok = it.Last()
		case "next":
			ok = it.Next()
		case "prev":
			ok = it.Prev()
		case "seek-ge":
			ok = it.SeekGE([]byte(f[1]))
		case "seek-lt":
			ok = it.SeekLT([]byte(f[1]))
		default:
			t.Fatalf("unknown op %q", line)
		}
		fmt.Fprintf(&b, "%s: %s\n", line, fmtEntry(it, ok))
	}
	return b.String()
}

// TestMergingIter runs testdata/merging_iter: sources defined one per line,
// merged, and moved in both directions.
func TestMergingIter(t *testing.T) {
	var children []base.InternalIterator
	datadriven.RunTest(t, "testdata/merging_iter", func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "define":
			children = nil
			for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
				children = append(children, parseEntries(t, line))
			}
			return ""
		case "iter":
			return runIterOps(t, newMergingIter(base.DefaultComparer, children), d.Input)
		}
		t.Fatalf("unknown command %q", d.Cmd)
		return ""
	})
}

// testTables writes one SST per input line into fs/db and returns their
// metadata in key order, numbered from 1: the files of one sorted level.
func testTables(t testing.TB, fs vfs.FS, input string) []*manifest.FileMetadata {
	var files []*manifest.FileMetadata
	for i, line := range strings.Split(strings.TrimSpace(input), "\n") {
		src := parseEntries(t, line)
		num := uint64(i + 1)
		f, err := fs.Create(makeFilename(fs, "db", fileTypeTable, num))
		if err != nil {
			t.Fatal(err)
		}
		w := sst.NewWriter(f, sst.WriterOptions{FileNum: num, BlockSize: 64})
		for ok := src.First(); ok; ok = src.Next() {
			if err := w.Add(src.Key(), src.Value()); err != nil {
				t.Fatal(err)
			}
		}
		m, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, metaFromSST(num, m))
	}
	return files
}

// TestLevelIter runs testdata/level_iter: the tables of one sorted level
// (one per line), iterated as one, within optional bounds, opening each
// table only when the iteration reaches it.
func TestLevelIter(t *testing.T) {
	var tc *tableCache
	var files []*manifest.FileMetadata
	datadriven.RunTest(t, "testdata/level_iter", func(t *testing.T, td *datadriven.TestData) string {
		switch td.Cmd {
		case "define":
			fs := vfs.NewMem()
			if err := fs.MkdirAll("db", 0o755); err != nil {
				t.Fatal(err)
			}
			tc = newTableCache(tableCacheOptions{fs: fs, dirname: "db"}, 100)
			files = testTables(t, fs, td.Input)
			var b strings.Builder
			for _, f := range files {
				fmt.Fprintf(&b, "%06d: %s-%s\n", f.FileNum, f.Smallest.UserKey, f.Largest.UserKey)
			}
			return b.String()
		case "iter":
			var lower, upper string
			td.MaybeScanArgs(t, "lower", &lower)
			td.MaybeScanArgs(t, "upper", &upper)
			var lo, hi []byte
			if lower != "" {
				lo = []byte(lower)
			}
			if upper != "" {
				hi = []byte(upper)
			}
			before := tc.hits() + tc.misses.Load()
			it := newLevelIter(tc, files, lo, hi, sst.ReadOptions{})
			out := runIterOps(t, it, td.Input)
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
			gets := tc.hits() + tc.misses.Load() - before
			return out + fmt.Sprintf("tables read: %d\n", gets)
		}
		t.Fatalf("unknown command %q", td.Cmd)
		return ""
	})
}

// TestCompactionPicker runs testdata/compaction_picker: a version defined
// level by level ("L<n> num:smallest-largest@size ..."), options, and the
// compactions picked from it in turn (round-robin within a level), the
// steps of a manual compaction, and the move that ends one (settle).
func TestCompactionPicker(t *testing.T) {
	var p *leveledPicker
	var v *manifest.Version
	datadriven.RunTest(t, "testdata/compaction_picker", func(t *testing.T, td *datadriven.TestData) string {
		switch td.Cmd {
		case "define":
			o := &Options{L0CompactionTrigger: 4, LBaseMaxBytes: 1000, LevelMultiplier: 10}
			td.MaybeScanArgs(t, "l0-trigger", &o.L0CompactionTrigger)
			td.MaybeScanArgs(t, "lbase", &o.LBaseMaxBytes)
			o.L0StopWritesTrigger = max(o.L0CompactionTrigger, 12)
			p = newLeveledPicker(o.EnsureDefaults())
			e := &manifest.VersionEdit{}
			for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
				f := strings.Fields(line)
				level := int(f[0][1] - '0')
				for _, spec := range f[1:] {
					e.Added = append(e.Added, manifest.NewFile{Level: level, Meta: parsePickerFile(t, spec)})
				}
			}
			b := manifest.NewBuilder(nil, nil)
			if err := b.Apply(e); err != nil {
				t.Fatal(err)
			}
			var err error
			if v, err = b.Build(nil); err != nil {
				t.Fatal(err)
			}
			scores := p.scores(v)
			var out strings.Builder
			for l := 0; l < manifest.NumLevels-1; l++ {
				if len(v.Levels[l]) > 0 {
					fmt.Fprintf(&out, "L%d: %d files, %d bytes, score %.2f\n", l, len(v.Levels[l]), v.LevelSize(l), scores[l])
				}
			}
			return out.String()
		case "pick":
			return fmtPicked(p.pick(v))
		case "manual":
			// The steps of a manual compaction of [start, end], as Compact
			// takes them, assuming each runs: its output level feeds the
			// next step's prevOutput (the version does not change here).
			var start, end string
			td.MaybeScanArgs(t, "start", &start)
			td.MaybeScanArgs(t, "end", &end)
			var lo, hi []byte
			if start != "" {
				lo = []byte(start)
			}
			if end != "" {
				hi = []byte(end)
			}
			var out strings.Builder
			prev := -1
			for level := 0; level < manifest.NumLevels; level++ {
				c, done := p.manual(v, level, lo, hi, prev)
				if done {
					fmt.Fprintf(&out, "L%d: done\n", level)
					break
				}
				if c == nil {
					continue
				}
				fmt.Fprintf(&out, "%s\n", c)
				prev = c.outputLevel
			}
			return out.String()
		case "settle":
			return fmtPicked(p.settle(v))
		}
		t.Fatalf("unknown command %q", td.Cmd)
		return ""
	})
}

// fmtPicked prints a picked compaction ("none" for nil), marking a
// trivial move.
func fmtPicked(c *compaction) string {
	if c == nil {
		return "none\n"
	}
	move := ""
	if c.trivialMove() {
		move = " (trivial move)"
	}
	return c.String() + move + "\n"
}

// parsePickerFile reads "num:smallest-largest@size" (L0 files get their
// number as seqnum, so newer files are larger numbers).
func parsePickerFile(t testing.TB, s string) *manifest.FileMetadata {
	spec, sizeStr, _ := strings.Cut(s, "@")
	numStr, keys, ok := strings.Cut(spec, ":")
	sk, lk, ok2 := strings.Cut(keys, "-")
	num, err := strconv.ParseUint(numStr, 10, 64)
	size, err2 := strconv.ParseUint(sizeStr, 10, 64)
	if !ok || !ok2 || err != nil || err2 != nil {
		t.Fatalf("bad file %q (want num:smallest-largest@size)", s)
	}
	return &manifest.FileMetadata{FileNum: num, Size: size, SmallestSeq: num, LargestSeq: num,
		Smallest: base.MakeInternalKey([]byte(sk), num, base.KindSet), Largest: base.MakeInternalKey([]byte(lk), num, base.KindSet)}
}
