package manifest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/testcmp"
)

// parseFile reads "num:smallest-largest#seqlo-seqhi" (seqs optional, 1-1).
// The smallest bound is smallest#seqhi,SET and the largest largest#seqlo,SET;
// a largest written "key)" is a range tombstone's exclusive end.
func parseFile(t testing.TB, s string) *FileMetadata {
	numStr, rest, ok := strings.Cut(s, ":")
	num, err := strconv.ParseUint(numStr, 10, 64)
	if !ok || err != nil {
		t.Fatalf("bad file %q", s)
	}
	keys, seqs, _ := strings.Cut(rest, "#")
	lo, hi := uint64(1), uint64(1)
	if seqs != "" {
		a, b, _ := strings.Cut(seqs, "-")
		lo, _ = strconv.ParseUint(a, 10, 64)
		hi, _ = strconv.ParseUint(b, 10, 64)
	}
	sk, lk, ok := strings.Cut(keys, "-")
	if !ok {
		t.Fatalf("bad key range in %q", s)
	}
	largest := base.MakeInternalKey([]byte(lk), lo, base.KindSet)
	if strings.HasSuffix(lk, ")") {
		largest = base.MakeInternalKey([]byte(strings.TrimSuffix(lk, ")")), base.SeqNumMax, base.KindRangeDelete)
	}
	return &FileMetadata{FileNum: num, Size: 100, Smallest: base.MakeInternalKey([]byte(sk), hi, base.KindSet), Largest: largest,
		SmallestSeq: lo, LargestSeq: hi}
}

// parseEdit reads lines "add L<n> <file>" and "delete L<n> <num>".
func parseEdit(t testing.TB, input string) *VersionEdit {
	e := &VersionEdit{}
	for _, line := range strings.Split(strings.TrimSpace(input), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || len(f[1]) != 2 || f[1][0] != 'L' {
			t.Fatalf("bad edit line %q", line)
		}
		level := int(f[1][1] - '0')
		switch f[0] {
		case "add":
			e.Added = append(e.Added, NewFile{Level: level, Meta: parseFile(t, f[2])})
		case "delete":
			n, _ := strconv.ParseUint(f[2], 10, 64)
			e.Deleted = append(e.Deleted, DeletedFile{Level: level, FileNum: n})
		default:
			t.Fatalf("bad edit line %q", line)
		}
	}
	return e
}

// TestBuilder runs testdata/builder: edits applied to versions, the
// resulting order of each level, and the invariants Build enforces. Each
// "apply" starts from the last version built; "reset" starts over. It also
// round-trips every edit through its encoding, and checks reference counts
// (files obsolete only when no version holds them). "reset cmp=reverse"
// builds the next versions under testcmp.Reverse, "reset cmp=any" under
// AnyComparer.
func TestBuilder(t *testing.T) {
	var cur *Version
	var cmp *base.Comparer
	var obsolete []uint64
	onObsolete := func(fs []*FileMetadata) {
		for _, f := range fs {
			obsolete = append(obsolete, f.FileNum)
		}
	}
	datadriven.RunTest(t, "testdata/builder", func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "reset":
			cur, obsolete, cmp = nil, nil, nil
			if d.HasArg("cmp") {
				var name string
				d.ScanArgs(t, "cmp", &name)
				cmp = map[string]*base.Comparer{"reverse": testcmp.Reverse.Resolve(), "any": AnyComparer}[name]
			}
			return ""
		case "apply":
			e := parseEdit(t, d.Input)
			dec, err := DecodeVersionEdit(e.Encode(nil), "test")
			if err != nil {
				t.Fatalf("round trip: %v", err)
			}
			b := NewBuilder(cmp, cur)
			if err := b.Apply(dec); err != nil {
				return "error: " + err.Error() + "\n"
			}
			v, err := b.Build(onObsolete)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			v.Ref()
			obsolete = nil
			if cur != nil {
				cur.Unref()
			}
			cur = v
			out := v.String()
			if len(obsolete) > 0 {
				out += fmt.Sprintf("obsolete: %v\n", obsolete)
			}
			return out
		case "overlaps":
			var level int
			var start, end string
			d.ScanArgs(t, "level", &level)
			d.MaybeScanArgs(t, "start", &start)
			d.MaybeScanArgs(t, "end", &end)
			var s, e []byte
			if start != "" {
				s = []byte(start)
			}
			if end != "" {
				e = []byte(end)
			}
			var nums []uint64
			for _, f := range cur.Overlaps(level, s, e) {
				nums = append(nums, f.FileNum)
			}
			return fmt.Sprintf("%v\n", nums)
		case "find":
			var level int
			var key string
			d.ScanArgs(t, "level", &level)
			d.ScanArgs(t, "key", &key)
			i := FindFile(cur.Cmp, cur.Levels[level], []byte(key))
			if i == len(cur.Levels[level]) {
				return "none\n"
			}
			return fmt.Sprintf("%06d\n", cur.Levels[level][i].FileNum)
		}
		t.Fatalf("unknown command %q", d.Cmd)
		return ""
	})
}
