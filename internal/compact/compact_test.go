package compact

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/rangedel"
	"github.com/vigildb/vigil/internal/testcmp"
)

// sliceIter is an InternalIterator over sorted entries (forward only is
// all a compaction needs).
type sliceIter struct {
	keys []base.InternalKey
	vals [][]byte
	i    int
}

func (s *sliceIter) First() bool           { s.i = 0; return s.Valid() }
func (s *sliceIter) Next() bool            { s.i++; return s.Valid() }
func (s *sliceIter) Valid() bool           { return s.i >= 0 && s.i < len(s.keys) }
func (s *sliceIter) Key() base.InternalKey { return s.keys[s.i] }
func (s *sliceIter) Value() []byte         { return s.vals[s.i] }
func (s *sliceIter) Error() error          { return nil }
func (s *sliceIter) Close() error          { return nil }
func (s *sliceIter) SeekGE([]byte) bool    { panic("unused") }
func (s *sliceIter) SeekLT([]byte) bool    { panic("unused") }
func (s *sliceIter) Last() bool            { panic("unused") }
func (s *sliceIter) Prev() bool            { panic("unused") }
func (s *sliceIter) SetBounds(_, _ []byte) {}
func (s *sliceIter) String() string        { return fmt.Sprint(len(s.keys)) }

// parseEntry reads "key#seq,KIND[=value]" (KIND: SET, DEL or MERGE).
func parseEntry(t testing.TB, f string) (base.InternalKey, []byte) {
	kv, val, _ := strings.Cut(f, "=")
	uk, rest, ok := strings.Cut(kv, "#")
	seqStr, kind, ok2 := strings.Cut(rest, ",")
	seq, err := strconv.ParseUint(seqStr, 10, 64)
	if !ok || !ok2 || err != nil {
		t.Fatalf("bad entry %q (want key#seq,KIND[=value])", f)
	}
	k := base.KindSet
	switch kind {
	case "SET":
	case "DEL":
		k = base.KindDelete
	case "MERGE":
		k = base.KindMerge
	default:
		t.Fatalf("bad kind in %q", f)
	}
	return base.MakeInternalKey([]byte(uk), seq, k), []byte(val)
}

// fakeTable records what an output received; its size is 10 bytes per
// entry.
type fakeTable struct {
	n       int
	entries []string
	tombs   []string
}

func (f *fakeTable) Add(k base.InternalKey, v []byte) error {
	f.entries = append(f.entries, fmt.Sprintf("%s#%d,%s=%s", k.UserKey, k.SeqNum(), kindName(k.Kind()), v))
	return nil
}

func (f *fakeTable) AddRangeDel(start, end []byte, seq uint64) error {
	f.tombs = append(f.tombs, fmt.Sprintf("[%s, %s)#%d", start, end, seq))
	return nil
}

func (f *fakeTable) EstimatedSize() uint64 { return uint64(10 * len(f.entries)) }

func kindName(k base.Kind) string {
	switch k {
	case base.KindDelete:
		return "DEL"
	case base.KindMerge:
		return "MERGE"
	}
	return "SET"
}

// testMerge concatenates (nil is the empty string); an operand containing
// "!" makes it fail, as a Merger's error does.
func testMerge(key, existing, operand []byte) ([]byte, error) {
	if strings.Contains(string(operand), "!") || strings.Contains(string(existing), "!") {
		return nil, fmt.Errorf("cannot merge %q into %q", operand, existing)
	}
	return append(append([]byte{}, existing...), operand...), nil
}

// TestCompaction runs testdata/*: one compaction over the entries and
// tombstones defined, printing each output table and the stats.
//
//	define [cmp=reverse]
//	         entries "key#seq,KIND=value" (sorted here, in the comparer's
//	         order) and tombstones "s-e#seq"
//	compact snaps=(a,b) bottom=<keys below the output, or none> target=N
func TestCompaction(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var in sliceIter
		var tombs []rangedel.Tombstone
		c := base.DefaultComparer
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "define":
				c = base.DefaultComparer
				if d.HasArg("cmp") {
					c = testcmp.Reverse.Resolve()
				}
				in, tombs = defineInput(t, c, d.Input)
				return ""
			case "compact":
				return runCompact(t, d, c, &in, tombs)
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}

