package vigil

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/vigildb/vigil/internal/testcmp"
)

// A DB records its comparer: it reopens with that comparer only, and the
// error names both.
func TestComparerRecorded(t *testing.T) {
	for _, tc := range []struct {
		create, reopen *Comparer
		ok             bool
	}{
		{testcmp.Reverse, testcmp.Reverse, true},
		{testcmp.Reverse, nil, false},
		{testcmp.Reverse, testcmp.Versioned, false},
		{nil, testcmp.Reverse, false},
		{nil, DefaultComparer, true},
		{FixedPrefixComparer(3), FixedPrefixComparer(3), true},
		{FixedPrefixComparer(3), FixedPrefixComparer(4), false},
	} {
		fs := vfs.NewMem()
		db, err := Open("db", &Options{FS: fs, Comparer: tc.create})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Put([]byte("k"), []byte("v"), nil); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db, err = Open("db", &Options{FS: fs, Comparer: tc.reopen})
		name := func(c *Comparer) string { return c.Resolve().Name }
		if tc.ok {
			if err != nil {
				t.Fatalf("%s then %s: %v", name(tc.create), name(tc.reopen), err)
			}
			db.Close()
			continue
		}
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), name(tc.create)) || !strings.Contains(err.Error(), name(tc.reopen)) {
			t.Fatalf("%s then %s: %v, want ErrInvalidArgument naming both", name(tc.create), name(tc.reopen), err)
		}
	}
}

func TestComparerValidate(t *testing.T) {
	for _, c := range []*Comparer{
		{Name: "x"},
		{Compare: testcmp.Reverse.Compare},
		{Compare: testcmp.Reverse.Compare, Name: "bytewise"},
	} {
		if err := (&Options{Comparer: c}).EnsureDefaults().Validate(); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("%+v: Validate = %v", c, err)
		}
	}
	if err := (&Options{Comparer: FixedPrefixComparer(2)}).EnsureDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
}

// A batch made without the DB orders range deletions bytewise; a DB of
// another order refuses them rather than write an inverted tombstone.
func TestComparerBatchRangeDel(t *testing.T) {
	db, err := Open("db", &Options{FS: vfs.NewMem(), Comparer: testcmp.Reverse})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := &Batch{}
	b.DeleteRange([]byte("a"), []byte("z"))
	if err := db.Apply(b, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("zero Batch's range deletion under Reverse: %v", err)
	}
	b = db.NewBatch()
	b.DeleteRange([]byte("z"), []byte("a"))
	if err := db.Apply(b, nil); err != nil {
		t.Fatalf("NewBatch's range deletion under Reverse: %v", err)
	}
	if err := db.DeleteRange([]byte("a"), []byte("z"), nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("inverted range under Reverse: %v", err)
	}
}

