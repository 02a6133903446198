package memtable

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/vigildb/vigil/checksum"
	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/testcmp"
)

// foldLower lower-cases one ASCII letter.
func foldLower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func compareFold(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if x, y := foldLower(a[i]), foldLower(b[i]); x != y {
			return int(x) - int(y)
		}
	}
	return len(a) - len(b)
}

// foldComparer orders keys bytewise after ASCII lower-casing, so "KEY" and
// "key" are one user key in different bytes: unlike Reverse and Versioned,
// its Equal is not bytes.Equal, and a memtable that tested user keys for
// equality bytewise would miss them.
var foldComparer = &base.Comparer{
	Compare: compareFold,
	AbbreviatedKey: func(k []byte) uint64 {
		var b [8]byte
		for i := 0; i < len(k) && i < 8; i++ {
			b[i] = foldLower(k[i])
		}
		return base.BytewiseAbbreviatedKey(b[:min(len(k), 8)])
	},
	Name: "vigil.test.ASCIIFold",
}

// TestComparerEquality: Get's "same user key" is the comparer's Equal, and
// so is a duplicate Add's: versions in other bytes of one user key are that
// key's versions.
func TestComparerEquality(t *testing.T) {
	for _, paranoid := range []bool{false, true} {
		m := mustNew(t, Options{Comparer: foldComparer, ParanoidMemoryChecks: paranoid, ChecksumType: checksum.XXH3, ProtectionBytesPerKey: 8})
		if m.Comparer().Name != foldComparer.Name {
			t.Fatalf("Comparer() = %s", m.Comparer().Name)
		}
		for _, e := range []struct {
			seq  uint64
			key  string
			kind Kind
		}{{1, "Key", KindSet}, {2, "KEY", KindSet}, {3, "key", KindDelete}, {4, "kEy", KindSet}, {5, "keY", KindSet}} {
			if err := m.Add(e.seq, e.kind, []byte(e.key), []byte(fmt.Sprintf("v%d", e.seq))); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.Add(1, KindSet, []byte("KeY"), nil); !errors.Is(err, ErrRecordExists) {
			t.Fatalf("Add of an equal key, seqnum and kind: %v, want ErrRecordExists", err)
		}
		for snap, want := range map[uint64]string{1: "v1", 2: "v2", 4: "v4", 5: "v5", SeqNumMax: "v5"} {
			v, seq, kind, found, err := m.Get([]byte("KEY"), snap)
			if err != nil || !found || kind != KindSet || string(v) != want || fmt.Sprintf("v%d", seq) != want {
				t.Errorf("Get(KEY, %d) = %q#%d %s %t %v, want %s", snap, v, seq, kind, found, err, want)
			}
		}
		if _, seq, kind, found, err := m.Get([]byte("key"), 3); err != nil || !found || kind != KindDelete || seq != 3 {
			t.Errorf("Get(key, 3) = #%d %s %t %v, want the delete", seq, kind, found, err)
		}
		if _, _, _, found, err := m.Get([]byte("ke"), SeqNumMax); found || err != nil {
			t.Errorf("Get(ke) found=%t err=%v", found, err)
		}
		if _, _, _, _, ok := m.entryForTesting([]byte("KEY")); !ok {
			t.Error("entryForTesting missed an equal key in other bytes")
		}
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReverseOrder walks, seeks and reads a memtable under testcmp.Reverse
// by hand (the model run does so at random): keys bytewise descending,
// versions newest first; a seek between keys lands on the bytewise-smaller
// one; Get reads every version at snapshots between them; range tombstones
// come out by start, bytewise descending.
func TestReverseOrder(t *testing.T) {
	for _, paranoid := range []bool{false, true} {
		t.Run(fmt.Sprintf("paranoid=%t", paranoid), func(t *testing.T) { runReverseOrder(t, paranoid) })
	}
}

func runReverseOrder(t *testing.T, paranoid bool) {
	m := mustNew(t, Options{Comparer: testcmp.Reverse, ParanoidMemoryChecks: paranoid, ChecksumType: checksum.CRC32c, ProtectionBytesPerKey: 4})
	// Versions of each key at seqnums 10*i + 1..3; "b" also deleted at 4.
	keys := []string{"a", "b", "bb", "c"}
	seq := uint64(0)
	for i, k := range keys {
		for v := uint64(1); v <= 3; v++ {
			seq = uint64(10*i) + v
			if err := m.Add(seq, KindSet, []byte(k), []byte(fmt.Sprintf("%s@%d", k, seq))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := m.Add(14, KindDelete, []byte("b"), nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"c#33", "c#32", "c#31", "bb#23", "bb#22", "bb#21", "b#14", "b#13", "b#12", "b#11", "a#3", "a#2", "a#1"}
	it := m.NewIter(IterOptions{})
	var got []string
	for ok := it.First(); ok; ok = it.Next() {
		got = append(got, fmt.Sprintf("%s#%d", it.Key().UserKey, it.Key().SeqNum()))
	}
	if !slices.Equal(got, want) || it.Error() != nil {
		t.Fatalf("forward: %v (%v), want %v", got, it.Error(), want)
	}
	got = got[:0]
	for ok := it.Last(); ok; ok = it.Prev() {
		got = append(got, fmt.Sprintf("%s#%d", it.Key().UserKey, it.Key().SeqNum()))
	}
	slices.Reverse(got)
	if !slices.Equal(got, want) || it.Error() != nil {
		t.Fatalf("backward: %v (%v), want %v", got, it.Error(), want)
	}
	for _, s := range []struct {
		key     string
		ge, lt  string // "" = exhausted
		geSeq   uint64
		ltSeqNo uint64
	}{
		{"c", "c", "", 33, 0},
		{"d", "c", "", 33, 0}, // "d" sorts first
		{"bc", "bb", "c", 23, 31},
		{"bb", "bb", "c", 23, 31},
		{"ba", "b", "bb", 14, 21},
		{"b", "b", "bb", 14, 21},
		{"a", "a", "b", 3, 11},
		{"", "", "a", 0, 1}, // "" sorts last
	} {
		if ok := it.SeekGE([]byte(s.key)); ok != (s.ge != "") || ok && (string(it.Key().UserKey) != s.ge || it.Key().SeqNum() != s.geSeq) || it.Error() != nil {
			t.Errorf("SeekGE(%q) = %t at %s (%v), want %q#%d", s.key, ok, it.Key(), it.Error(), s.ge, s.geSeq)
		}
		if ok := it.SeekLT([]byte(s.key)); ok != (s.lt != "") || ok && (string(it.Key().UserKey) != s.lt || it.Key().SeqNum() != s.ltSeqNo) || it.Error() != nil {
			t.Errorf("SeekLT(%q) = %t at %s (%v), want %q#%d", s.key, ok, it.Key(), it.Error(), s.lt, s.ltSeqNo)
		}
	}
	for i, k := range keys {
		for snap := uint64(10 * i); snap <= uint64(10*i+5); snap++ {
			v, seq, kind, found, err := m.Get([]byte(k), snap)
			wantSeq := min(snap, uint64(10*i+3))
			if k == "b" && snap >= 14 {
				wantSeq = 14
			}
			switch {
			case err != nil:
				t.Fatalf("Get(%s, %d): %v", k, snap, err)
			case wantSeq == uint64(10*i):
				if found {
					t.Errorf("Get(%s, %d) found %q#%d before its first version", k, snap, v, seq)
				}
			case !found || seq != wantSeq || (kind == KindSet) != (wantSeq != 14) || kind == KindSet && string(v) != fmt.Sprintf("%s@%d", k, seq):
				t.Errorf("Get(%s, %d) = %q#%d %s %t, want #%d", k, snap, v, seq, kind, found, wantSeq)
			}
		}
	}
	for _, k := range []string{"", "ab", "bba", "d"} {
		if _, _, _, found, err := m.Get([]byte(k), SeqNumMax); found || err != nil {
			t.Errorf("Get(%q) of an absent key: found=%t err=%v", k, found, err)
		}
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestValidateEachOrder: the flush's walk hands the entries over in the
// comparer's order, which is what a table written from it needs.
func TestValidateEachOrder(t *testing.T) {
	for _, cmp := range testComparers {
		m := mustNew(t, Options{Comparer: cmp})
		for i := range 200 {
			k := testcmp.VersionedKey([]byte{byte(i % 7)}, uint64(i%5))
			if err := m.Add(uint64(i+1), KindSet, k, nil); err != nil {
				t.Fatal(err)
			}
		}
		var got []InternalKey
		if err := m.ValidateEach(func(ik InternalKey, _ []byte) error { got = append(got, ik.Clone()); return nil }, nil); err != nil {
			t.Fatal(err)
		}
		r := cmp.Resolve()
		if len(got) != int(m.Count()) || !slices.IsSortedFunc(got, r.CompareInternal) {
			t.Errorf("%s: %d entries of %d, sorted by the comparer: %t", cmp.Name, len(got), m.Count(), slices.IsSortedFunc(got, r.CompareInternal))
		}
		if cmp != base.DefaultComparer && slices.IsSortedFunc(got, base.DefaultComparer.CompareInternal) {
			t.Errorf("%s: entries in bytewise order", cmp.Name)
		}
	}
}