// defineInput parses a define command: entries (key#seq,KIND=value) and
// range tombstones (start-end#seq), in any order.
func defineInput(t *testing.T, c *base.Comparer, input string) (sliceIter, []rangedel.Tombstone) {
	var in sliceIter
	var tombs []rangedel.Tombstone
	type kv struct {
		k base.InternalKey
		v []byte
	}
	var kvs []kv
	for _, f := range strings.Fields(input) {
		if se, seq, ok := strings.Cut(f, "#"); ok && strings.Contains(se, "-") && !strings.Contains(seq, ",") {
			s, e, _ := strings.Cut(se, "-")
			n, _ := strconv.ParseUint(seq, 10, 64)
			tombs = append(tombs, rangedel.Tombstone{Start: []byte(s), End: []byte(e), Seq: n})
			continue
		}
		k, v := parseEntry(t, f)
		kvs = append(kvs, kv{k, v})
	}
	sort.Slice(kvs, func(i, j int) bool { return c.CompareInternal(kvs[i].k, kvs[j].k) < 0 })
	for _, e := range kvs {
		in.keys = append(in.keys, e.k)
		in.vals = append(in.vals, e.v)
	}
	return in, tombs
}

// compactArgs reads a compact command's arguments: snaps, below (user keys
// with older data under the output level; "all": every key), settled (the
// seqnum every reader sees; default all) and target.
func compactArgs(t *testing.T, d *datadriven.TestData, c *base.Comparer) (snaps []uint64, bottom func(start, end []byte) bool, settled, target uint64) {
	if arg, ok := d.Arg("snaps"); ok {
		for _, v := range arg.Vals {
			n, _ := strconv.ParseUint(v, 10, 64)
			snaps = append(snaps, n)
		}
	}
	below := map[string]bool{}
	if arg, ok := d.Arg("below"); ok {
		for _, v := range arg.Vals {
			below[v] = true
		}
	}
	bottom = func(start, end []byte) bool {
		if below["all"] {
			return false
		}
		for k := range below {
			if c.Compare([]byte(k), start) >= 0 && c.Compare([]byte(k), end) <= 0 {
				return false
			}
		}
		return true
	}
	settled, target = base.SeqNumMax, 1<<30
	if d.HasArg("settled") {
		d.ScanArgs(t, "settled", &settled)
	}
	if d.HasArg("target") {
		d.ScanArgs(t, "target", &target)
	}
	return snaps, bottom, settled, target
}

// runCompact runs a compact command over in and tombs and renders the
// output tables and the stats.
func runCompact(t *testing.T, d *datadriven.TestData, c *base.Comparer, in *sliceIter, tombs []rangedel.Tombstone) string {
	snaps, bottom, settled, target := compactArgs(t, d, c)
	var st Stats
	it := NewIter(c, in, snaps, settled, tombs, bottom, testMerge, &st)
	var tables []*fakeTable
	open := func() (Writer, error) {
		ft := &fakeTable{n: len(tables)}
		tables = append(tables, ft)
		return ft, nil
	}
	finish := func(w Writer) (uint64, error) {
		ft := w.(*fakeTable)
		return uint64(len(ft.entries) + len(ft.tombs)), nil
	}
	out := NewOutputs(c, target, it.Kept, open, finish, &st)
	for ok := it.First(); ok; ok = it.Next() {
		if err := out.Add(it.Key(), it.Value()); err != nil {
			return err.Error()
		}
	}
	if err := out.Finish(); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, ft := range tables {
		fmt.Fprintf(&b, "output %d:\n", ft.n)
		for _, e := range ft.entries {
			fmt.Fprintf(&b, "  %s\n", e)
		}
		for _, e := range ft.tombs {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	fmt.Fprintf(&b, "%s\n", st)
	if err := CheckRead(&st, uint64(len(in.keys))); err != nil {
		fmt.Fprintf(&b, "%v\n", err)
	}
	return b.String()
}
