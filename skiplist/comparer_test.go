package skiplist

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vigildb/vigil/internal/base"
	"github.com/vigildb/vigil/internal/testcmp"
)

// ikey appends the trailer seq<<8|1 to a user key.
func ikey(ukey []byte, seq uint64) []byte {
	return binary.LittleEndian.AppendUint64(bytes.Clone(ukey), seq<<8|1)
}

// TestUserComparerOptions: a UserComparer needs InternalKeys and must pass
// Check; every bytewise comparer is the built-in InternalKeys order itself
// (the same code paths, not a slower copy of them); any other selects
// orderUser. UserComparer reports the comparer in use.
func TestUserComparerOptions(t *testing.T) {
	arena, _ := NewArena(1 << 16)
	for _, o := range []Options{
		{UserComparer: testcmp.Reverse},
		{InternalKeys: true, UserComparer: &base.Comparer{Name: "no compare"}},
		{InternalKeys: true, UserComparer: &base.Comparer{Compare: bytes.Compare}},
		{InternalKeys: true, UserComparer: testcmp.Reverse, Compare: bytes.Compare},
	} {
		if _, err := New(arena, o); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", o, err)
		}
	}
	copied := *base.DefaultComparer // unresolved: New resolves it
	for _, c := range []*base.Comparer{nil, base.DefaultComparer, &copied} {
		l, err := New(arena, Options{InternalKeys: true, UserComparer: c})
		if err != nil {
			t.Fatal(err)
		}
		if l.order != orderInternal || l.ucmp != nil || l.UserComparer() != base.DefaultComparer {
			t.Errorf("bytewise comparer %p: order %d, UserComparer %v", c, l.order, l.UserComparer())
		}
	}
	l, err := New(arena, Options{InternalKeys: true, UserComparer: testcmp.Versioned})
	if err != nil {
		t.Fatal(err)
	}
	if l.order != orderUser || l.UserComparer().Name != testcmp.Versioned.Name || l.uabbrev == nil {
		t.Errorf("Versioned: order %d, UserComparer %v", l.order, l.UserComparer())
	}
	if l, _ := New(arena, Options{}); l.UserComparer() != nil {
		t.Error("a list without InternalKeys has a UserComparer")
	}
}

// countingComparer is testcmp.Reverse with its Compare and AbbreviatedKey
// calls counted, with or without the abbreviation.
func countingComparer(abbrev bool) (*base.Comparer, *atomic.Int64, *atomic.Int64) {
	var compares, abbrevs atomic.Int64
	c := &base.Comparer{
		Compare: func(a, b []byte) int { compares.Add(1); return testcmp.Reverse.Compare(a, b) },
		Name:    "vigil.test.CountingReverse",
	}
	if abbrev {
		c.AbbreviatedKey = func(k []byte) uint64 { abbrevs.Add(1); return testcmp.Reverse.AbbreviatedKey(k) }
	}
	return c, &compares, &abbrevs
}

// TestUserAbbreviationDecides: with keys whose first 8 bytes differ, the
// comparer's abbreviation decides every comparison of a search, an insert
// and a validated walk, and Compare is never called; keys that share their
// first 8 bytes need Compare; and without an abbreviation every comparison
// calls Compare.
func TestUserAbbreviationDecides(t *testing.T) {
	for _, validate := range []bool{false, true} {
		c, compares, abbrevs := countingComparer(true)
		arena, _ := NewArena(1 << 20)
		l, err := New(arena, Options{InternalKeys: true, UserComparer: c, Validate: validate})
		if err != nil {
			t.Fatal(err)
		}
		ins := l.NewInserter()
		for i := range 500 {
			k := ikey(binary.BigEndian.AppendUint64(nil, uint64(i*7919%500)<<40), 1)
			if err := ins.Add(k, nil); err != nil {
				t.Fatal(err)
			}
		}
		if compares.Load() != 0 {
			t.Errorf("validate=%t: inserts called Compare %d times", validate, compares.Load())
		}
		// Seek keys between the present ones (a present key would tie
		// with itself). Under Reverse, SeekGE lands on the smaller key.
		it := l.NewIter(validate)
		for i := range 500 {
			k := ikey(binary.BigEndian.AppendUint64(nil, uint64(2*i+1)<<39), 1)
			want := ikey(binary.BigEndian.AppendUint64(nil, uint64(i)<<40), 1)
			if !it.SeekGE(k) || !bytes.Equal(it.Key(), want) || it.SeekLT(k) != (i < 499) || it.Error() != nil {
				t.Fatalf("validate=%t: seeks of %x: %v", validate, k, it.Error())
			}
		}
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			n++
		}
		for ok := it.Last(); ok; ok = it.Prev() {
			n--
		}
		if n != 0 || it.Error() != nil {
			t.Fatalf("validate=%t: walks disagree (%d) or fail: %v", validate, n, it.Error())
		}
		if compares.Load() != 0 || abbrevs.Load() == 0 {
			t.Errorf("validate=%t: distinct abbreviations: %d Compare calls, %d abbreviations; want 0 and some",
				validate, compares.Load(), abbrevs.Load())
		}
		// Another version of a present key ties the abbreviations.
		if err := l.Add(ikey(binary.BigEndian.AppendUint64(nil, 7<<40), 2), nil); err != nil {
			t.Fatal(err)
		}
		if compares.Load() == 0 {
			t.Errorf("validate=%t: a tie of abbreviations did not call Compare", validate)
		}
	}
	c, compares, _ := countingComparer(false)
	arena, _ := NewArena(1 << 16)
	l, _ := New(arena, Options{InternalKeys: true, UserComparer: c})
	for i := range 50 {
		if err := l.Add(ikey([]byte{byte(i)}, 1), nil); err != nil {
			t.Fatal(err)
		}
	}
	if compares.Load() == 0 {
		t.Error("without an abbreviation Compare was not called")
	}
}