// Prefix iteration under a fixed-prefix comparer (bounds from the bytes)
// and under Versioned (no upper bound: Last and SeekLT scan), with the
// keys spread over memtable, L0 and lower levels, against the keys
// written.
func TestPrefixIteration(t *testing.T) {
	for _, c := range []*Comparer{FixedPrefixComparer(4), testcmp.Versioned} {
		t.Run(c.Name, func(t *testing.T) {
			db, err := Open("db", &Options{FS: vfs.NewMem(), Comparer: c, WriteBufferSize: minWriteBufferSize})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			key := func(p, i int) []byte {
				if c == testcmp.Versioned {
					return testcmp.VersionedKey(fmt.Appendf(nil, "p%03d", p), uint64(i))
				}
				return fmt.Appendf(nil, "p%03d/%04d", p, i)
			}
			rc := c.Resolve()
			for round := 0; round < 3; round++ {
				for p := round; p < 40; p += 3 {
					for i := 0; i < 20; i++ {
						if err := db.Put(key(p, i), fmt.Appendf(nil, "v%d", i), nil); err != nil {
							t.Fatal(err)
						}
					}
				}
				if round < 2 {
					if err := db.Flush(); err != nil {
						t.Fatal(err)
					}
				}
				if round == 0 {
					if err := db.Compact(nil, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, p := range []int{0, 1, 17, 39, 40} {
				prefix := rc.Prefix(key(p, 0))
				it, err := db.NewIter(&IterOptions{Prefix: prefix})
				if err != nil {
					t.Fatal(err)
				}
				var fwd, rev []string
				for ok := it.First(); ok; ok = it.Next() {
					fwd = append(fwd, string(it.Key()))
				}
				for ok := it.Last(); ok; ok = it.Prev() {
					rev = append([]string{string(it.Key())}, rev...)
				}
				want := 20
				if p == 40 {
					want = 0
				}
				if len(fwd) != want || fmt.Sprint(fwd) != fmt.Sprint(rev) {
					t.Fatalf("prefix %q: forward %d keys, reverse %d, want %d", prefix, len(fwd), len(rev), want)
				}
				for i, k := range fwd {
					if k != string(key(p, sortedIndex(c, i))) {
						t.Fatalf("prefix %q: key %d is %q", prefix, i, k)
					}
				}
				if want > 0 {
					mid := []byte(fwd[10])
					if !it.SeekLT(mid) || string(it.Key()) != fwd[9] {
						t.Fatalf("prefix %q: SeekLT(%q) at %q", prefix, mid, it.Key())
					}
					if !it.SeekPrefixGE(mid) || string(it.Key()) != fwd[10] {
						t.Fatalf("prefix %q: SeekPrefixGE(%q) at %q", prefix, mid, it.Key())
					}
				}
				if err := it.Close(); err != nil {
					t.Fatal(err)
				}
			}
			// The tables hold a third of the prefixes each: their filters
			// kept the scans above out of most of them, and Gets of absent
			// keys out of all.
			f := db.Metrics().Filter
			if f.PrefixChecked == 0 || f.PrefixUseful == 0 || f.PrefixUseful > f.PrefixChecked {
				t.Fatalf("prefix scans: filter checked %d tables, excluded %d", f.PrefixChecked, f.PrefixUseful)
			}
			for p := 0; p < 40; p++ {
				if _, err := db.Get(key(p, 99)); !errors.Is(err, ErrNotFound) {
					t.Fatalf("Get(%q): %v", key(p, 99), err)
				}
			}
			g := db.Metrics().Filter
			if g.Checked == 0 || g.Useful == 0 || g.Useful > g.Checked {
				t.Fatalf("Gets: filter checked %d tables, excluded %d", g.Checked, g.Useful)
			}
			t.Logf("filters: prefix scans %d of %d tables skipped; absent Gets %d of %d", f.PrefixUseful, f.PrefixChecked, g.Useful, g.Checked)
			// SeekPrefixGE without IterOptions.Prefix stays in the key's prefix.
			it, err := db.NewIter(nil)
			if err != nil {
				t.Fatal(err)
			}
			before := db.Metrics().Filter
			if it.SeekPrefixGE(key(40, 0)) {
				t.Fatalf("SeekPrefixGE of an absent prefix at %q", it.Key())
			}
			if after := db.Metrics().Filter; after.PrefixUseful == before.PrefixUseful {
				t.Fatalf("SeekPrefixGE of an absent prefix: no table skipped by its filter (%+v)", after)
			}
			if !it.SeekPrefixGE(key(5, 3)) || rc.Compare(rc.Prefix(it.Key()), rc.Prefix(key(5, 0))) != 0 {
				t.Fatalf("SeekPrefixGE(%q) at %q", key(5, 3), it.Key())
			}
			it.Close()
		})
	}
}

// sortedIndex maps the i-th key of a prefix in c's order to the number it
// was written with: Versioned puts the newest (largest) version first.
func sortedIndex(c *Comparer, i int) int {
	if c == testcmp.Versioned {
		return 19 - i
	}
	return i
}