// userCorruptCase builds a list of height 1 under a UserComparer holding
// three keys, in the list's order, and then changes byte at of the middle
// key to b: the middle key then sorts before the first (down) or after the
// last (up), while staying in order with its other neighbour.
type userCorruptCase struct {
	name  string
	cmp   *base.Comparer
	keys  [3][]byte // user keys, in the comparer's order
	at    int
	b     byte
	up    bool
	tieAt bool // the change keeps the comparer's abbreviation: Compare must see it
}

func userCorruptCases() []userCorruptCase {
	k := func(s string) []byte { return []byte(s) }
	rev := [3][]byte{k("key000002"), k("key000001"), k("key000000")}
	vk := func(p string, v uint64) []byte { return testcmp.VersionedKey([]byte(p), v) }
	return []userCorruptCase{
		// Reverse: byte 8 lies past the 8-byte abbreviation.
		{"reverse/tied-abbrev", testcmp.Reverse, rev, 8, '3', false, true},
		{"reverse/distinct-abbrev", testcmp.Reverse, rev, 0, 'z', false, false},
		{"reverse/distinct-abbrev-up", testcmp.Reverse, rev, 0, 'a', true, false},
		{"reverse-noabbrev/tied", reverseNoAbbrev, rev, 8, '3', false, true},
		// Versioned: the version bytes are not in the abbreviation (the
		// prefix); version 2 -> 9 sorts before version 3.
		{"versioned/tied-abbrev", testcmp.Versioned, [3][]byte{vk("key", 3), vk("key", 2), vk("key", 1)}, 3 + 7, 9, false, true},
		{"versioned/tied-abbrev-up", testcmp.Versioned, [3][]byte{vk("key", 3), vk("key", 2), vk("key", 1)}, 3 + 7, 0, true, true},
		{"versioned/distinct-abbrev", testcmp.Versioned, [3][]byte{vk("k1", 5), vk("k2", 5), vk("k3", 5)}, 1, '0', false, false},
	}
}

func (c userCorruptCase) build(t *testing.T) (*Skiplist, [3][]byte) {
	t.Helper()
	arena, _ := NewArena(1 << 12)
	l, err := New(arena, Options{InternalKeys: true, UserComparer: c.cmp, MaxHeight: 1})
	if err != nil {
		t.Fatal(err)
	}
	var keys [3][]byte
	for i, k := range c.keys {
		keys[i] = ikey(k, 5)
	}
	if !slices.IsSortedFunc(keys[:], l.Compare) {
		t.Fatalf("case keys %x not in the comparer's order", keys)
	}
	for _, i := range []int{0, 2, 1} {
		if err := l.Add(keys[i], []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	nd := nodeOf(t, l, keys[1])
	before := l.userAbbrevAt(nd)
	l.buf[l.keyStart(nd)+c.at] = c.b
	if after := l.userAbbrevAt(nd); (after == before) != c.tieAt {
		t.Fatalf("abbreviation %x -> %x; the case wants a tie: %t", before, after, c.tieAt)
	}
	return l, keys
}

// TestCorruptOrderComparer is TestCorruptOrder under comparers: a middle key
// changed in place to sort before the first key (or after the last), with
// the comparer's abbreviation unchanged (Compare must see it) or changed.
// Validated reads that pass the damage report it, reads that stay clear of
// it do not, unvalidated reads report nothing, and Verify does.
func TestCorruptOrderComparer(t *testing.T) {
	for _, c := range userCorruptCases() {
		t.Run(c.name, func(t *testing.T) {
			l, keys := c.build(t)
			it := l.NewIter(true)
			if !c.up {
				wantCorrupt(t, "SeekGE(key1)", &it, it.SeekGE(keys[1]))
				wantCorrupt(t, "SeekGE(key2)", &it, it.SeekGE(keys[2]))
				wantCorrupt(t, "SeekLT(key2)", &it, it.SeekLT(keys[2]))
				wantCorrupt(t, "SeekGE(key0)", &it, it.SeekGE(keys[0]))
				wantCorrupt(t, "First", &it, it.First())
				if !it.Last() {
					t.Fatalf("Last should pass (the middle key is below the last): %v", it.Error())
				}
				wantCorrupt(t, "Last+Prev", &it, it.Prev())
			} else {
				wantCorrupt(t, "SeekGE(key2)", &it, it.SeekGE(keys[2]))
				wantCorrupt(t, "SeekLT(key2)", &it, it.SeekLT(keys[2]))
				it.First()
				ok := it.Next()
				ok = ok && it.Next()
				wantCorrupt(t, "First+Next+Next", &it, ok)
				wantCorrupt(t, "Last", &it, it.Last())
			}
			plain := l.NewIter(false)
			n := 0
			for ok := plain.First(); ok; ok = plain.Next() {
				n++
			}
			for ok := plain.Last(); ok; ok = plain.Prev() {
				n--
			}
			if n != 0 || plain.Error() != nil {
				t.Fatalf("unvalidated walks: %d, %v", n, plain.Error())
			}
			_, err := l.Verify(nil)
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("Verify: %v, want ErrCorruption", err)
			}
			// The error names the changed key, in hex.
			mid := l.keyAt(l.loadNext(l.loadNext(l.head, 0), 0))
			if !strings.Contains(err.Error(), fmt.Sprintf("%x", mid)) {
				t.Errorf("Verify error %q does not name %x", err, mid)
			}
		})
	}
}
